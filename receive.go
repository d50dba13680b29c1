package cotal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/seen"
	"github.com/gocotal/cotal/wire"
)

// Delivery is a message surfaced to the handler, after the wire guard accepted it.
type Delivery struct {
	// Kind is how the message was addressed, from the subject: channel, dm or anycast.
	Kind wire.DeliveryKind
	// Historical marks a channel message backfilled at join rather than received live.
	Historical bool
	// Channel is the channel a channel message was published on.
	Channel string
	// Sender is the subject's sender, which from.id equals.
	Sender wire.Principal
	// Message is the message.
	Message *wire.CotalMessage

	// ack acknowledges the durable copy; nil for a live channel message.
	ack func() error
}

// Ack acknowledges a durable delivery whose handler deferred it (ErrDefer), so it is not delivered
// again. A live channel message has nothing to acknowledge: Ack returns nil.
func (d *Delivery) Ack() error {
	if d.ack == nil {
		return nil
	}
	return d.ack()
}

// ErrDefer, returned by a handler, leaves a durable delivery unsettled: the handler keeps it and
// acknowledges it later (Delivery.Ack), when whatever it surfaces to has seen it. Unacknowledged,
// it is delivered again after the ack wait, to this process or the agent's next.
var ErrDefer = errors.New("cotal: delivery acknowledged later")

// Handler surfaces a delivery. Returning nil acknowledges a durable delivery (ack-on-surface);
// ErrDefer leaves it for Delivery.Ack; any other error asks for redelivery later (a transient
// failure). Live channel messages have nothing to acknowledge. The client calls the handler for
// one delivery at a time.
type Handler func(ctx context.Context, d *Delivery) error

// dedupSize bounds the ids remembered for de-duplication: enough to span a join's backfill and
// the live tail that overlaps it.
const dedupSize = 16384

// deliverer runs deliveries through the guard, de-duplicates them by id and calls the handler one
// at a time.
type deliverer struct {
	c *Client

	mu   sync.Mutex // serialises handler calls; guards seen
	seen *seen.Set
}

func newDeliverer(c *Client) *deliverer {
	return &deliverer{c: c, seen: seen.New(dedupSize)}
}

// outcome is what to do with a delivery's durable copy.
type outcome int

const (
	ack   outcome = iota // surfaced, or a duplicate of one surfaced
	nak                  // the handler failed: redeliver later
	term                 // a permanent anomaly: never redeliver
	later                // the handler acknowledges it itself (ErrDefer)
)

// deliver judges and surfaces one message. historical marks a backfilled channel message; acker
// acknowledges its durable copy (nil for a live one). data is given away: the message's strings
// share it, as nats.go hands every message a copy of its own.
func (d *deliverer) deliver(subject string, data []byte, historical bool, acker func() error) (outcome, *wire.RejectError) {
	dl, err := wire.GuardOwned(subject, data)
	if err != nil {
		return d.rejected(subject, err)
	}
	return d.surface(dl, historical, acker), nil
}

// rejected logs a delivery the guard refused and terminates it.
func (d *deliverer) rejected(subject string, err error) (outcome, *wire.RejectError) {
	var rej *wire.RejectError
	if errors.As(err, &rej) {
		d.c.log.Warn("delivery rejected", "subject", subject, "reason", rej.Reason, "err", rej.Err)
		return term, rej
	}
	return term, &wire.RejectError{Reason: wire.ReasonMalformedJSON, Subject: subject, Err: err}
}

