package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/wire"
)

// handleTimeout bounds the work on one fan-out or reader message.
const handleTimeout = 20 * time.Second

// fanout copies a CHAT message to the inboxes it is owed: every member of a durable channel
// whose membership interval holds it, or, on a live channel, each @mentioned peer that resolves
// to exactly one present instance whose read ACL covers the channel. Anything malformed or
// forged is skipped: the fan-out is routing, and the reader and the member re-check everything.
//
// ctx is the term's: its end cuts the message short, to be redelivered.
func (d *Daemon) fanout(ctx context.Context, msg jetstream.Msg) {
	ctx, cancel := context.WithTimeout(ctx, handleTimeout)
	defer cancel()
	defer d.traced(ctx, "fanout")()
	if err := d.fanoutOne(ctx, msg); err != nil {
		if !errors.Is(err, context.Canceled) {
			d.log.Warn("fan-out failed; will retry", "subject", msg.Subject(), "err", err)
		}
		_ = msg.Nak() // redelivered; inbox copies de-duplicate on their message ids
		return
	}
	_ = msg.Ack() // a lost ack redelivers, and the copies de-duplicate
}

func (d *Daemon) fanoutOne(ctx context.Context, msg jetstream.Msg) error {
	dl, err := wire.Guard(msg.Subject(), msg.Data())
	if err != nil || dl.Kind != wire.DeliveryChannel {
		return nil
	}
	meta, err := msg.Metadata()
	if err != nil {
		return err
	}
	seq, channel := meta.Sequence.Stream, dl.Subject.Rest
	eff, err := d.channelConfig(ctx, channel)
	if err != nil {
		return err
	}
	// The copies are published together and the post acknowledged once all are stored.
	var acks []jetstream.PubAckFuture
	if eff.DeliveryClass == wire.ClassDurable {
		for _, row := range d.membersOf(channel) {
			if row.Owner == dl.Sender.String() || !row.Eligible(seq) {
				continue
			}
			p, err := wire.ParsePrincipal(row.Owner)
			if err != nil {
				continue
			}
			ack, err := d.toInbox(wire.Lifecycle{Principal: p, UID: row.LifecycleUID}, dl, seq, wire.ReasonDurableChannel, row.Generation)
			if err != nil {
				return err
			}
			acks = append(acks, ack)
		}
		return stored(ctx, acks)
	}
	for _, name := range dl.Message.Mentions {
		target, ok := d.presence.resolve(name)
		if !ok || target == dl.Sender {
			continue
		}
		l, acl, err := d.aclFor(ctx, target)
		if err != nil || !wire.ChannelInAllow(acl.AllowSubscribe, channel) {
			continue // nothing ever leaves a target's read ACL
		}
		ack, err := d.toInbox(l, dl, seq, wire.ReasonLiveMention, 0)
		if err != nil {
			return err
		}
		acks = append(acks, ack)
	}
	return stored(ctx, acks)
}

// stored waits until the broker has stored every publish of acks.
func stored(ctx context.Context, acks []jetstream.PubAckFuture) error {
	for _, ack := range acks {
		select {
		case <-ack.Ok():
		case err := <-ack.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// toInbox publishes one member's copy to its dinbox subject, de-duplicated per member lifecycle
// and generation by the Plane-3 message id, and returns the future of its store.
func (d *Daemon) toInbox(member wire.Lifecycle, dl *wire.Delivery, seq uint64, reason string, gen int64) (jetstream.PubAckFuture, error) {
	m := *dl.Message
	m.Channel, m.To, m.ToService = dl.Subject.Rest, "", "" // the channel the subject proves
	body, err := json.Marshal(wire.InboxEntry{Msg: &m, Channel: m.Channel, Seq: seq, Reason: reason, Generation: gen})
	if err != nil {
		return nil, err
	}
	var opts []jetstream.PublishOpt
	if id := wire.PlaneMsgID(m.ID, member, gen); id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	return d.js.PublishAsync(d.cfg.Space.DinboxSubject(member), body, opts...)
}

// channelConfig resolves a channel's effective config from the registry, fresh for every message
// (SPEC §7: one resolution everywhere). A read after the post was stored sees every change made
// before the post; a watched copy would not, since its updates race the fan-out's.
func (d *Daemon) channelConfig(ctx context.Context, channel string) (wire.EffectiveChannel, error) {
	b := d.cfg.Space.ChannelsBucket()
	chp, _, err := getRow(ctx, d, b, channel, channelRow)
	if err != nil {
		return wire.EffectiveChannel{}, err
	}
	defp, _, err := getRow(ctx, d, b, wire.ChannelDefaultsKey, defaultsRow)
	if err != nil {
		return wire.EffectiveChannel{}, err
	}
	return wire.ResolveChannel(chp, defp), nil
}

// roster is the daemon's view of presence, for resolving @mentions at publish time.
type roster struct {
	mu   sync.Mutex
	rows map[string]*wire.Presence
}

// resolve returns the one present instance whose card name is name (without regard to case).
// An unknown or ambiguous name resolves to nothing.
func (r *roster) resolve(name string) (wire.Principal, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var found []string
	now := time.Now()
	for key, p := range r.rows {
		if p != nil && p.Status != wire.StatusOffline && !p.Stale(now) && strings.EqualFold(p.Card.Name, name) {
			found = append(found, key)
		}
	}
	if len(found) != 1 {
		return wire.Principal{}, false
	}
	p, err := wire.ParsePrincipal(found[0])
	return p, err == nil
}

// watchPresence keeps the roster current until stop is called. An instance appearing or going
// away (offline, or its row deleted) is a connection opening or closing, which the membership
// feed follows.
func (d *Daemon) watchPresence(ctx context.Context) (stop func(), err error) {
	return d.watch(ctx, d.cfg.Space.PresenceBucket(), func(key string, value []byte) {
		var row *wire.Presence
		if value != nil {
			if p, err := wire.DecodePresence(key, value); err == nil {
				row = p
			}
		}
		d.presence.mu.Lock()
		was := present(d.presence.rows[key])
		d.presence.rows[key] = row
		d.presence.mu.Unlock()
		if was != present(row) {
			d.membershipChanged()
		}
	})
}

// present reports whether a presence row is an instance that is there: a row, not offline.
func present(p *wire.Presence) bool { return p != nil && p.Status != wire.StatusOffline }
