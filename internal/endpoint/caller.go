package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gocotal/cotal/internal/jsapi"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/wire"
)

// DefaultDeadline bounds a call whose context has no deadline (SPEC §13.8: 15 s).
const DefaultDeadline = 15 * time.Second

// Caller calls endpoints as one lifecycle on one connection. It is safe for concurrent use.
type Caller struct {
	nc    *nats.Conn
	space wire.Space
	me    wire.Lifecycle
	name  string
	// generation, when set, puts the caller on the versioned rail (an issued credential).
	generation string
}

// NewCaller returns a caller on nc as me, named name in its requests' from.
func NewCaller(nc *nats.Conn, space wire.Space, me wire.Lifecycle, name string) *Caller {
	return &Caller{nc: nc, space: space, me: me, name: name}
}

// OnRail returns a caller like c on the versioned ep.v1 rail, pinning generation, the issued
// generation of its credential (SPEC §13.15); an empty generation is the legacy ep rail.
func (c *Caller) OnRail(generation string) *Caller {
	cc := *c
	cc.generation = generation
	return &cc
}

// Call is one request: where it goes, what it asks and how it binds.
type Call struct {
	Endpoint wire.EndpointName
	Command  string
	// Address is where the request routes; the zero value is the class rail (one).
	Address wire.Addressing
	// Instance is the addressed instance, on the inst rail.
	Instance wire.LifecycleUID
	// Mode is a targeted command's authorization mode; the subject's target block is taken from
	// Target (its owner, and for handle and exact its actor and lifecycle too).
	Mode   wire.AuthzMode
	Target *wire.Target
	// Args are the command's args: a json.RawMessage passes through, anything else is encoded;
	// nil sends none.
	Args any
	// InputDigest and OutputDigest pin the contract; describe carries none.
	InputDigest, OutputDigest string
	// Bind, when set, makes any other incarnation refuse the request before its effect.
	Bind   *wire.Bind
	GoalID string
	// ID is the request id; empty means a fresh one.
	ID string
}

// Reply is a reply the caller accepted, with what its subject says about who answered.
type Reply struct {
	*wire.EndpointReply
	From wire.EndpointReplyFrom
}

// Outcome returns what err says about a request's effect: the outcome of an *wire.EndpointError
// (unknown when it has none), executed for nil, and unknown for anything else.
func Outcome(err error) wire.Outcome {
	if err == nil {
		return wire.OutcomeExecuted
	}
	if e, ok := errors.AsType[*wire.EndpointError](err); ok {
		return e.OutcomeOrUnknown()
	}
	return wire.OutcomeUnknown
}

// route builds the request subject's route for c.
func (c *Caller) route(call Call, address wire.Addressing) wire.EndpointRoute {
	r := wire.EndpointRoute{Generation: c.generation, Address: address, Endpoint: call.Endpoint,
		Instance: call.Instance, Command: call.Command, Mode: call.Mode, Caller: c.me, Nonce: wire.NewNonce()}
	if r.Address == "" {
		r.Address = wire.AddressOne
	}
	if t := call.Target; t != nil {
		switch call.Mode.TargetTokens() {
		case 1:
			r.Target.Owner = t.Owner
		case 3:
			r.Target = wire.EndpointTarget{Owner: t.Owner, Actor: t.Actor, UID: wire.LifecycleUID(t.LifecycleUID)}
		}
	}
	return r
}

// envelope builds the request body.
func (c *Caller) envelope(call Call, replyExpected bool, deadline time.Duration) ([]byte, string, error) {
	id := call.ID
	if id == "" {
		id = wire.NewNonce()
	}
	req := wire.EndpointRequest{
		V: wire.EndpointEnvelopeVersion, ID: id, Class: wire.ClassEphemeral, ReplyExpected: replyExpected,
		Op:     wire.EndpointOp{Endpoint: string(call.Endpoint), Command: call.Command, InputDigest: call.InputDigest, OutputDigest: call.OutputDigest},
		GoalID: call.GoalID, Target: call.Target, Bind: call.Bind,
		From: wire.EndpointRef{ID: c.me.Principal.String(), Name: c.name},
	}
	if replyExpected {
		req.DeadlineMs = max(deadline.Milliseconds(), 1)
	}
	if call.Args != nil {
		raw, err := encode(call.Args)
		if err != nil {
			return nil, "", fmt.Errorf("encode args: %w", err)
		}
		req.Args = raw
	}
	body, err := json.Marshal(&req)
	if err != nil {
		return nil, "", fmt.Errorf("encode the request: %w", err)
	}
	return body, id, nil
}

// refusedLocally is a request the caller never put on the wire.
func refusedLocally(err error) error {
	if _, ok := errors.AsType[*wire.EndpointError](err); ok {
		return err
	}
	return wire.NewEndpointError(wire.CodeBadRequest, wire.OutcomeNotExecuted, "%v", err)
}

