package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/wire"
)

// retiredAfter is how many deliveries an inbox entry for a lifecycle with no ACL row gets before
// it is deleted: a row can be briefly absent while a lifecycle is provisioned, but an entry for a
// retired lifecycle can never be delivered, and the store must not keep it forever.
const retiredAfter = 5

// readerWindow bounds the inbox entries the reader holds unacknowledged (its MaxAckPending).
const readerWindow = 1000

// readerLanes is how many inbox entries the reader re-authorises at once. Each lane serves a
// fixed share of the members and hands one entry off, stored, before the next, so one member's
// hand-offs keep their order.
const readerLanes = 8

// lanes runs the reader's entries on readerLanes goroutines, each entry on its member's lane:
// re-authorising an entry costs a leader read of the member's ACL row, and one at a time those
// round trips bounded the whole durable-channel path.
type lanes struct {
	ctx context.Context // the term's: its end stops the lanes
	in  []chan jetstream.Msg
	wg  sync.WaitGroup
}

// startLanes starts the reader's lanes of one active term. They stop when ctx ends, cutting
// short the entry each is reading; close waits for them.
func (d *Daemon) startLanes(ctx context.Context) *lanes {
	l := &lanes{ctx: ctx}
	for range readerLanes {
		in := make(chan jetstream.Msg, readerWindow/readerLanes)
		l.in = append(l.in, in)
		l.wg.Go(func() { // owned: close waits for it
			for {
				select {
				case <-ctx.Done():
					return // what is unread is redelivered after the ack wait
				case msg := <-in:
					d.read(ctx, msg)
				}
			}
		})
	}
	return l
}

// dispatch queues an inbox entry on its member's lane; once the term has ended it drops it,
// to be redelivered after the ack wait.
func (l *lanes) dispatch(_ context.Context, msg jetstream.Msg) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(msg.Subject())) // the subject names the member; hashing never fails
	select {
	case l.in[h.Sum32()%readerLanes] <- msg:
	case <-l.ctx.Done():
	}
}

// close waits for the lanes, which stop when the term's context ends.
func (l *lanes) close() { l.wg.Wait() }

// read re-authorises one inbox entry and hands it to its member: the member's current read ACL
// must cover the channel and, for a durable-channel copy, its membership interval must hold the
// message's CHAT sequence. What fails either is dropped.
func (d *Daemon) read(ctx context.Context, msg jetstream.Msg) {
	ctx, cancel := context.WithTimeout(ctx, handleTimeout)
	defer cancel()
	defer d.traced(ctx, "reader")()
	meta, err := msg.Metadata()
	if err != nil {
		_ = msg.Nak()
		return
	}
	settle, err := d.readOne(ctx, msg, meta)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			d.log.Warn("inbox hand-off failed; will retry", "subject", msg.Subject(), "err", err)
		}
		_ = msg.NakWithDelay(2 * time.Second)
		return
	}
	settle()
}

