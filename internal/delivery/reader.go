package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// retiredAfter is how many deliveries an inbox entry for a lifecycle with no ACL row gets before
// it is deleted: a row can be briefly absent while a lifecycle is provisioned, but an entry for a
// retired lifecycle can never be delivered, and the store must not keep it forever.
const retiredAfter = 5

// readerWindow bounds the inbox entries the reader holds unacknowledged (its MaxAckPending).
const readerWindow = 1000

// readerLanes is how many leader reads of ACL rows a reader batch makes at once.
const readerLanes = 8

// read re-authorises a batch of inbox entries and hands each to its member: the member's current
// read ACL must cover the channel and, for a durable-channel copy, its membership interval must
// hold the message's CHAT sequence. What fails either is dropped. Each member's ACL row is read
// once per batch, after every entry of the batch (and so every post behind them) was stored: a
// revocation made before a post was stored is seen. The hand-offs are published in the order of
// the entries, so one member's keep their order, and each entry is acknowledged once its
// hand-off is stored.
func (d *Daemon) read(ctx context.Context, msgs []jetstream.Msg) {
	defer d.traced(ctx, "reader")()
	entries := make([]inboxEntry, len(msgs))
	var keys []string
	seen := map[string]bool{}
	bodies := map[string]*entryBody{} // one post's entries for its members are alike
	for i, msg := range msgs {
		e := &entries[i]
		e.msg = msg
		e.parse(bodies)
		if e.member != nil && !seen[meshwire.ACLKey(*e.member)] {
			seen[meshwire.ACLKey(*e.member)] = true
			keys = append(keys, meshwire.ACLKey(*e.member))
		}
	}
	acls := readAll(ctx, keys, func(ctx context.Context, key string) (*meshwire.ACLRow, error) {
		ctx, cancel := context.WithTimeout(ctx, handleTimeout)
		defer cancel()
		row, _, err := getRow(ctx, d, meshwire.ACLBucket(d.cfg.Space), key, aclRow)
		return row, err
	})
	f := newFlight(ctx)
	for i := range entries {
		e := &entries[i]
		if e.member == nil {
			continue // malformed: acknowledged, never handed over
		}
		acl := acls[meshwire.ACLKey(*e.member)]
		switch {
		case acl.err != nil:
			f.fail(i, acl.err)
		case acl.v == nil:
			e.retired = true
		default:
			d.handOff(f, i, e, acl.v)
		}
	}
	f.wait()
	forgotten := map[wire.Lifecycle]bool{}
	for i := range entries {
		e := &entries[i]
		switch err := f.err(i); {
		case err != nil:
			if !errors.Is(err, context.Canceled) {
				d.log.Warn("inbox hand-off failed; will retry", "subject", e.msg.Subject(), "err", err)
			}
			_ = e.msg.NakWithDelay(2 * time.Second)
		case e.retired && e.meta.NumDelivered < retiredAfter:
			// A row can be briefly absent while a lifecycle is provisioned.
			_ = e.msg.NakWithDelay(2 * time.Second)
		case e.retired:
			d.deleteEntry(ctx, e.msg, e.meta)
			forgotten[*e.member] = true
		default:
			_ = e.msg.Ack() // a lost ack redelivers; the hand-off de-duplicates
		}
	}
	for l := range forgotten {
		d.forget(ctx, l)
	}
}

// inboxEntry is one reader message, parsed: its member and body are nil when it is malformed.
type inboxEntry struct {
	msg     jetstream.Msg
	meta    *jetstream.MsgMetadata
	member  *wire.Lifecycle
	body    *entryBody
	retired bool // the member's ACL row is gone
}

// entryBody is an inbox entry's body, decoded, and the frame of its hand-off, encoded once for
// every member whose entry has this body.
type entryBody struct {
	entry meshwire.InboxEntry
	frame []byte
}

// parse fills in what msg holds, leaving member nil when it is not a well-formed dinbox entry.
// A body decoded before is taken from bodies.
func (e *inboxEntry) parse(bodies map[string]*entryBody) {
	meta, err := e.msg.Metadata()
	if err != nil {
		return
	}
	kind, member, err := meshwire.ParseLifecycleSubject(e.msg.Subject())
	if err != nil || kind != wire.KindDinbox {
		return
	}
	b, ok := bodies[string(e.msg.Data())]
	if !ok {
		b = &entryBody{}
		if err := json.Unmarshal(e.msg.Data(), &b.entry); err != nil || b.entry.Msg == nil {
			b = nil
		}
		bodies[string(e.msg.Data())] = b
	}
	if b != nil {
		e.meta, e.member, e.body = meta, &member, b
	}
}

// handOffFrame is the delivery frame of the body's hand-off.
func (b *entryBody) handOffFrame() ([]byte, error) {
	if b.frame == nil {
		frame, err := json.Marshal(wire.DeliveryFrame{Version: wire.DeliveryFrameVersion, Channel: b.entry.Channel, Msg: b.entry.Msg})
		if err != nil {
			return nil, err
		}
		b.frame = frame
	}
	return b.frame, nil
}

