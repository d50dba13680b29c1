package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/liveness"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// LeaseRenew renews the manager lease well within its TTL, meshwire.ManagerLeaseTTL (10 s): three
// renewals fit in it.
const LeaseRenew = 3 * time.Second

// The deadlines of a supervisor's stop: its service's (the sessions' ledger closes), then its
// agents' own, so a slow service never leaves the agents running.
const (
	ServiceStopWait = 15 * time.Second
	AgentsStopWait  = 30 * time.Second
)

// Lease is a manager instance's lease row in cotal_manager_<space>, and the manager liveness
// plane it answers from: bound while its own row is there.
type Lease struct {
	js       jetstream.JetStream
	space    wire.Space
	holder   wire.Principal
	instance wire.LifecycleUID
	log      *slog.Logger

	probes *nats.Subscription
	stop   context.CancelFunc
	done   chan struct{}
}

// HoldLease writes the lease row of manager instance on nc (a supervisor credential), starts
// answering manager-plane probes, and rewrites the row every LeaseRenew until Close.
func HoldLease(ctx context.Context, nc *nats.Conn, sp wire.Space, holder wire.Principal, instance wire.LifecycleUID, log *slog.Logger) (*Lease, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Lease{js: js, space: sp, holder: holder, instance: instance, log: log}
	if err := l.write(ctx); err != nil {
		return nil, fmt.Errorf("write the manager lease: %w", err)
	}
	bucket, key := meshwire.ManagerBucket(sp), meshwire.ManagerLeaseKey(l.instance)
	grade := func(ctx context.Context) (wire.ResponderState, string) {
		e, err := kvget.Get(ctx, nc, bucket, key)
		switch {
		case errors.Is(err, kvget.ErrNotFound):
			return wire.ResponderUnbound, string(l.instance)
		case err != nil:
			return wire.ResponderUnknown, string(l.instance)
		case e.Deleted:
			return wire.ResponderUnbound, string(l.instance)
		}
		return wire.ResponderBound, string(l.instance)
	}
	if l.probes, err = liveness.Serve(nc, sp, wire.PlaneManager, grade, log); err != nil {
		return nil, err
	}
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	l.stop, l.done = stop, make(chan struct{})
	go l.renew(rctx)
	return l, nil
}

// Close stops renewing the row and answering probes, and returns once the renewal has ended.
// The row itself lapses meshwire.ManagerLeaseTTL after its last write.
func (l *Lease) Close() {
	l.stop()
	<-l.done
	_ = l.probes.Unsubscribe() // a closed connection has dropped it already
}

func (l *Lease) write(ctx context.Context) error {
	row, _ := json.Marshal(meshwire.DeliveryLease{Holder: l.holder.String(), Incarnation: string(l.instance), Since: wire.MillisOf(time.Now()), Ready: true}) // strings and numbers always encode
	_, err := l.js.Publish(ctx, meshwire.ManagerBucket(l.space).Subject(meshwire.ManagerLeaseKey(l.instance)), row)
	return err
}

// renew rewrites the lease row every LeaseRenew until ctx ends.
func (l *Lease) renew(ctx context.Context) {
	defer close(l.done)
	t := time.NewTicker(LeaseRenew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := l.write(ctx); err != nil && !errors.Is(err, context.Canceled) {
				l.log.Warn("renew the manager lease", "space", l.space, "err", err)
			}
		}
	}
}

// Served reports whether manager instance of space sp holds its lease, as read on nc: its row
// is there, renewed within meshwire.ManagerLeaseTTL. A row that cannot be read counts as served, so
// a standby never takes over on a read that failed.
func Served(ctx context.Context, nc *nats.Conn, sp wire.Space, instance wire.LifecycleUID) bool {
	e, err := kvget.Get(ctx, nc, meshwire.ManagerBucket(sp), meshwire.ManagerLeaseKey(instance))
	switch {
	case errors.Is(err, kvget.ErrNotFound):
		return false
	case err != nil:
		return true
	}
	return !e.Deleted
}
