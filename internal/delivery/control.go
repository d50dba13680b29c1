package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// Control ops run on two worker pools, so that no op waits behind another kind: a durableJoin
// may take seconds (its catch-up copies what the channel got since the join cursor), the others
// are a read and at most one write. Each pool's queue is bounded, and a request finding it full
// is answered at once with errBusy.
const (
	joinWorkers    = 8
	controlWorkers = 4
	controlQueue   = 64
)

// controlOp is a parsed control request, ready to run.
type controlOp func(ctx context.Context) (any, error)

// controller serves the ctl.delivery rail during one term.
type controller struct {
	d     *Daemon
	t     *term
	joins *pool // durableJoin
	other *pool // durableLeave, listMemberships
}

func (d *Daemon) startControl(t *term) *controller {
	return &controller{d: d, t: t, joins: newPool(joinWorkers, controlQueue), other: newPool(controlWorkers, controlQueue)}
}

// close waits for the requests already queued, which are answered errNotServing once the
// term's context has ended.
func (c *controller) close() {
	c.joins.close()
	c.other.close()
}

// serve takes one request on the ctl.delivery rail and queues it on its pool; it never waits
// for an op. It answers only on the request's own .reply. leaf, and only a caller whose from.id
// is the subject's sender.
func (c *controller) serve(msg *nats.Msg) {
	if !meshwire.IsBoundReply(msg.Subject, msg.Reply) {
		c.d.log.Warn("control request with an unbound reply ignored", "subject", msg.Subject, "reply", msg.Reply)
		return
	}
	if !c.t.enter() {
		return // the term has ended: the requester's timeout tells it to retry
	}
	defer c.t.leave()
	name, op, err := c.d.parseControl(msg)
	if err == nil {
		p := c.other
		if name == wire.OpDurableJoin {
			p = c.joins
		}
		err = p.submit(func() { c.run(msg, name, op) })
	}
	if err != nil {
		c.d.reply(msg, nil, err)
	}
}

// run runs one queued op within the term and answers it.
func (c *controller) run(msg *nats.Msg, name string, op controlOp) {
	if c.t.ctx.Err() != nil {
		c.d.reply(msg, nil, errNotServing)
		return
	}
	ctx, cancel := context.WithTimeout(c.t.ctx, meshwire.ControlServeBudget)
	defer cancel()
	defer c.d.traced(ctx, name)()
	out, err := op(ctx)
	var data json.RawMessage
	if err == nil {
		data, err = json.Marshal(out)
	}
	if err != nil && c.t.ctx.Err() != nil {
		err = errNotServing // cut short by the term's end, not refused
	}
	c.d.reply(msg, data, err)
}

// reply answers a control request; a refusal carries its code (see controlCode).
func (d *Daemon) reply(msg *nats.Msg, data json.RawMessage, err error) {
	rep := wire.ControlReply{OK: err == nil, Data: data}
	if err != nil {
		rep.Error, rep.Code = err.Error(), controlCode(err)
	}
	body, _ := json.Marshal(rep) // raw JSON and strings always encode
	if err := msg.Respond(body); err != nil {
		d.log.Warn("control reply", "reply", msg.Reply, "err", err)
	}
}

// parseControl checks a request and returns its op's name and the op, bound to its caller.
func (d *Daemon) parseControl(msg *nats.Msg) (string, controlOp, error) {
	d.mu.Lock()
	active := d.active
	d.mu.Unlock()
	if !active {
		return "", nil, errNotServing
	}
	rs, err := meshwire.ParseRailRequest(msg.Subject)
	if err != nil {
		return "", nil, err
	}
	var req wire.ControlRequest
	if err := json.Unmarshal(msg.Data, &req); err != nil {
		return "", nil, fmt.Errorf("request is not valid JSON: %v", err)
	}
	if req.From.ID != rs.Caller.String() || !rs.Caller.HasPrincipalOwner() {
		return "", nil, errors.New("sender mismatch - request rejected")
	}
	caller := rs.Caller
	switch req.Op {
	case wire.OpDurableJoin:
		var args wire.DurableJoinArgs
		if err := json.Unmarshal(orEmpty(req.Args), &args); err != nil {
			return "", nil, fmt.Errorf("durableJoin: %v", err)
		}
		return req.Op, func(ctx context.Context) (any, error) {
			unlock, err := d.memberOps.lock(ctx, membershipOf(args.Channel, caller))
			if err != nil {
				return nil, err
			}
			defer unlock()
			return d.durableJoin(ctx, caller, args.Channel)
		}, nil
	case wire.OpDurableLeave:
		var args wire.DurableLeaveArgs
		if err := json.Unmarshal(orEmpty(req.Args), &args); err != nil {
			return "", nil, fmt.Errorf("durableLeave: %v", err)
		}
		return req.Op, func(ctx context.Context) (any, error) {
			unlock, err := d.memberOps.lock(ctx, membershipOf(args.Channel, caller))
			if err != nil {
				return nil, err
			}
			defer unlock()
			return d.durableLeave(ctx, caller, args)
		}, nil
	case meshwire.OpListMemberships:
		var args meshwire.ListMembershipsArgs
		if err := json.Unmarshal(orEmpty(req.Args), &args); err != nil {
			return "", nil, fmt.Errorf("listMemberships: %v", err)
		}
		return req.Op, func(context.Context) (any, error) { return d.listMemberships(caller, args.LifecycleUID) }, nil
	}
	return "", nil, fmt.Errorf("op %q not supported on the delivery control service", req.Op)
}

