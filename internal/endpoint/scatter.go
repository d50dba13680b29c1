package endpoint

import (
	"context"
	"fmt"
	"time"

	"github.com/gocotal/cotal/internal/jsapi"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/wire"
)

// Gather is a scatter's result (SPEC §13.5): the one reply each expected instance gave at its
// frozen epoch, and every other reply classified, never dropped.
type Gather struct {
	// Replies holds the first reply of each expected instance at its frozen epoch.
	Replies map[wire.LifecycleUID]*Reply
	// Missing lists the expected instances that gave none in time (a churned one is not missing).
	Missing []Instance
	// Churn holds replies from an expected instance at another epoch: it restarted mid-scatter.
	Churn []*Reply
	// Unexpected holds replies from instances outside the expected set.
	Unexpected []*Reply
	// Duplicate holds a second reply from an instance and epoch that already answered.
	Duplicate []*Reply
	// Late holds expected replies that came after the deadline, within the reconcile window.
	Late []*Reply
}

// Complete reports whether every expected instance answered in time.
func (g *Gather) Complete() bool { return len(g.Missing) == 0 && len(g.Churn) == 0 }

// Scatter sends call to every instance of its endpoint on the all rail and gathers the replies
// until each of expected (frozen by Instances) has answered or ctx ends, then for reconcile more
// for the ones still missing. An empty expected set is failed-precondition; the broker's
// no-responders answer ends the gather early (nothing received it).
func (c *Caller) Scatter(ctx context.Context, call Call, expected []Instance, reconcile time.Duration) (*Gather, error) {
	if len(expected) == 0 {
		return nil, wire.NewEndpointError(wire.CodeFailedPrecondition, wire.OutcomeNotExecuted, "no instance of %s is registered", call.Endpoint)
	}
	if call.Bind != nil {
		return nil, wire.NewEndpointError(wire.CodeBadRequest, wire.OutcomeNotExecuted, "a scatter addresses every incarnation: it binds none")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDeadline)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	route := c.route(call, wire.AddressAll)
	subject, err := c.space.RequestSubject(route)
	if err != nil {
		return nil, refusedLocally(err)
	}
	body, id, err := c.envelope(call, true, time.Until(deadline))
	if err != nil {
		return nil, refusedLocally(err)
	}
	replies := make(chan *nats.Msg, 4*len(expected)+16)
	sub, err := c.nc.ChanSubscribe(c.space.ReplyFilter(route), replies)
	if err != nil {
		return nil, refusedLocally(fmt.Errorf("subscribe the reply rail: %w", err))
	}
	defer func() { _ = sub.Unsubscribe() }() // the gather is over either way
	sentinel := c.space.NoRespondersSubject(route)
	if err := c.nc.PublishMsg(&nats.Msg{Subject: subject, Reply: sentinel, Data: body}); err != nil {
		return nil, refusedLocally(fmt.Errorf("publish %s: %w", subject, err))
	}
	if err := c.refused(ctx, subject); err != nil {
		return nil, err
	}

	frozen := map[wire.LifecycleUID]Instance{}
	for _, in := range expected {
		frozen[in.ID] = in
	}
	g := &Gather{Replies: map[wire.LifecycleUID]*Reply{}}
	// settled holds the expected instances no longer awaited: answered in time, late, or churned.
	settled := map[wire.LifecycleUID]bool{}
	pending := func() int { return len(frozen) - len(settled) }
	late := false
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for pending() > 0 {
		select {
		case <-timer.C:
			if late || reconcile <= 0 {
				return g.finish(frozen, settled), nil
			}
			late = true
			timer.Reset(reconcile)
		case msg := <-replies:
			if msg.Subject == sentinel {
				if msg.Header.Get(jsapi.StatusHeader) == jsapi.NoResponders {
					return g.finish(frozen, settled), nil
				}
				continue
			}
			// accept refuses only a bound call's stray replies, and a scatter binds none; a reply
			// that does not decode is no reply.
			r, _ := c.accept(msg, id, call)
			if r == nil || r.EndpointReply == nil {
				continue
			}
			in, ok := frozen[r.From.Instance]
			switch {
			case !ok:
				g.Unexpected = append(g.Unexpected, r)
			case in.Epoch != r.From.Epoch:
				settled[in.ID] = true
				g.Churn = append(g.Churn, r)
			case g.Replies[in.ID] != nil || containsReply(g.Late, in.ID):
				g.Duplicate = append(g.Duplicate, r)
			case late:
				settled[in.ID] = true
				g.Late = append(g.Late, r)
			default:
				settled[in.ID] = true
				g.Replies[in.ID] = r
			}
		}
	}
	return g.finish(frozen, settled), nil
}

func containsReply(rs []*Reply, id wire.LifecycleUID) bool {
	for _, r := range rs {
		if r.From.Instance == id {
			return true
		}
	}
	return false
}

// finish lists the expected instances never settled as missing.
func (g *Gather) finish(frozen map[wire.LifecycleUID]Instance, settled map[wire.LifecycleUID]bool) *Gather {
	for id, in := range frozen {
		if !settled[id] {
			g.Missing = append(g.Missing, in)
		}
	}
	return g
}