// readOne decides an entry's fate and returns how to settle it.
func (d *Daemon) readOne(ctx context.Context, msg jetstream.Msg, meta *jetstream.MsgMetadata) (func(), error) {
	ack := func() { _ = msg.Ack() } // a lost ack redelivers; the hand-off de-duplicates
	kind, member, err := wire.ParseLifecycleSubject(msg.Subject())
	if err != nil || kind != wire.KindDinbox {
		return ack, nil
	}
	var entry wire.InboxEntry
	if err := json.Unmarshal(msg.Data(), &entry); err != nil || entry.Msg == nil {
		return ack, nil
	}
	acl, _, err := getRow(ctx, d, d.cfg.Space.ACLBucket(), wire.ACLKey(member), aclRow)
	if err != nil {
		return nil, err
	}
	if acl == nil {
		if meta.NumDelivered < retiredAfter {
			return func() { _ = msg.NakWithDelay(2 * time.Second) }, nil
		}
		return func() {
			d.deleteEntry(ctx, msg, meta)
			d.forget(ctx, member)
		}, nil
	}
	if !wire.ChannelInAllow(acl.AllowSubscribe, entry.Channel) {
		return ack, nil // outside the read ACL now: never handed over
	}
	if entry.Reason == wire.ReasonDurableChannel {
		row := d.member(entry.Channel, member)
		if row == nil || !row.Eligible(entry.Seq) {
			return ack, nil // left, or not yet a member, at that message
		}
	}
	frame, err := json.Marshal(wire.DeliveryFrame{Version: wire.DeliveryFrameVersion, Channel: entry.Channel, Msg: entry.Msg})
	if err != nil {
		return nil, err
	}
	out := nats.NewMsg(d.cfg.Space.DlvSubject(member))
	out.Data = frame
	out.Header.Set(wire.DeliveryFrameHeader, fmt.Sprint(wire.DeliveryFrameVersion))
	var opts []jetstream.PublishOpt
	if id := wire.PlaneMsgID(entry.Msg.ID, member, entry.Generation); id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	if _, err := d.js.PublishMsg(ctx, out, opts...); err != nil {
		return nil, err
	}
	return ack, nil
}

// deleteEntry removes an entry addressed to a retired lifecycle from the inbox stream, then
// settles its delivery. A delete the broker went on refusing is a permanent failure: it is
// logged, naming the entry, which stays in the stream, and the delivery is terminated, so that
// the entry does not hold a place in the reader's window for good. A delete that got no answer,
// or was cut short, is tried again on redelivery.
func (d *Daemon) deleteEntry(ctx context.Context, msg jetstream.Msg, meta *jetstream.MsgMetadata) {
	stream, seq := d.cfg.Space.InboxStream(), meta.Sequence.Stream
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

// msgDeleteReply is the JetStream API's answer to a message delete.
type msgDeleteReply struct {
	Success bool                `json:"success"`
	Error   *jetstream.APIError `json:"error"`
}

// deleteMsgOnce asks the JetStream API once to delete the message at seq of stream, and checks
// its answer: a message the stream does not hold (any more) counts as deleted.
func (d *Daemon) deleteMsgOnce(ctx context.Context, stream string, seq uint64) error {
	ctx, cancel := context.WithTimeout(ctx, deleteTimeout)
	defer cancel()
	req, _ := json.Marshal(map[string]uint64{"seq": seq}) // a map of numbers always encodes
	msg, err := d.nc.RequestWithContext(ctx, jsapi.MsgDelete+stream, req)
	if err != nil {
		return fmt.Errorf("delete message %d of %s: %w", seq, stream, err)
	}
	var rep msgDeleteReply
	switch err := json.Unmarshal(msg.Data, &rep); {
	case err != nil:
		return fmt.Errorf("delete message %d of %s: the broker's answer %q is not a JetStream API reply: %w", seq, stream, msg.Data, err)
	case rep.Error != nil && msgGone(rep.Error):
		return nil
	case rep.Error != nil:
		return fmt.Errorf("delete message %d of %s: %w", seq, stream, rep.Error)
	case !rep.Success:
		return fmt.Errorf("delete message %d of %s: the broker answered %s without success", seq, stream, msg.Data)
	}
	return nil
}

// msgGone reports whether a message delete was refused because the stream does not hold the
// message: a memory stream says the sequence is not found, a file stream that its store has no
// such message.
func msgGone(e *jetstream.APIError) bool {
	switch int(e.ErrorCode) {
	case jsapi.ErrCodeNoMessage, jsapi.ErrCodeSequenceNotFound:
		return true
	case jsapi.ErrCodeMsgDeleteFailed:
		return e.Description == jsapi.StoreNoMessage || e.Description == jsapi.StoreEOF
	}
	return false
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
		if err := d.remove(ctx, d.cfg.Space.MembersBucket(), key, rev); err != nil {
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
