package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/metrics"
	"github.com/gocotal/cotal/wire"
)

// Schema validates a JSON value: a command's compiled input or output schema.
type Schema interface {
	Validate(value json.RawMessage) error
}

// Handler runs one admitted request. It returns the reply's data (encoded with encoding/json; a
// json.RawMessage passes through, nil is the void null) or an error. A *wire.EndpointError is
// answered as it is, its outcome read as unknown when the handler left it empty: a handler that
// refuses before any effect says wire.OutcomeNotExecuted. Any other error is answered internal,
// outcome unknown.
type Handler func(ctx context.Context, req *Request) (any, error)

// Command is one served command: its contract (class, modes, digests and schemas) and handler.
type Command struct {
	Name  string
	Class wire.RequestClass
	// Modes are the authorization modes a targeted command admits; none for an untargeted one.
	Modes        []wire.AuthzMode
	InputDigest  string
	OutputDigest string
	Input        Schema
	Output       Schema
	Handle       Handler
	// OffClassRail serves the command on the scatter and instance rails only: a request on the
	// class rail goes to another instance of the endpoint, one that can carry it out (the SPEC's
	// class-spawn skip).
	OffClassRail bool
}

// Cluster is one cluster of the descriptor describe answers: its closure digest, the commands it
// declares and its document.
type Cluster struct {
	Digest   string          `json:"digest"`
	Commands []string        `json:"commands"`
	Document json.RawMessage `json:"document,omitempty"`
}

// Config is what a Server serves: which instance of which endpoint, at which epoch, and the
// commands.
type Config struct {
	Space    wire.Space
	Endpoint wire.EndpointName
	// Owner is the endpoint's owner token, as its descriptor names it.
	Owner    string
	Instance wire.LifecycleUID
	// Epoch is the incarnation's process epoch: the reply and event subjects carry it.
	Epoch    int64
	Commands []Command
	// Clusters are the descriptor's clusters, answered by describe.
	Clusters []Cluster
	// Cancel, when set, serves the reserved cancel command (SPEC §13.6) for the endpoint's goals:
	// it is called with the goal the request names (Envelope.GoalID, scoped to the caller) and
	// the mode (CancelGraceful or CancelTerminate), and answers with whatever terminal state won.
	Cancel func(ctx context.Context, r *Request, mode string) (any, error)
	// MaxInFlight bounds the requests handled at once (default 64); beyond it a request is
	// refused resource-exhausted.
	MaxInFlight int
	// MaxDeadline caps a request's deadlineMs as its handler's deadline (default 5 min).
	MaxDeadline time.Duration
	Log         *slog.Logger
}

// Defaults of a Config.
const (
	DefaultMaxInFlight = 64
	DefaultMaxDeadline = 5 * time.Minute
)

// Request is an admitted request, as a handler sees it.
type Request struct {
	// Route is the request subject's tokens: the caller, the mode and its target block.
	Route wire.EndpointRoute
	// Envelope is the decoded request.
	Envelope *wire.EndpointRequest
	// Epoch is the serving incarnation's epoch.
	Epoch int64
	// after runs once the reply is on its way (AfterReply).
	after []func()
}

// AfterReply has fn run once the request's reply (or refusal) has been published and flushed to
// the broker: for an effect that would end the caller, such as an agent stopping itself.
func (r *Request) AfterReply(fn func()) { r.after = append(r.after, fn) }

// Caller returns the broker-authenticated caller: the subject's triple.
func (r *Request) Caller() wire.Lifecycle { return r.Route.Caller }

// Args returns the request's args, or the JSON null when it carried none.
func (r *Request) Args() json.RawMessage {
	if len(r.Envelope.Args) == 0 {
		return json.RawMessage("null")
	}
	return r.Envelope.Args
}

// Server serves one endpoint instance. Create it with Serve and end it with Stop.
type Server struct {
	nc       *nats.Conn
	cfg      Config
	log      *slog.Logger
	commands map[string]*Command
	describe json.RawMessage
	slots    chan struct{}

	ctx    context.Context // ends at Stop: cancels the handlers
	cancel context.CancelFunc
	wg     sync.WaitGroup // the handlers running
	subs   []*nats.Subscription
}