// handOff publishes entry i's hand-off on f when the member's read ACL acl covers its channel
// and, for a durable-channel copy, the member's membership holds it.
func (d *Daemon) handOff(f *flight, i int, e *inboxEntry, acl *meshwire.ACLRow) {
	entry, member := &e.body.entry, *e.member
	if !wire.ChannelInAllow(acl.AllowSubscribe, entry.Channel) {
		return // outside the read ACL now: never handed over
	}
	if entry.Reason == meshwire.ReasonDurableChannel {
		row := d.member(entry.Channel, member)
		if row == nil || !row.Eligible(entry.Seq) {
			return // left, or not yet a member, at that message
		}
	}
	frame, err := e.body.handOffFrame()
	if err != nil {
		f.fail(i, err)
		return
	}
	out := nats.NewMsg(meshwire.DlvSubject(d.cfg.Space, member))
	out.Data = frame
	out.Header.Set(wire.DeliveryFrameHeader, deliveryFrameVersion)
	var opts []jetstream.PublishOpt
	if id := meshwire.PlaneMsgID(entry.Msg.ID, member, entry.Generation); id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	f.publish(i, func() (jetstream.PubAckFuture, error) { return d.js.PublishMsgAsync(out, opts...) })
}

// deliveryFrameVersion is the delivery frame header's value.
var deliveryFrameVersion = strconv.Itoa(wire.DeliveryFrameVersion)

// deleteEntry removes an entry addressed to a retired lifecycle from the inbox stream, then
// settles its delivery. A delete the broker went on refusing is a permanent failure: it is
// logged, naming the entry, which stays in the stream, and the delivery is terminated, so that
// the entry does not hold a place in the reader's window for good. A delete that got no answer,
// or was cut short, is tried again on redelivery.
func (d *Daemon) deleteEntry(ctx context.Context, msg jetstream.Msg, meta *jetstream.MsgMetadata) {
	stream, seq := meshwire.InboxStream(d.cfg.Space), meta.Sequence.Stream
	err := d.deleteMsg(ctx, stream, seq)
	var refused *jetstream.APIError
	switch {
	case err == nil:
		_ = msg.Term() // the entry is gone; this only settles the delivery
	case errors.As(err, &refused):
		d.log.Error("an inbox entry of a retired lifecycle cannot be deleted; it stays in the stream",
			"stream", stream, "seq", seq, "subject", msg.Subject(), "attempts", deleteAttempts, "err", err)
		_ = msg.Term()
	default:
		if !errors.Is(err, context.Canceled) {
			d.log.Warn("delete an inbox entry of a retired lifecycle; will retry", "stream", stream, "seq", seq, "subject", msg.Subject(), "err", err)
		}
		_ = msg.NakWithDelay(2 * time.Second)
	}
}

// Deleting a message is tried deleteAttempts times at most: after the first try, a failed one is
// tried again after deleteBackoff, and then after twice the previous wait. Each try waits at most
// deleteTimeout for the broker's answer.
const (
	deleteAttempts = 5
	deleteBackoff  = 250 * time.Millisecond
	deleteTimeout  = 2 * time.Second
)

// deleteMsg deletes the message at seq of stream, retrying a failed delete with a bounded
// backoff. It returns nil once the message is gone, deleted now or before; otherwise the last
// try's error, which wraps the broker's refusal as a *jetstream.APIError when the broker
// answered one, or ctx's error when ctx ended first.
func (d *Daemon) deleteMsg(ctx context.Context, stream string, seq uint64) error {
	wait := deleteBackoff
	for attempt := 1; ; attempt++ {
		err := d.deleteMsgOnce(ctx, stream, seq)
		if err == nil || attempt == deleteAttempts {
			return err
		}
		d.log.Debug("delete a message; will retry", "stream", stream, "seq", seq, "attempt", attempt, "in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("delete message %d of %s: %w (the last try: %v)", seq, stream, ctx.Err(), err)
		case <-t.C:
		}
		wait *= 2
	}
}

// deleteMsgOnce asks the JetStream API once, within deleteTimeout, to delete the message at seq
// of stream; a message the stream does not hold (any more) counts as deleted.
func (d *Daemon) deleteMsgOnce(ctx context.Context, stream string, seq uint64) error {
	ctx, cancel := context.WithTimeout(ctx, deleteTimeout)
	defer cancel()
	return jsapi.DeleteMsg(ctx, d.nc, stream, seq)
}

// forget removes the membership rows of a retired lifecycle (its ACL row is gone), so the
// fan-out stops addressing it.
func (d *Daemon) forget(ctx context.Context, l wire.Lifecycle) {
	d.mu.Lock()
	var keys []string
	for key, r := range d.members {
		if r.Owner == l.Principal.String() && r.LifecycleUID == l.UID {
			keys = append(keys, key)
		}
	}
	d.mu.Unlock()
	for _, key := range keys {
		d.mu.Lock()
		rev := d.revs[key]
		d.mu.Unlock()
		if err := d.remove(ctx, meshwire.MembersBucket(d.cfg.Space), key, rev); err != nil {
			d.log.Warn("remove the membership of a retired lifecycle", "key", key, "err", err)
			continue
		}
		d.mu.Lock()
		delete(d.members, key)
		delete(d.revs, key)
		d.mu.Unlock()
		d.membershipChanged()
	}
}
