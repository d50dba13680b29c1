package bench

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/wire"
)

// Anycast case shape: one producer hands tasks to this many workers of one role.
const (
	anycastWorkers = 4
	anycastRole    = "bench-worker"
	// anycastRawRole is the raw side's role: a pull the closed Cotal workers left waiting on
	// their svc_ durable would otherwise take raw tasks and hold them for the ack wait.
	anycastRawRole = "bench-worker-raw"
	anycastSize    = 128
)

// anycastCase measures tasks handed to any one of four workers through the role's shared svc_
// durable, each checked to surface exactly once.
func anycastCase(ctx context.Context, r *runner) ([]Result, error) {
	f := r.fleet()
	defer f.close()
	a, err := newAnycast(ctx, r.env, f)
	if err != nil {
		return nil, err
	}
	res, err := r.pair(ctx, "anycast", "msgs/s", a.cotal, a.raw, targetAnycast)
	if err != nil {
		return nil, err
	}
	res.Note = fmt.Sprintf("1 producer to %d workers on svc_%s, every task surfaced exactly once; raw: JetStream publish, %d workers of another role Consume on its svc_ durable, ack", anycastWorkers, anycastRole, anycastWorkers)
	return []Result{res}, nil
}

// newAnycast issues an anycast case's producer and the workers of both sides on f.
func newAnycast(ctx context.Context, env *Env, f *fleet) (*anycast, error) {
	a := &anycast{env: env}
	var err error
	if a.producer, err = f.agent(ctx, ledger.Request{Name: f.name("any_producer")}); err != nil {
		return nil, err
	}
	for i := range anycastWorkers {
		cred, err := f.agent(ctx, ledger.Request{Name: f.name("any_worker_%d", i), Role: anycastRole})
		if err != nil {
			return nil, err
		}
		a.workers = append(a.workers, cred)
		if cred, err = f.agent(ctx, ledger.Request{Name: f.name("any_raw_%d", i), Role: anycastRawRole}); err != nil {
			return nil, err
		}
		a.rawWorkers = append(a.rawWorkers, cred)
	}
	return a, nil
}

// anycast is an anycast case: a producer and the workers of one role.
type anycast struct {
	env      *Env
	producer *authority.Credential
	workers  []*authority.Credential
	// rawWorkers are the raw side's workers, of anycastRawRole.
	rawWorkers []*authority.Credential
}

func (a *anycast) cotal(ctx context.Context, f *fleet) (side, error) {
	producer, err := f.client(ctx, a.producer, cotal.WithPresence(false))
	if err != nil {
		return nil, err
	}
	got, parts := newOnce(), text(anycastSize)
	surface := func(_ context.Context, d *cotal.Delivery) error {
		got.arrive(d.Message.ID)
		return nil
	}
	for _, w := range a.workers {
		if _, err := f.client(ctx, w, cotal.WithPresence(false), cotal.WithHandler(surface)); err != nil {
			return nil, err
		}
	}
	return &sendSide{got: got, per: 1, send: func(ctx context.Context) error {
		_, err := producer.Ask(ctx, anycastRole, parts)
		return err
	}}, nil
}

func (a *anycast) raw(ctx context.Context, f *fleet) (side, error) {
	_, js, err := f.conn(ctx, a.producer)
	if err != nil {
		return nil, err
	}
	got := newOnce()
	durable, _ := wire.TaskDurable(anycastRawRole) // a valid role
	for _, w := range a.rawWorkers {
		_, wjs, err := f.conn(ctx, w)
		if err != nil {
			return nil, err
		}
		if err := consume(ctx, f, wjs, a.env.Space.TaskStream(), durable, func(msg jetstream.Msg) {
			got.arrive(msg.Headers().Get(jetstream.MsgIDHeader))
		}); err != nil {
			return nil, err
		}
	}
	subject, _ := a.env.Space.AnycastSubject(anycastRawRole, a.producer.Principal) // a valid role
	body, err := rawBody(a.env.Space, a.producer.Principal, subject, wire.CotalMessage{ToService: anycastRawRole}, anycastSize)
	if err != nil {
		return nil, err
	}
	return &sendSide{got: got, per: 1, send: rawPublish(js, subject, body)}, nil
}

// once counts the tasks of a round that surface, and those of the side's whole run that
// surface more than once: ids are remembered across rounds, so a late redelivery of an earlier
// round's task is a duplicate, not an arrival.
type once struct {
	got  *counter
	mu   sync.Mutex
	seen map[string]bool
	dups int
}

func newOnce() *once { return &once{got: newCounter(), seen: map[string]bool{}} }

func (o *once) expect(n int) { o.got.expect(n) }

func (o *once) arrive(id string) {
	o.mu.Lock()
	dup := o.seen[id]
	if dup {
		o.dups++
	} else {
		o.seen[id] = true
	}
	o.mu.Unlock()
	if !dup {
		o.got.add()
	}
}

// wait returns once every task surfaced, failing if one surfaced twice.
func (o *once) wait(ctx context.Context) error {
	if err := o.got.wait(ctx); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dups > 0 {
		return fmt.Errorf("%d tasks surfaced more than once", o.dups)
	}
	return nil
}
