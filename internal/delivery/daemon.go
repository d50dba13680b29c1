// Package delivery is the delivery daemon (the reference's Plane 3): the durable backstop of
// durable channels and of @mentions on live channels, durable channel membership over the
// ctl.delivery rail, the display-only membership feed (when configured, see FeedConfig), and the
// delivery liveness plane.
//
// One daemon per space is active, under the lease lease.0 in the space's delivery bucket; others
// wait as standby and take over when the lease lapses. The active daemon copies each post on a
// durable channel to every member's inbox (fan-out), then re-checks each copy against the
// member's current read ACL and membership interval before handing it to the member (reader). A
// member acknowledges a hand-off only after surfacing it, so a member that was offline or busy
// gets every post within retention, once.
package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/gocotal/cotal/internal/liveness"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// Config configures a daemon. The zero value of each duration takes its default.
type Config struct {
	Space wire.Space
	// Holder is the daemon's principal dot-form, recorded in the lease.
	Holder string
	// Log receives the daemon's diagnostics; nil discards them.
	Log *slog.Logger
	// Renew is how often the active daemon renews its lease (default a third of the lease TTL).
	Renew time.Duration
	// Standby is how often a standby daemon tries to take the lease (default 1 s).
	Standby time.Duration
	// Feed, when set, has the active daemon write the space's membership feed (SPEC §8); see
	// FeedConfig. Without it the feed is not written.
	Feed *FeedConfig
}

// LeaseTTL is the delivery bucket's TTL, meshwire.DeliveryLeaseTTL: a lease not renewed for this
// long lapses.
const LeaseTTL = meshwire.DeliveryLeaseTTL

// Daemon is a delivery daemon on one connection (with the delivery profile's grants).
type Daemon struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	cfg  Config
	log  *slog.Logger
	inst string // this incarnation

	presence roster

	// memberOps serialises the control ops on each membership; ops run on worker pools.
	memberOps keyLocks

	// hook, when a test sets it before Run, is called as each handler body begins, with the
	// body's context and the handler's name (fanout, reader, or the control op); what it
	// returns is called as the body ends.
	hook func(ctx context.Context, handler string) (end func())

	mu      sync.Mutex // guards the fields below
	members map[string]*meshwire.MemberRow
	revs    map[string]uint64 // member key → revision
	lease   uint64            // the lease row's revision while held
	active  bool
	feed    *feed // the active term's membership feed, if any
}

// New returns a daemon for cfg on nc.
func New(nc *nats.Conn, cfg Config) (*Daemon, error) {
	if _, err := wire.ParseSpace(string(cfg.Space)); err != nil {
		return nil, err
	}
	if _, err := wire.ParsePrincipal(cfg.Holder); err != nil {
		return nil, fmt.Errorf("holder: %w", err)
	}
	if cfg.Renew <= 0 {
		cfg.Renew = LeaseTTL / 3
	}
	if cfg.Standby <= 0 {
		cfg.Standby = time.Second
	}
	if f := cfg.Feed; f != nil && (f.Observer == nil || f.Writer == nil || f.Account == "") {
		return nil, errors.New("delivery: the membership feed needs an observer connection, a writer connection and the space's account")
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// An asynchronous publish (a fan-out copy) the broker never acknowledges fails after
	// handleTimeout instead of holding its post forever.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(handleTimeout))
	if err != nil {
		return nil, err
	}
	return &Daemon{nc: nc, js: js, cfg: cfg, log: log.With("space", cfg.Space), inst: nuid.Next(), presence: roster{rows: map[string]*wire.Presence{}}}, nil
}

// Run serves until ctx ends: it waits as standby until it holds the lease, serves while it
// holds it, and goes back to standby if it loses it or its term fails. On ctx's end it drains
// the term it serves (intake stopped, every handler returned) and releases the lease before it
// returns; it returns an error only once its connection is closed.
func (d *Daemon) Run(ctx context.Context) error {
	for {
		if err := d.acquire(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		err := d.serve(ctx)
		if ctx.Err() != nil {
			d.release()
			return nil
		}
		if errors.Is(err, errLeaseLost) {
			d.log.Warn("lost the delivery lease; standing by", "err", err)
			continue
		}
		d.release()
		if d.nc.IsClosed() {
			return err
		}
		// A term that could not start or went wrong (a cluster electing a stream's leader does
		// not answer for a while) hands the lease on and stands by again: a daemon that stopped
		// for good would leave its node no standby for the next failover.
		d.log.Warn("the delivery daemon stopped serving; standing by", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d.cfg.Standby):
		}
	}
}

// Active reports whether the daemon serves: it holds the space's delivery lease.
func (d *Daemon) Active() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.active
}