// Call makes a call and waits for its reply, until ctx ends (or DefaultDeadline when ctx has no
// deadline). It returns the reply when one arrived; the error, an *wire.EndpointError, is the
// reply's own error when it refused, or the caller's classification of what it observed: a
// request refused before publication, a publish the broker refused (permission-denied) and the
// broker's no-responders answer (unavailable) are not-executed; a deadline with no answer is
// deadline-exceeded with outcome unknown. A reply from another incarnation than call.Bind names
// is refused with wire.DetailUnboundResponder, keeping the reply's own outcome.
func (c *Caller) Call(ctx context.Context, call Call) (*Reply, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDeadline)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	route := c.route(call, call.Address)
	subject, err := c.space.RequestSubject(route)
	if err != nil {
		return nil, refusedLocally(err)
	}
	body, id, err := c.envelope(call, true, time.Until(deadline))
	if err != nil {
		return nil, refusedLocally(err)
	}
	replies := make(chan *nats.Msg, 4)
	sub, err := c.nc.ChanSubscribe(c.space.ReplyFilter(route), replies)
	if err != nil {
		return nil, refusedLocally(fmt.Errorf("subscribe the reply rail: %w", err))
	}
	defer func() { _ = sub.Unsubscribe() }() // the call is over either way
	if err := c.nc.PublishMsg(&nats.Msg{Subject: subject, Reply: c.space.NoRespondersSubject(route), Data: body}); err != nil {
		return nil, refusedLocally(fmt.Errorf("publish %s: %w", subject, err))
	}
	if err := c.refused(ctx, subject); err != nil {
		return nil, err
	}
	for {
		select {
		case <-ctx.Done():
			if err := c.violation(subject); err != nil {
				return nil, err
			}
			return nil, wire.NewEndpointError(wire.CodeDeadlineExceeded, wire.OutcomeUnknown, "%s %s: no answer in time", call.Endpoint, call.Command)
		case msg := <-replies:
			if msg.Subject == c.space.NoRespondersSubject(route) {
				if msg.Header.Get(jsapi.StatusHeader) == jsapi.NoResponders {
					return nil, wire.NewEndpointError(wire.CodeUnavailable, wire.OutcomeNotExecuted, "%s %s: no responders", call.Endpoint, call.Command)
				}
				continue
			}
			reply, err := c.accept(msg, id, call)
			if err != nil || reply == nil {
				if err != nil {
					return reply, err
				}
				continue
			}
			if reply.Error != nil {
				return reply, reply.Error
			}
			return reply, nil
		}
	}
}

// accept reads one reply off the nonce subject: a reply whose subject or body does not parse, or
// whose id is not the request's, is ignored (nil, nil); one from an incarnation other than the
// bound one is refused.
func (c *Caller) accept(msg *nats.Msg, id string, call Call) (*Reply, error) {
	from, err := c.space.ParseReplySubject(msg.Subject)
	if err != nil || from.Endpoint != call.Endpoint {
		return nil, nil
	}
	r, err := wire.DecodeEndpointReply(msg.Data)
	if err != nil {
		return &Reply{From: from}, err
	}
	if r.ID != id {
		return nil, nil
	}
	reply := &Reply{EndpointReply: r, From: from}
	if b := call.Bind; b != nil && (b.InstanceID != string(from.Instance) || b.Epoch != from.Epoch) {
		outcome := wire.OutcomeExecuted
		if r.Error != nil {
			outcome = r.Error.OutcomeOrUnknown()
		}
		return reply, wire.NewEndpointError(wire.CodeFailedPrecondition, outcome,
			"bound to %s at epoch %d, answered by %s at epoch %d", b.InstanceID, b.Epoch, from.Instance, from.Epoch).WithDetail(wire.DetailUnboundResponder)
	}
	if r.Error != nil && r.Error.HasDetail(wire.DetailBindRefused) && call.Bind != nil {
		// A refusal attributed to the very incarnation the caller bound is incoherent.
		return reply, wire.NewEndpointError(wire.CodeInternal, wire.OutcomeUnknown, "%s refused a request bound to itself", from.Instance)
	}
	return reply, nil
}

// Cast publishes a request that expects no reply. A publish the broker refuses is
// permission-denied (not-executed), never a silent success.
func (c *Caller) Cast(ctx context.Context, call Call) error {
	route := c.route(call, call.Address)
	subject, err := c.space.RequestSubject(route)
	if err != nil {
		return refusedLocally(err)
	}
	body, _, err := c.envelope(call, false, 0)
	if err != nil {
		return refusedLocally(err)
	}
	if err := c.nc.Publish(subject, body); err != nil {
		return refusedLocally(fmt.Errorf("publish %s: %w", subject, err))
	}
	return c.refused(ctx, subject)
}

// refused flushes the connection and reports a permission violation the broker raised for
// subject: the server answers a refused publish before the flush's pong.
func (c *Caller) refused(ctx context.Context, subject string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDeadline)
		defer cancel()
	}
	if err := c.nc.FlushWithContext(ctx); err != nil {
		if v := c.violation(subject); v != nil {
			return v
		}
		return wire.NewEndpointError(wire.CodeUnavailable, wire.OutcomeUnknown, "flush %s: %v", subject, err)
	}
	return c.violation(subject)
}

// violation returns permission-denied when the connection's last error is the broker's refusal of
// a publish on subject (which carries this request's unique nonce).
func (c *Caller) violation(subject string) error {
	err := c.nc.LastError()
	if err == nil || !errors.Is(err, nats.ErrPermissionViolation) {
		return nil
	}
	if !strings.Contains(strings.ToLower(err.Error()), `publish to "`+strings.ToLower(subject)+`"`) {
		return nil
	}
	return wire.NewEndpointError(wire.CodePermissionDenied, wire.OutcomeNotExecuted, "the broker refused the publish to %s", subject)
}