// membershipOf keys the control ops on one caller's membership of channel.
func membershipOf(channel string, caller wire.Principal) string {
	return channel + " " + caller.String() // a space is in neither
}

// keyLocks serialises operations by key: the control ops on one membership (a join and a leave,
// or two joins, of one channel by one caller) run one after the other, as they did when the rail
// ran one op at a time, while ops on other memberships run beside them. The zero value is ready
// to use.
type keyLocks struct {
	mu    sync.Mutex
	locks map[string]*keyLock // mu guards locks and each lock's users
}

type keyLock struct {
	held  chan struct{} // holds a token while the key is locked
	users int           // holders and waiters; the lock is dropped at 0
}

// lock waits until key is free, or returns ctx.Err(); unlock frees it.
func (k *keyLocks) lock(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{held: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	leave := func() {
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
	select {
	case l.held <- struct{}{}:
		return func() { <-l.held; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

func orEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("{}")
	}
	return raw
}

// aclFor finds the caller's one live ACL row: its lifecycle and read ACL. The lifecycle is never
// taken from the caller.
func (d *Daemon) aclFor(ctx context.Context, caller wire.Principal) (wire.Lifecycle, *meshwire.ACLRow, error) {
	b := meshwire.ACLBucket(d.cfg.Space)
	kv, err := d.js.KeyValue(ctx, string(b))
	if err != nil {
		return wire.Lifecycle{}, nil, fmt.Errorf("open %s: %w", b, err)
	}
	keys, err := kv.ListKeysFiltered(ctx, caller.String()+".*")
	if err != nil {
		return wire.Lifecycle{}, nil, fmt.Errorf("list ACL rows of %s: %w", caller, err)
	}
	var found []wire.Lifecycle
	var row *meshwire.ACLRow
	for key := range keys.Keys() {
		l, err := wire.ParseLifecycle(key)
		if err != nil {
			continue
		}
		r, _, err := getRow(ctx, d, b, key, aclRow)
		if err != nil || r == nil {
			continue
		}
		found, row = append(found, l), r
	}
	switch len(found) {
	case 0:
		return wire.Lifecycle{}, nil, fmt.Errorf("no read ACL on record for %s (not provisioned for durable delivery)", caller)
	case 1:
		return found[0], row, nil
	}
	return wire.Lifecycle{}, nil, fmt.Errorf("%s has %d live ACL rows; refusing to guess which lifecycle joins", caller, len(found))
}

// durableJoin establishes durable membership of channel for the caller's lifecycle: a cursor at
// the CHAT frontier, a catch-up copy of what the fan-out may have passed since, then activation.
func (d *Daemon) durableJoin(ctx context.Context, caller wire.Principal, channel string) (*wire.DurableJoinResult, error) {
	if err := wire.ValidateChannel(channel); err != nil {
		return nil, fmt.Errorf("durableJoin: %w", err)
	}
	l, acl, err := d.aclFor(ctx, caller)
	if err != nil {
		return nil, fmt.Errorf("durableJoin: %w", err)
	}
	if !wire.ChannelInAllow(acl.AllowSubscribe, channel) {
		return nil, fmt.Errorf("channel %q is not within your read ACL %q", channel, acl.AllowSubscribe)
	}
	row := d.member(channel, l)
	if row != nil && row.Open() && row.Activated {
		return &wire.DurableJoinResult{Durable: true, Generation: row.Generation}, nil
	}
	if row == nil || !row.Open() {
		cursor, err := d.chatFrontier(ctx)
		if err != nil {
			return nil, err
		}
		var gen int64 = 1
		if row != nil {
			gen = row.Generation + 1
		}
		row = &meshwire.MemberRow{Channel: channel, Owner: caller.String(), LifecycleUID: l.UID, State: meshwire.MemberDurableActive, JoinCursor: cursor, Generation: gen}
		if err := d.writeMember(ctx, row); err != nil {
			return nil, fmt.Errorf("durableJoin: %w", err)
		}
	}
	if err := d.catchUp(ctx, l, row); err != nil {
		return nil, fmt.Errorf("durableJoin: catch-up: %w", err)
	}
	row.Activated = true
	if err := d.writeMember(ctx, row); err != nil {
		return &wire.DurableJoinResult{Durable: false, Reason: "activation superseded by a concurrent leave or rejoin", Generation: row.Generation}, nil
	}
	return &wire.DurableJoinResult{Durable: true, Generation: row.Generation}, nil
}

// catchUp copies into the member's inbox what was posted on the channel after its join cursor
// and up to what the fan-out had reached, so nothing between the cursor and the fan-out's next
// message is missed. Duplicates with the fan-out's own copies collapse on the message id.
func (d *Daemon) catchUp(ctx context.Context, l wire.Lifecycle, row *meshwire.MemberRow) error {
	frontier, err := d.chatFrontier(ctx)
	if err != nil {
		return err
	}
	pos, err := d.fanoutPosition(ctx)
	if err != nil {
		return err
	}
	fence := max(frontier, pos)
	if fence <= row.JoinCursor {
		return nil
	}
	sp := d.cfg.Space
	filter, err := sp.ChatFilter(row.Channel)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("cu_%s_%d", l.Name(), row.Generation)
	_ = d.js.DeleteConsumer(ctx, sp.ChatStream(), name) // a leftover from a crash; usually absent
	cons, err := d.js.CreateConsumer(ctx, sp.ChatStream(), jetstream.ConsumerConfig{
		Name: name, FilterSubject: filter, AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true,
		InactiveThreshold: 30 * time.Second, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: row.JoinCursor + 1,
	})
	if err != nil {
		return err
	}
	defer func() { _ = d.js.DeleteConsumer(context.WithoutCancel(ctx), sp.ChatStream(), name) }() // else the idle threshold reaps it
	if cons.CachedInfo().NumPending == 0 {
		return nil
	}
	for {
		msgs, ferr := jsapi.Fetch(ctx, cons, 256, jetstream.FetchMaxWait(2*time.Second))
		for _, msg := range msgs {
			meta, err := msg.Metadata()
			if err != nil {
				return err
			}
			if meta.Sequence.Stream > fence {
				return nil
			}
			dl, err := wire.Guard(msg.Subject(), msg.Data())
			if err == nil && dl.Sender != l.Principal {
				// One copy stored before the next: all of them go to one member, in order.
				ack, err := d.toInbox(l, newInboxCopies(dl, meta.Sequence.Stream, meshwire.ReasonDurableChannel), row.Generation)
				if err == nil {
					err = stored(ctx, []jetstream.PubAckFuture{ack})
				}
				if err != nil {
					return err
				}
			}
			if meta.Sequence.Stream >= fence || meta.NumPending == 0 {
				return nil
			}
		}
		if ferr != nil {
			return ferr
		}
		if len(msgs) == 0 {
			return nil
		}
	}
}

// durableLeave ends the caller's membership of a channel at the CHAT frontier: a hard boundary
// for the backstop. The generation guards against a stale leave undoing a newer join.
func (d *Daemon) durableLeave(ctx context.Context, caller wire.Principal, args wire.DurableLeaveArgs) (*wire.DurableLeaveResult, error) {
	uid, err := wire.ParseLifecycleUID(string(args.LifecycleUID))
	if err != nil {
		return nil, fmt.Errorf("durableLeave: %w", err)
	}
	l := wire.Lifecycle{Principal: caller, UID: uid}
	row := d.member(args.Channel, l)
	if row == nil {
		return &wire.DurableLeaveResult{Channel: args.Channel, AlreadyLeft: true}, nil
	}
	if row.Generation != args.Generation {
		return nil, fmt.Errorf("stale membership write for %s/%s: generation %d, current %d", args.Channel, caller, args.Generation, row.Generation)
	}
	if row.LeaveCursor != nil {
		return &wire.DurableLeaveResult{Channel: args.Channel, AlreadyLeft: true}, nil
	}
	cursor, err := d.chatFrontier(ctx)
	if err != nil {
		return nil, err
	}
	row.State, row.LeaveCursor = meshwire.MemberLiveConfirmed, &cursor
	if err := d.writeMember(ctx, row); err != nil {
		return nil, fmt.Errorf("durableLeave: %w", err)
	}
	return &wire.DurableLeaveResult{Channel: args.Channel}, nil
}

// listMemberships lists the caller lifecycle's open memberships.
func (d *Daemon) listMemberships(caller wire.Principal, uid wire.LifecycleUID) (*meshwire.ListMembershipsResult, error) {
	if _, err := wire.ParseLifecycleUID(string(uid)); err != nil {
		return nil, fmt.Errorf("listMemberships: %w", err)
	}
	out := &meshwire.ListMembershipsResult{Memberships: []meshwire.Membership{}}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.members {
		if r.Owner == caller.String() && r.LifecycleUID == uid && r.LeaveCursor == nil {
			out.Memberships = append(out.Memberships, meshwire.Membership{Channel: r.Channel, Generation: r.Generation, Activated: r.Activated})
		}
	}
	return out, nil
}