// acquire waits until this daemon creates the lease row (not ready yet).
func (d *Daemon) acquire(ctx context.Context) error {
	t := time.NewTicker(d.cfg.Standby)
	defer t.Stop()
	b := meshwire.DeliveryBucket(d.cfg.Space)
	for {
		rev, err := d.put(ctx, b, meshwire.LeaseKey(0), d.leaseRow(false), 0)
		if errors.Is(err, errKeyExists) {
			// This incarnation's own row, put back by a repair after a renewal lost the race
			// with the foreign row it replaced: take it up again rather than wait out its TTL.
			if cur := rewrittenAs(ctx, d, b, meshwire.LeaseKey(0), leaseRow, d.ownLease); cur != 0 {
				rev, err = d.put(ctx, b, meshwire.LeaseKey(0), d.leaseRow(false), cur)
			}
		}
		if err == nil {
			d.mu.Lock()
			d.lease = rev
			d.mu.Unlock()
			d.log.Info("delivery lease acquired", "incarnation", d.inst)
			return nil
		}
		if !errors.Is(err, errKeyExists) {
			d.log.Warn("acquire the delivery lease", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (d *Daemon) leaseRow(ready bool) []byte {
	b, _ := json.Marshal(meshwire.DeliveryLease{Holder: d.cfg.Holder, Incarnation: d.inst, Since: wire.MillisOf(time.Now()), Ready: ready}) // a struct of strings and numbers always encodes
	return b
}

// ownLease reports whether l is this incarnation's lease row.
func (d *Daemon) ownLease(l *meshwire.DeliveryLease) bool {
	return l.Holder == d.cfg.Holder && l.Incarnation == d.inst
}

// renew rewrites the lease at its revision; losing the race means the lease is gone.
func (d *Daemon) renew(ctx context.Context, ready bool) error {
	d.mu.Lock()
	rev := d.lease
	d.mu.Unlock()
	b := meshwire.DeliveryBucket(d.cfg.Space)
	next, err := d.put(ctx, b, meshwire.LeaseKey(0), d.leaseRow(ready), rev)
	if err != nil && wrongRevision(err) {
		// Still this incarnation's row at another revision: restored by a repair, not taken.
		if cur := rewrittenAs(ctx, d, b, meshwire.LeaseKey(0), leaseRow, d.ownLease); cur != 0 {
			next, err = d.put(ctx, b, meshwire.LeaseKey(0), d.leaseRow(ready), cur)
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %v", errLeaseLost, err)
	}
	d.mu.Lock()
	d.lease = next
	d.mu.Unlock()
	return nil
}

// release deletes the lease if it is still ours, so a standby takes over at once.
func (d *Daemon) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d.mu.Lock()
	rev := d.lease
	d.mu.Unlock()
	if err := d.remove(ctx, meshwire.DeliveryBucket(d.cfg.Space), meshwire.LeaseKey(0), rev); err != nil {
		d.log.Warn("release the delivery lease", "err", err)
	}
}

// serve runs one active term: the control rail, fan-out, reader and liveness, with the lease
// renewed, until ctx ends or the lease is lost. Every handler runs with the term's context, and
// serve returns only once the term has drained: intake stopped, consumers closed, handlers
// returned.
func (d *Daemon) serve(ctx context.Context) (err error) {
	if err := d.loadMembers(ctx); err != nil {
		return err
	}
	sp := d.cfg.Space
	t := newTerm(ctx)
	// stops undo the term's start in reverse order, each waiting for what it stops.
	var stops []func()
	defer func() {
		d.mu.Lock()
		d.active = false // control requests now get errNotServing
		d.mu.Unlock()
		t.cancel() // cut short what runs
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		t.end() // the handlers of the subscriptions that do not wait for them
	}()
	stopPresence, err := d.watchPresence(t.ctx)
	if err != nil {
		return fmt.Errorf("watch presence: %w", err)
	}
	stops = append(stops, stopPresence)
	stopFeed, err := d.startFeed(t.ctx)
	if err != nil {
		return err
	}
	stops = append(stops, stopFeed)
	ctl := d.startControl(t)
	stops = append(stops, ctl.close)
	ctlSub, err := d.nc.QueueSubscribe(meshwire.ControlServeFilter(sp, wire.ControlDelivery), string(wire.ControlDelivery), ctl.serve)
	if err != nil {
		return fmt.Errorf("serve %s: %w", wire.ControlDelivery, err)
	}
	stops = append(stops, func() { _ = ctlSub.Unsubscribe() }) // t.end waits for its handler
	live, err := liveness.Serve(d.nc, sp, wire.PlaneDelivery, d.gradeIn(t), d.log)
	if err != nil {
		return err
	}
	stops = append(stops, func() { _ = live.Unsubscribe() }) // t.end waits for its grader
	fanouts := startBatcher(t.ctx, fanoutBatch, d.fanout)
	stops = append(stops, fanouts.close)
	fanout, err := d.consume(ctx, sp.ChatStream(), jetstream.ConsumerConfig{
		Durable: meshwire.FanoutDurable, FilterSubject: sp.KindAll(wire.KindChat), DeliverPolicy: jetstream.DeliverNewPolicy,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: meshwire.AckWait,
	}, t.handler(fanouts.add))
	if err != nil {
		return err
	}
	stops = append(stops, func() { stopConsuming(fanout) })
	reads := startBatcher(t.ctx, readerBatch, d.read)
	stops = append(stops, reads.close)
	reader, err := d.consume(ctx, meshwire.InboxStream(sp), jetstream.ConsumerConfig{
		Durable: meshwire.ReaderDurable, FilterSubject: sp.KindAll(wire.KindDinbox), DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: meshwire.AckWait, MaxAckPending: readerWindow,
	}, t.handler(reads.add))
	if err != nil {
		return err
	}
	stops = append(stops, func() { stopConsuming(reader) })
	if err := d.renew(ctx, true); err != nil {
		return err
	}
	d.mu.Lock()
	d.active = true
	d.mu.Unlock()
	d.log.Info("delivery daemon active", "incarnation", d.inst)
	tick := time.NewTicker(d.cfg.Renew)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := d.renew(ctx, true); err != nil {
				return err
			}
		}
	}
}

// gradeIn returns the daemon's grader for the liveness plane during term t: graded within the
// term, and unbound once it has ended.
func (d *Daemon) gradeIn(t *term) liveness.Grader {
	return func(ctx context.Context) (wire.ResponderState, string) {
		if !t.enter() {
			return wire.ResponderUnbound, d.inst
		}
		defer t.leave()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(t.ctx, cancel)()
		return d.grade(ctx)
	}
}

// traced calls the test hook, if a test set one, around a handler body: defer d.traced(ctx, name)().
func (d *Daemon) traced(ctx context.Context, handler string) func() {
	if d.hook == nil {
		return func() {}
	}
	return d.hook(ctx, handler)
}

// consume creates (or binds an identical) durable and consumes it with handle.
func (d *Daemon) consume(ctx context.Context, stream string, cfg jetstream.ConsumerConfig, handle jetstream.MessageHandler) (jetstream.ConsumeContext, error) {
	cons, err := d.js.CreateConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("create %s on %s: %w", cfg.Durable, stream, err)
	}
	cc, err := cons.Consume(handle, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		d.log.Debug("consume", "durable", cfg.Durable, "err", err)
	}))
	if err != nil {
		return nil, fmt.Errorf("consume %s on %s: %w", cfg.Durable, stream, err)
	}
	return cc, nil
}

// grade answers a delivery-plane probe from the lease row: absent or not ready is unbound,
// another incarnation's is stale, this one's is bound, a failed read unknown.
func (d *Daemon) grade(ctx context.Context) (wire.ResponderState, string) {
	row, _, err := getRow(ctx, d, meshwire.DeliveryBucket(d.cfg.Space), meshwire.LeaseKey(0), leaseRow)
	switch {
	case err != nil:
		return wire.ResponderUnknown, d.inst
	case row == nil || !row.Ready:
		return wire.ResponderUnbound, d.inst
	case row.Holder != d.cfg.Holder || row.Incarnation != d.inst:
		return wire.ResponderStale, d.inst
	}
	return wire.ResponderBound, d.inst
}