// Protocol is a descriptor's discovery protocol; v is 1 (SPEC §13.7).
type Protocol struct {
	V int `json:"v"`
}

// Serve starts serving cfg on nc: for each command and for describe, the class rail in the
// endpoint's queue group and the scatter and instance rails, on both the ep and ep.v1 rails.
func Serve(nc *nats.Conn, cfg Config) (*Server, error) {
	if _, err := wire.ParseEndpointName(string(cfg.Endpoint)); err != nil {
		return nil, err
	}
	if _, err := wire.ParseLifecycleUID(string(cfg.Instance)); err != nil {
		return nil, fmt.Errorf("instance: %w", err)
	}
	if cfg.Epoch < 0 {
		return nil, fmt.Errorf("epoch %d is negative", cfg.Epoch)
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.MaxDeadline <= 0 {
		cfg.MaxDeadline = DefaultMaxDeadline
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{nc: nc, cfg: cfg, log: log.With("endpoint", cfg.Endpoint, "instance", cfg.Instance, "epoch", cfg.Epoch),
		commands: map[string]*Command{}, slots: make(chan struct{}, cfg.MaxInFlight)}
	for i := range cfg.Commands {
		c := &cfg.Commands[i]
		if err := wire.ValidateCommand(c.Name); err != nil {
			return nil, err
		}
		if c.Name == wire.CommandDescribe || c.Name == wire.CommandCancel || s.commands[c.Name] != nil {
			return nil, fmt.Errorf("command %q is reserved or declared twice", c.Name)
		}
		if c.Handle == nil || c.Input == nil || c.Output == nil || !wire.IsDigest(c.InputDigest) || !wire.IsDigest(c.OutputDigest) {
			return nil, fmt.Errorf("command %q needs a handler, both schemas and both digests", c.Name)
		}
		if c.Class != wire.ClassEphemeral {
			return nil, fmt.Errorf("command %q: only ephemeral commands are served here, not %q", c.Name, c.Class)
		}
		for _, m := range c.Modes {
			if _, err := wire.ParseAuthzMode(string(m)); err != nil {
				return nil, fmt.Errorf("command %q: %w", c.Name, err)
			}
		}
		s.commands[c.Name] = c
	}
	if cfg.Cancel != nil {
		s.commands[wire.CommandCancel] = &Command{Name: wire.CommandCancel, Class: wire.ClassEphemeral, Input: cancelArgs{}, Output: anyValue{},
			Handle: func(ctx context.Context, r *Request) (any, error) {
				mode, _ := cancelMode(r.Args()) // admitted: the args validated
				return cfg.Cancel(ctx, r, mode)
			}}
	}
	answer, err := json.Marshal(DescribeAnswer{Public: true, Descriptor: Descriptor{
		Endpoint: string(cfg.Endpoint), Owner: cfg.Owner, Protocol: Protocol{V: 1}, Clusters: cfg.Clusters,
	}})
	if err != nil {
		return nil, fmt.Errorf("encode the descriptor: %w", err)
	}
	s.describe = answer
	s.ctx, s.cancel = context.WithCancel(context.Background())
	names := append([]string{wire.CommandDescribe}, slices.Sorted(maps.Keys(s.commands))...)
	for _, name := range names {
		for _, versioned := range []bool{false, true} {
			one, all, inst := meshwire.ServeFilters(cfg.Space, cfg.Endpoint, cfg.Instance, name, versioned)
			subs := []struct{ subj, queue string }{{one, meshwire.QueueGroup(cfg.Endpoint)}, {all, ""}, {inst, ""}}
			if c := s.commands[name]; c != nil && c.OffClassRail {
				subs = subs[1:]
			}
			for _, sb := range subs {
				sub, err := nc.QueueSubscribe(sb.subj, sb.queue, s.receive)
				if err != nil {
					s.unsubscribe()
					s.cancel()
					return nil, fmt.Errorf("serve %s: %w", sb.subj, err)
				}
				s.subs = append(s.subs, sub)
			}
		}
	}
	if err := nc.Flush(); err != nil {
		s.unsubscribe()
		s.cancel()
		return nil, fmt.Errorf("serve %s: %w", cfg.Endpoint, err)
	}
	return s, nil
}

func (s *Server) unsubscribe() {
	for _, sub := range s.subs {
		_ = sub.Unsubscribe() // the connection may be closing; nothing else to undo
	}
	s.subs = nil
}

// Stop stops taking requests, cancels the running handlers and waits for them, or for ctx.
func (s *Server) Stop(ctx context.Context) error {
	s.unsubscribe()
	s.cancel()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// receive takes one message off a serve subscription: a request that parses is handled on its own
// goroutine; a subject outside the grammar has no sender and is dropped.
func (s *Server) receive(msg *nats.Msg) {
	route, err := meshwire.ParseRequestSubject(s.cfg.Space, msg.Subject)
	if err != nil || route.Endpoint != s.cfg.Endpoint || route.Address == wire.AddressInst && route.Instance != s.cfg.Instance {
		s.log.Debug("dropped a request outside the grammar", "subject", msg.Subject, "err", err)
		return
	}
	select {
	case s.slots <- struct{}{}:
	default:
		s.answer(route, msg.Data, nil, wire.NewEndpointError(wire.CodeResourceExhausted, wire.OutcomeNotExecuted,
			"%s is handling %d requests; try again later", s.cfg.Endpoint, s.cfg.MaxInFlight))
		return
	}
	s.wg.Go(func() {
		defer func() { <-s.slots }()
		s.handle(route, msg.Data)
	})
}

// handle admits one request and runs its handler, then answers a call. Every request is counted
// (metrics.EndpointCalls), under its command's name once it is admitted.
func (s *Server) handle(route wire.EndpointRoute, body []byte) {
	command := "-"
	reply := func(req *wire.EndpointRequest, result any) {
		outcome := metrics.OK
		if e, ok := result.(*wire.EndpointError); ok {
			outcome = string(e.Code)
		}
		metrics.EndpointCalls.WithLabelValues(string(s.cfg.Endpoint), command, outcome).Inc()
		s.answer(route, body, req, result)
	}
	req, err := wire.DecodeEndpointRequest(body)
	if err != nil {
		reply(nil, asEndpointError(err, wire.OutcomeNotExecuted))
		return
	}
	cmd, refusal := s.admit(route, req)
	if refusal != nil {
		reply(req, refusal)
		return
	}
	if cmd == nil { // describe
		command = wire.CommandDescribe
		reply(req, json.RawMessage(s.describe))
		return
	}
	command = cmd.Name
	deadline := min(time.Duration(req.DeadlineMs)*time.Millisecond, s.cfg.MaxDeadline)
	if deadline <= 0 {
		deadline = s.cfg.MaxDeadline
	}
	ctx, cancel := context.WithTimeout(s.ctx, deadline)
	defer cancel()
	r := &Request{Route: route, Envelope: req, Epoch: s.cfg.Epoch}
	defer func() {
		if len(r.after) == 0 {
			return
		}
		if err := s.nc.FlushTimeout(afterReplyFlush); err != nil {
			s.log.Warn("flush a reply before what follows it", "command", cmd.Name, "err", err)
		}
		for _, fn := range r.after {
			fn()
		}
	}()
	data, err := cmd.Handle(ctx, r)
	if err != nil {
		reply(req, asEndpointError(err, wire.OutcomeUnknown))
		return
	}
	raw, err := encode(data)
	if err == nil {
		err = cmd.Output.Validate(raw)
	}
	if err != nil {
		s.log.Error("a handler's reply breaks its output schema", "command", cmd.Name, "err", err)
		reply(req, wire.NewEndpointError(wire.CodeInternal, wire.OutcomeExecuted, "the reply to %s breaks its output schema: %v", cmd.Name, err))
		return
	}
	reply(req, raw)
}

// afterReplyFlush bounds the wait for the broker to take a reply before AfterReply's functions run.
const afterReplyFlush = 5 * time.Second

func encode(data any) (json.RawMessage, error) {
	switch d := data.(type) {
	case nil:
		return json.RawMessage("null"), nil
	case json.RawMessage:
		return d, nil
	}
	return json.Marshal(data)
}

// asEndpointError returns err as an *EndpointError, with outcome filled in when err left it
// empty; any other error is internal.
func asEndpointError(err error, outcome wire.Outcome) *wire.EndpointError {
	if e, ok := errors.AsType[*wire.EndpointError](err); ok {
		if e.Outcome == "" {
			out := *e
			out.Outcome = outcome
			return &out
		}
		return e
	}
	return wire.NewEndpointError(wire.CodeInternal, outcome, "%v", err)
}

// admit runs every check a request passes before its handler, in the order of SPEC §13.2–§13.3:
// agreement with the subject, the command's class, its contract digests, the bound-incarnation
// fence, the mode, and the input schema. It returns the command (nil for describe) or the
// refusal, always with outcome not-executed.
func (s *Server) admit(route wire.EndpointRoute, req *wire.EndpointRequest) (*Command, *wire.EndpointError) {
	refuse := func(code wire.ErrorCode, format string, args ...any) (*Command, *wire.EndpointError) {
		return nil, wire.NewEndpointError(code, wire.OutcomeNotExecuted, format, args...)
	}
	if req.Op.Endpoint != string(route.Endpoint) || req.Op.Command != route.Command {
		return refuse(wire.CodeOpMismatch, "op %s %s disagrees with the subject's %s %s", req.Op.Endpoint, req.Op.Command, route.Endpoint, route.Command)
	}
	if req.Bind != nil {
		if route.Address == wire.AddressAll {
			return refuse(wire.CodeBadRequest, "bind is not allowed on the scatter rail, which addresses every incarnation")
		}
		if route.Address == wire.AddressInst && req.Bind.InstanceID != string(route.Instance) {
			return refuse(wire.CodeBadRequest, "bind names instance %s, not the subject's %s", req.Bind.InstanceID, route.Instance)
		}
	}
	if err := targetAgrees(route, req.Target); err != nil {
		return nil, err
	}
	if req.From.ID != route.Caller.Principal.String() {
		return refuse(wire.CodeSenderMismatch, "from.id %q is not the subject's sender %q", req.From.ID, route.Caller.Principal)
	}
	if route.Command == wire.CommandDescribe {
		if req.Op.InputDigest != "" || req.Op.OutputDigest != "" {
			return refuse(wire.CodeContractMismatch, "describe carries no contract digests")
		}
		if req.Class != wire.ClassEphemeral {
			return refuse(wire.CodeClassMismatch, "describe is ephemeral, not %s", req.Class)
		}
		if len(req.Args) > 0 && string(req.Args) != "null" {
			return refuse(wire.CodeBadRequest, "describe takes no args")
		}
		return nil, nil
	}
	cmd := s.commands[route.Command]
	if cmd == nil {
		return refuse(wire.CodeUnimplemented, "%s does not serve %s", s.cfg.Endpoint, route.Command)
	}
	if req.Class != cmd.Class {
		return refuse(wire.CodeClassMismatch, "%s is %s, not %s", cmd.Name, cmd.Class, req.Class)
	}
	if cmd.Name == wire.CommandCancel {
		// Reserved, like describe: in no contract, so pinned to no digests; it names its goal.
		if req.Op.InputDigest != "" || req.Op.OutputDigest != "" {
			return refuse(wire.CodeContractMismatch, "cancel carries no contract digests")
		}
		if req.GoalID == "" {
			return refuse(wire.CodeBadRequest, "cancel names the goal it cancels in goalId")
		}
	} else {
		if err := meshwire.RequireDigests(req); err != nil {
			return nil, asEndpointError(err, wire.OutcomeNotExecuted)
		}
		if req.Op.InputDigest != cmd.InputDigest || req.Op.OutputDigest != cmd.OutputDigest {
			return refuse(wire.CodeContractMismatch, "%s is served with input %s and output %s", cmd.Name, cmd.InputDigest, cmd.OutputDigest)
		}
	}
	if b := req.Bind; b != nil {
		switch {
		case b.InstanceID != string(s.cfg.Instance):
			return nil, wire.NewEndpointError(wire.CodeFailedPrecondition, wire.OutcomeNotExecuted,
				"bound to instance %s, served by %s", b.InstanceID, s.cfg.Instance).WithDetail(wire.DetailBindRefused)
		case b.Epoch != s.cfg.Epoch:
			return nil, wire.NewEndpointError(wire.CodeExpired, wire.OutcomeNotExecuted,
				"bound to epoch %d of %s, served at epoch %d", b.Epoch, s.cfg.Instance, s.cfg.Epoch).WithDetail(wire.DetailBindRefused)
		}
	}
	if !slices.Contains(cmd.Modes, route.Mode) && !(route.Mode == wire.ModeNone && len(cmd.Modes) == 0) {
		return refuse(wire.CodePermissionDenied, "%s does not admit mode %q", cmd.Name, route.Mode)
	}
	if err := cmd.Input.Validate(argsOf(req)); err != nil {
		return refuse(wire.CodeBadRequest, "args: %v", err)
	}
	return cmd, nil
}

func argsOf(req *wire.EndpointRequest) json.RawMessage {
	if len(req.Args) == 0 {
		return json.RawMessage("null")
	}
	return req.Args
}

// targetAgrees checks the body target against the subject's mode and target block: absent for
// the untargeted form and self, present for every other mode with the subject's target owner,
// and for handle and exact the subject's actor and lifecycle too.
func targetAgrees(route wire.EndpointRoute, t *wire.Target) *wire.EndpointError {
	mismatch := func(format string, args ...any) *wire.EndpointError {
		return wire.NewEndpointError(wire.CodeTargetMismatch, wire.OutcomeNotExecuted, format, args...)
	}
	switch route.Mode.TargetTokens() {
	case 0:
		if t != nil {
			return mismatch("a %s request carries no body target", modeName(route.Mode))
		}
		return nil
	case 1:
		if t == nil || t.Owner != route.Target.Owner {
			return mismatch("the body target must name the subject's target owner %q", route.Target.Owner)
		}
		return nil
	}
	if t == nil || t.Owner != route.Target.Owner || t.Actor != route.Target.Actor || t.LifecycleUID != string(route.Target.UID) {
		return mismatch("the body target must be the subject's %s.%s.%s", route.Target.Owner, route.Target.Actor, route.Target.UID)
	}
	return nil
}

func modeName(m wire.AuthzMode) string {
	if m == wire.ModeNone {
		return "untargeted"
	}
	return string(m)
}

// answer replies to a call on the subject derived from its request subject; a cast is never
// answered. A body too broken to say whether it is a call is answered, under the id "invalid".
func (s *Server) answer(route wire.EndpointRoute, body []byte, req *wire.EndpointRequest, result any) {
	id := "invalid"
	if req != nil {
		if !req.ReplyExpected {
			return
		}
		id = req.ID
	} else if rid, call, ok := peekCall(body); ok {
		if !call {
			return
		}
		id = rid
	}
	var reply *wire.EndpointReply
	switch r := result.(type) {
	case *wire.EndpointError:
		reply = meshwire.ErrorReply(id, r)
	case json.RawMessage:
		reply = meshwire.OKReply(id, r)
	}
	data, err := json.Marshal(reply)
	if err != nil {
		s.log.Error("encode a reply", "err", err)
		return
	}
	subject, err := s.cfg.Space.ReplySubject(route, s.cfg.Instance, s.cfg.Epoch)
	if err != nil {
		s.log.Error("derive a reply subject", "err", err)
		return
	}
	if err := s.nc.Publish(subject, data); err != nil {
		s.log.Warn("publish a reply", "subject", subject, "err", err)
	}
}

// peekCall reads the id and replyExpected of a body the strict decoder refused, so a malformed
// call is answered under its own id and a malformed cast is not answered at all.
func peekCall(body []byte) (id string, call, ok bool) {
	var p struct {
		ID            *string `json:"id"`
		ReplyExpected *bool   `json:"replyExpected"`
	}
	if json.Unmarshal(body, &p) != nil || p.ReplyExpected == nil {
		return "", false, false
	}
	if p.ID != nil && wire.ValidateIDToken("id", *p.ID) == nil {
		id = *p.ID
	} else {
		id = "invalid"
	}
	return id, *p.ReplyExpected, true
}