// surface hands a guarded delivery to the handler once, de-duplicating by message id. acker
// acknowledges its durable copy, for a handler that defers it.
func (d *deliverer) surface(dl *wire.Delivery, historical bool, acker func() error) outcome {
	d.mu.Lock()
	defer d.mu.Unlock()
	id := dl.Message.ID
	if id != "" && d.seen.Has(id) { // SPEC §4: never de-duplicate on the empty id
		return ack
	}
	out := &Delivery{Kind: dl.Kind, Historical: historical, Sender: dl.Sender, Message: dl.Message, ack: acker}
	if dl.Kind == wire.DeliveryChannel {
		out.Channel = dl.Subject.Rest
	}
	if dl.Kind == wire.DeliveryDM {
		if q, ok := quarantineOf(out); ok {
			d.c.report(q)
		}
	}
	if h := d.c.opts.handler; h != nil {
		switch err := h(d.c.ctx, out); {
		case errors.Is(err, ErrDefer) && acker != nil:
			// Not remembered: a redelivery after the ack wait goes to the handler again.
			return later
		case err != nil:
			d.c.log.Info("handler failed; asking for redelivery", "id", id, "err", err)
			return nak
		}
	}
	if id != "" {
		d.seen.Add(id)
	}
	return ack
}

// redeliveryDelay backs off a failing handler: a second after the first failure, doubling to
// half a minute, so a broken handler does not spin.
func redeliveryDelay(msg jetstream.Msg) time.Duration {
	n := uint64(1)
	if meta, err := msg.Metadata(); err == nil && meta.NumDelivered > 0 {
		n = meta.NumDelivered
	}
	return min(time.Second<<min(n-1, 5), 30*time.Second)
}

// settle applies a delivery's outcome to its JetStream message.
func (d *deliverer) settle(msg jetstream.Msg) {
	out, rej := d.deliver(msg.Subject(), msg.Data(), false, msg.Ack)
	var err error
	switch out {
	case ack:
		err = msg.Ack()
	case nak:
		err = msg.NakWithDelay(redeliveryDelay(msg))
	case term:
		err = msg.TermWithReason(string(rej.Reason))
	}
	if err != nil {
		d.c.log.Warn("settle delivery", "subject", msg.Subject(), "err", err)
	}
}

// bindPatience bounds how long binding a durable waits (about 5 s in all) for the JetStream API to
// answer: a cluster node that has just started answers no requests until it has heard from the
// meta leader.
var bindPatience = jsapi.Patience{Waits: 10, Step: 100 * time.Millisecond}

// bindDurables binds the pre-created durables the credential names, never creating them: the
// lifecycle's dm_ and dlv_ durables, and its role's svc_ durable.
func (c *Client) bindDurables(ctx context.Context) error {
	g := c.grant
	if g.Lifecycle != "" {
		l := wire.Lifecycle{Principal: c.me, UID: g.Lifecycle}
		if err := c.consumeDurable(ctx, c.space.DMStream(), wire.DMDurable(l), c.deliver.settle); err != nil {
			return err
		}
		if err := c.consumeDurable(ctx, c.space.DLVStream(), wire.DLVDurable(l), c.deliver.settleFrame); err != nil {
			return err
		}
	}
	if g.Role != "" {
		name, err := wire.TaskDurable(g.Role)
		if err != nil {
			return err
		}
		if err := c.consumeDurable(ctx, c.space.TaskStream(), name, c.deliver.settle); err != nil {
			return err
		}
	}
	return nil
}

func (c *Client) consumeDurable(ctx context.Context, stream, name string, settle jetstream.MessageHandler) error {
	var cons jetstream.Consumer
	err := jsapi.Answered(ctx, bindPatience, func() (err error) {
		cons, err = c.js.Consumer(ctx, stream, name)
		return err
	})
	if err != nil {
		return fmt.Errorf("bind durable %s on %s (it must be provisioned; agents never create it): %w", name, stream, err)
	}
	cc, err := cons.Consume(settle, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if c.ctx.Err() == nil {
			c.log.Warn("consume", "durable", name, "err", err)
			c.report(fmt.Errorf("consume %s: %w", name, err))
		}
	}))
	if err != nil {
		return fmt.Errorf("consume %s on %s: %w", name, stream, err)
	}
	c.mu.Lock()
	c.consume = append(c.consume, cc)
	c.mu.Unlock()
	return nil
}
