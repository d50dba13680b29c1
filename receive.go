package cotal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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
}

// Handler surfaces a delivery. Returning nil acknowledges a durable delivery (ack-on-surface);
// returning an error asks for redelivery later (a transient failure). Live channel messages have
// nothing to acknowledge. The client calls the handler for one delivery at a time.
type Handler func(ctx context.Context, d *Delivery) error

// dedupSize bounds the ids remembered for de-duplication: enough to span a join's backfill and
// the live tail that overlaps it.
const dedupSize = 16384

// deliverer runs deliveries through the guard, de-duplicates them by id and calls the handler one
// at a time.
type deliverer struct {
	c *Client

	mu   sync.Mutex // serialises handler calls; guards seen, order and oldest
	seen map[string]bool
	// order is a ring of the ids in seen; oldest indexes the next to forget once it is full.
	order  []string
	oldest int
}

func newDeliverer(c *Client) *deliverer {
	// The seen set grows with use: sizing it for dedupSize up front cost a quiet client (most of
	// a large roster) half a megabyte and most of its connect time.
	return &deliverer{c: c, seen: map[string]bool{}}
}

// outcome is what to do with a delivery's durable copy.
type outcome int

const (
	ack  outcome = iota // surfaced, or a duplicate of one surfaced
	nak                 // the handler failed: redeliver later
	term                // a permanent anomaly: never redeliver
)

// deliver judges and surfaces one message. historical marks a backfilled channel message. data is
// given away: the message's strings share it, as nats.go hands every message a copy of its own.
func (d *deliverer) deliver(subject string, data []byte, historical bool) (outcome, *wire.RejectError) {
	dl, err := wire.GuardOwned(subject, data)
	if err != nil {
		return d.rejected(subject, err)
	}
	return d.surface(dl, historical), nil
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

// surface hands a guarded delivery to the handler once, de-duplicating by message id.
func (d *deliverer) surface(dl *wire.Delivery, historical bool) outcome {
	d.mu.Lock()
	defer d.mu.Unlock()
	id := dl.Message.ID
	if id != "" && d.seen[id] { // SPEC §4: never de-duplicate on the empty id
		return ack
	}
	out := &Delivery{Kind: dl.Kind, Historical: historical, Sender: dl.Sender, Message: dl.Message}
	if dl.Kind == wire.DeliveryChannel {
		out.Channel = dl.Subject.Rest
	}
	if h := d.c.opts.handler; h != nil {
		if err := h(d.c.ctx, out); err != nil {
			d.c.log.Info("handler failed; asking for redelivery", "id", id, "err", err)
			return nak
		}
	}
	if id != "" {
		d.remember(id)
	}
	return ack
}

// remember adds id to the bounded seen set, forgetting the oldest once it holds dedupSize;
// caller holds mu.
func (d *deliverer) remember(id string) {
	d.seen[id] = true
	if len(d.order) < dedupSize {
		d.order = append(d.order, id)
		return
	}
	delete(d.seen, d.order[d.oldest])
	d.order[d.oldest] = id
	d.oldest = (d.oldest + 1) % dedupSize
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
	out, rej := d.deliver(msg.Subject(), msg.Data(), false)
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
	cons, err := c.js.Consumer(ctx, stream, name)
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
