package cotal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/gocotal/cotal/wire"
)

// defaultProbeTimeout bounds a probe when ctx has no deadline.
const defaultProbeTimeout = 2 * time.Second

// ProbeResult is the outcome of a liveness probe and the verdict graded from it.
type ProbeResult struct {
	Plane   wire.Plane
	Outcome wire.ProbeOutcome
	Verdict wire.ResponderState
	// Answer is the responder's reply, when there was a well-formed one.
	Answer *wire.LivenessAnswer
	// Detail explains an unknown verdict (the refusal, the malformed reply).
	Detail string
}

// Probe asks whether plane's daemon is alive, without any read of its lease: it publishes an
// empty request on its own liveness subject with a reply subject under that request's .reply.
// leaf, which the plane's responder alone may answer. No responders grades unbound, a reply the
// responder's verdict, and a timeout, refusal or malformed reply unknown. An unknown plane is
// refused before anything is published.
func (c *Client) Probe(ctx context.Context, plane wire.Plane) (*ProbeResult, error) {
	if _, err := wire.ParsePlane(string(plane)); err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultProbeTimeout)
		defer cancel()
	}
	res := &ProbeResult{Plane: plane}
	finish := func(o wire.ProbeOutcome, detail string) (*ProbeResult, error) {
		res.Outcome, res.Detail, res.Verdict = o, detail, wire.GradeProbe(o, res.Answer)
		return res, nil
	}
	request := c.space.LivenessSubject(plane, c.me)
	reply := wire.ReplySubject(request, nuid.Next())
	sub, err := c.nc.SubscribeSync(reply)
	if err != nil {
		return nil, fmt.Errorf("probe %s: %w", plane, err)
	}
	defer func() { _ = sub.Unsubscribe() }() // the probe is over either way
	if _, err := c.confirm(sub); err != nil {
		return finish(wire.ProbeRefused, err.Error())
	}
	if err := c.nc.PublishMsg(&nats.Msg{Subject: request, Reply: reply}); err != nil {
		return nil, fmt.Errorf("probe %s: %w", plane, err)
	}
	msg, err := sub.NextMsgWithContext(ctx)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return finish(wire.ProbeNoResponders, "")
	case errors.Is(err, context.DeadlineExceeded):
		if refusal := c.takeRefusal(request); refusal != nil {
			return finish(wire.ProbeRefused, refusal.Error())
		}
		return finish(wire.ProbeTimeout, "no answer in time")
	case err != nil:
		return finish(wire.ProbeRefused, err.Error())
	}
	answer, err := wire.ParseLivenessAnswer(plane, msg.Data)
	if err != nil {
		return finish(wire.ProbeMalformed, err.Error())
	}
	res.Answer = answer
	return finish(wire.ProbeReplied, "")
}

// takeRefusal returns and forgets the broker's refusal of a publish on subject, if any.
func (c *Client) takeRefusal(subject string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.refusals[subject]
	delete(c.refusals, subject)
	return err
}
