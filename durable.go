package cotal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/gocotal/cotal/wire"
)

// BackstopUnavailable is JoinResult.Backstop when no delivery daemon answers: the join is live
// only (SPEC §12 item 13: never claim a durable join that is not).
const BackstopUnavailable = "joined live, durable backstop unavailable"

// controlTimeout bounds the other delivery control ops.
const controlTimeout = 5 * time.Second

// control sends one request on the ctl.delivery rail, with its reply under the request's own
// .reply. leaf (never the shared inbox), and decodes the reply's data into out. A refusal is a
// *wire.ControlError, whose Retry tells a transient one from a permanent one.
func (c *Client) control(ctx context.Context, op string, args, out any, timeout time.Duration) error {
	body, err := json.Marshal(args)
	if err != nil {
		return err
	}
	card := c.card()
	req, err := json.Marshal(wire.ControlRequest{Op: op, Args: body, From: wire.EndpointRef{ID: c.me.String(), Name: card.Name, Role: card.Role}})
	if err != nil {
		return err
	}
	subject := c.space.ControlSubject(wire.ControlDelivery, c.me)
	reply := wire.ReplySubject(subject, nuid.Next())
	sub, err := c.nc.SubscribeSync(reply)
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }() // one reply per request
	if _, err := c.confirm(sub); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := c.nc.PublishMsg(&nats.Msg{Subject: subject, Reply: reply, Data: req}); err != nil {
		return err
	}
	msg, err := sub.NextMsgWithContext(ctx)
	if err != nil {
		if refusal := c.takeRefusal(subject); refusal != nil {
			return fmt.Errorf("%s: %w: %v", op, ErrNotPermitted, refusal)
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	var rep wire.ControlReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return fmt.Errorf("%s: malformed reply: %w", op, err)
	}
	if err := rep.Err(op); err != nil {
		return err
	}
	if out != nil && len(rep.Data) > 0 {
		if err := json.Unmarshal(rep.Data, out); err != nil {
			return fmt.Errorf("%s: malformed reply data: %w", op, err)
		}
	}
	return nil
}

// durableJoin asks the delivery daemon for durable membership of channel and records the
// outcome in res.
func (c *Client) durableJoin(ctx context.Context, res *JoinResult) {
	var out wire.DurableJoinResult
	err := c.control(ctx, wire.OpDurableJoin, wire.DurableJoinArgs{Channel: res.Channel}, &out, wire.ControlJoinWait)
	res.BackstopErr = err
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		res.Backstop = BackstopUnavailable
	case err != nil:
		res.Backstop = BackstopUnavailable + ": " + err.Error()
	case !out.Durable:
		res.Backstop = BackstopUnavailable + ": " + out.Reason
	default:
		res.Durable, res.Generation = true, out.Generation
	}
}

// durableLeave ends durable membership; the live subscription is the caller's to end. A refusal
// is a *wire.ControlError.
func (c *Client) durableLeave(ctx context.Context, channel string, generation int64) error {
	args := wire.DurableLeaveArgs{Channel: channel, Generation: generation, LifecycleUID: c.grant.Lifecycle}
	return c.control(ctx, wire.OpDurableLeave, args, nil, controlTimeout)
}

// settleFrame surfaces one durable hand-off from the dlv_ durable: a strict frame, its message
// guarded as if it had arrived on the channel from its sender, then acknowledged once surfaced.
// A live copy surfaced earlier makes this one a duplicate, acknowledged at once.
func (d *deliverer) settleFrame(msg jetstream.Msg) {
	reject := func(why string) {
		d.c.log.Warn("durable hand-off rejected", "subject", msg.Subject(), "why", why)
		if err := msg.TermWithReason(string(wire.ReasonMalformedJSON)); err != nil {
			d.c.log.Warn("terminate a hand-off", "err", err)
		}
	}
	if msg.Headers().Get(wire.DeliveryFrameHeader) != fmt.Sprint(wire.DeliveryFrameVersion) {
		reject("no delivery frame header")
		return
	}
	frame, err := wire.DecodeDeliveryFrame(msg.Data())
	if err != nil {
		reject(err.Error())
		return
	}
	sender, err := wire.ParsePrincipal(frame.Msg.From.ID)
	if err != nil {
		reject(err.Error())
		return
	}
	subject, err := d.c.space.ChatSubject(sender, frame.Channel)
	if err != nil {
		reject(err.Error())
		return
	}
	// The frame's message is decoded and schema-checked already; guard it against the channel
	// subject it would have arrived on without encoding it again.
	var out outcome
	var rej *wire.RejectError
	if dl, gerr := wire.GuardDecoded(subject, frame.Msg); gerr != nil {
		out, rej = d.rejected(subject, gerr)
	} else {
		out = d.surface(dl, false, msg.Ack)
	}
	switch out {
	case ack:
		err = msg.Ack()
	case nak:
		err = msg.NakWithDelay(redeliveryDelay(msg))
	case term:
		err = msg.TermWithReason(string(rej.Reason))
	}
	if err != nil {
		d.c.log.Warn("settle a hand-off", "err", err)
	}
}
