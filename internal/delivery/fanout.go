package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/metrics"
	"github.com/gocotal/cotal/wire"
)

// handleTimeout bounds each step of the fan-out and the reader: a registry read, or the wait for
// one publish's acknowledgement.
const handleTimeout = 20 * time.Second

// fanout copies a batch of CHAT messages to the inboxes they are owed: every member of a durable
// channel whose membership interval holds the message, or, on a live channel, each @mentioned
// peer that resolves to exactly one present instance whose read ACL covers the channel. Anything
// malformed or forged is skipped: the fan-out is routing, and the reader and the member re-check
// everything. A post is acknowledged once all of its copies are stored; one whose copies could
// not all be stored is redelivered, and its copies de-duplicate on their message ids.
//
// Each channel's config is read once per batch, after every post of the batch was stored, so it
// sees every change made before any of them (SPEC §7: one resolution everywhere); a watched copy
// would not, since its updates race the fan-out's. ctx is the term's: its end cuts the batch
// short, to be redelivered.
func (d *Daemon) fanout(ctx context.Context, msgs []jetstream.Msg) {
	defer d.traced(ctx, "fanout")()
	b := newFanoutRun(d)
	f := newFlight(ctx)
	for i, msg := range msgs {
		if err := b.post(ctx, f, i, msg); err != nil {
			f.fail(i, err)
		}
	}
	f.wait()
	for i, msg := range msgs {
		if err := f.err(i); err != nil {
			if !errors.Is(err, context.Canceled) {
				d.log.Warn("fan-out failed; will retry", "subject", msg.Subject(), "err", err)
			}
			_ = msg.Nak() // redelivered; inbox copies de-duplicate on their message ids
			continue
		}
		_ = msg.Ack() // a lost ack redelivers, and the copies de-duplicate
		if at, ok := b.copied[i]; ok {
			metrics.Handoff.Observe(time.Since(at).Seconds())
		}
	}
}

// fanoutRun is what one fan-out batch has read: each channel's effective config and
// membership, and each @mentioned target's lifecycle and read ACL.
type fanoutRun struct {
	d        *Daemon
	channels map[string]wire.EffectiveChannel
	members  map[string][]meshwire.MemberRow
	targets  map[wire.Principal]mentionTarget
	// copied holds, by the batch's index, when each post that is owed copies was stored.
	copied map[int]time.Time
}

// mentionTarget is a resolved @mention's lifecycle and read ACL, or why it has none.
type mentionTarget struct {
	l   wire.Lifecycle
	acl *meshwire.ACLRow
	err error
}

func newFanoutRun(d *Daemon) *fanoutRun {
	return &fanoutRun{d: d, channels: map[string]wire.EffectiveChannel{}, members: map[string][]meshwire.MemberRow{}, targets: map[wire.Principal]mentionTarget{}, copied: map[int]time.Time{}}
}

// post publishes the copies msg (the batch's i-th) is owed on f.
func (b *fanoutRun) post(ctx context.Context, f *flight, i int, msg jetstream.Msg) error {
	d := b.d
	dl, err := wire.Guard(msg.Subject(), msg.Data())
	if err != nil || dl.Kind != wire.DeliveryChannel {
		return nil
	}
	meta, err := msg.Metadata()
	if err != nil {
		return err
	}
	seq, channel := meta.Sequence.Stream, dl.Subject.Rest
	rows, ok := b.members[channel]
	if !ok {
		rows = d.membersOf(channel)
		b.members[channel] = rows
	}
	if len(rows) == 0 && len(dl.Message.Mentions) == 0 {
		// Owed to no one, whatever the channel's class: most posts on a live channel. A member
		// joining now is caught up to the fan-out's position, which is past this post.
		return nil
	}
	eff, ok := b.channels[channel]
	if !ok {
		if eff, err = d.channelConfig(ctx, channel); err != nil {
			return err
		}
		b.channels[channel] = eff
	}
	if eff.DeliveryClass == wire.ClassDurable {
		copies := newInboxCopies(dl, seq, meshwire.ReasonDurableChannel)
		for _, row := range rows {
			if row.Owner == dl.Sender.String() || !row.Eligible(seq) {
				continue
			}
			p, err := wire.ParsePrincipal(row.Owner)
			if err != nil {
				continue
			}
			member := wire.Lifecycle{Principal: p, UID: row.LifecycleUID}
			b.copied[i] = meta.Timestamp
			f.publish(i, func() (jetstream.PubAckFuture, error) {
				return d.toInbox(member, copies, row.Generation)
			})
		}
		return nil
	}
	copies := newInboxCopies(dl, seq, meshwire.ReasonLiveMention)
	for _, name := range dl.Message.Mentions {
		target, ok := d.presence.resolve(name)
		if !ok || target == dl.Sender {
			continue
		}
		t, ok := b.targets[target]
		if !ok {
			actx, cancel := context.WithTimeout(ctx, handleTimeout)
			t.l, t.acl, t.err = d.aclFor(actx, target)
			cancel()
			b.targets[target] = t
		}
		if t.err != nil || !wire.ChannelInAllow(t.acl.AllowSubscribe, channel) {
			continue // nothing ever leaves a target's read ACL
		}
		b.copied[i] = meta.Timestamp
		f.publish(i, func() (jetstream.PubAckFuture, error) {
			return d.toInbox(t.l, copies, 0)
		})
	}
	return nil
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

// inboxCopies encodes the inbox entries of one message, once per membership generation: the
// entry is the same for every member of a generation.
type inboxCopies struct {
	dl     *wire.Delivery
	seq    uint64
	reason string
	bodies map[int64][]byte
}

func newInboxCopies(dl *wire.Delivery, seq uint64, reason string) *inboxCopies {
	return &inboxCopies{dl: dl, seq: seq, reason: reason, bodies: map[int64][]byte{}}
}

// body returns the entry of generation gen.
func (c *inboxCopies) body(gen int64) ([]byte, error) {
	if b, ok := c.bodies[gen]; ok {
		return b, nil
	}
	m := *c.dl.Message
	m.Channel, m.To, m.ToService = c.dl.Subject.Rest, "", "" // the channel the subject proves
	b, err := json.Marshal(meshwire.InboxEntry{Msg: &m, Channel: m.Channel, Seq: c.seq, Reason: c.reason, Generation: gen})
	if err != nil {
		return nil, err
	}
	c.bodies[gen] = b
	return b, nil
}

// toInbox publishes one member's copy of c's message to its dinbox subject, de-duplicated per
// member lifecycle and generation by the Plane-3 message id, and returns the future of its store.
func (d *Daemon) toInbox(member wire.Lifecycle, c *inboxCopies, gen int64) (jetstream.PubAckFuture, error) {
	body, err := c.body(gen)
	if err != nil {
		return nil, err
	}
	var opts []jetstream.PublishOpt
	if id := meshwire.PlaneMsgID(c.dl.Message.ID, member, gen); id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	return d.js.PublishAsync(meshwire.DinboxSubject(d.cfg.Space, member), body, opts...)
}

// channelConfig resolves a channel's effective config from the registry with leader reads.
func (d *Daemon) channelConfig(ctx context.Context, channel string) (wire.EffectiveChannel, error) {
	ctx, cancel := context.WithTimeout(ctx, handleTimeout)
	defer cancel()
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
