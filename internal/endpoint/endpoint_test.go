package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gocotal/cotal/internal/broker/brokertest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/metrics"
	"github.com/gocotal/cotal/wire"
)

const (
	space = wire.Space("main")
	inDig = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	ouDig = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

// objectSchema accepts a JSON object whose members are all strings, and names the first that is
// not; a stand-in for a compiled JSON Schema.
type objectSchema struct{}

func (objectSchema) Validate(v json.RawMessage) error {
	var m map[string]any
	if err := json.Unmarshal(v, &m); err != nil || m == nil {
		return errors.New("must be an object")
	}
	for k, x := range m {
		if _, ok := x.(string); !ok {
			return fmt.Errorf("/%s: must be a string", k)
		}
	}
	return nil
}

// fixture is a served endpoint "com.acme.echo" with an untargeted echo, a self-mode whoami and
// an owner/any-mode poke, each counting its runs.
type fixture struct {
	url      string
	srv      *Server
	instance wire.LifecycleUID
	runs     atomic.Int64
	blocking atomic.Bool   // when set, echo waits for release
	release  chan struct{} // closed at cleanup
}

func startFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{url: brokertest.Start(t), instance: wire.NewLifecycleUID(), release: make(chan struct{})}
	nc, err := nats.Connect(f.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	cmd := func(name string, modes []wire.AuthzMode, h Handler) Command {
		return Command{Name: name, Class: wire.ClassEphemeral, Modes: modes, InputDigest: inDig, OutputDigest: ouDig,
			Input: objectSchema{}, Output: objectSchema{}, Handle: func(ctx context.Context, r *Request) (any, error) {
				f.runs.Add(1)
				return h(ctx, r)
			}}
	}
	f.srv, err = Serve(nc, Config{
		Space: space, Endpoint: "com.acme.echo", Owner: "local", Instance: f.instance, Epoch: 3,
		Commands: []Command{
			cmd("echo", nil, func(ctx context.Context, r *Request) (any, error) {
				if f.blocking.Load() {
					<-f.release // past the call's deadline: the caller hears nothing
				}
				return r.Args(), nil
			}),
			cmd("whoami", []wire.AuthzMode{wire.ModeSelf}, func(_ context.Context, r *Request) (any, error) {
				return map[string]string{"id": r.Caller().String()}, nil
			}),
			cmd("poke", []wire.AuthzMode{wire.ModeOwner, wire.ModeAny}, func(_ context.Context, r *Request) (any, error) {
				return map[string]string{"actor": r.Envelope.Target.Actor}, nil
			}),
		},
		Clusters: []Cluster{{Digest: ouDig, Commands: []string{"echo", "poke", "whoami"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.srv.Stop(context.Background()) })
	t.Cleanup(func() { close(f.release) }) // runs before the Stop above
	return f
}

func newCaller(t *testing.T, url, actor string) (*Caller, wire.Lifecycle) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	p, err := wire.NewPrincipal("local", actor)
	if err != nil {
		t.Fatal(err)
	}
	me := wire.Lifecycle{Principal: p, UID: wire.NewLifecycleUID()}
	return NewCaller(nc, space, me, actor), me
}

func echo(args any) Call {
	return Call{Endpoint: "com.acme.echo", Command: "echo", Args: args, InputDigest: inDig, OutputDigest: ouDig}
}

func wantCode(t *testing.T, err error, code wire.ErrorCode, outcome wire.Outcome) *wire.EndpointError {
	t.Helper()
	e, ok := errors.AsType[*wire.EndpointError](err)
	if !ok {
		t.Fatalf("error %v is not an endpoint error", err)
	}
	if e.Code != code || e.OutcomeOrUnknown() != outcome {
		t.Fatalf("got %s (outcome %s), want %s (outcome %s)", e, e.OutcomeOrUnknown(), code, outcome)
	}
	return e
}

func TestCallCastAndDescribe(t *testing.T) {
	f := startFixture(t)
	c, me := newCaller(t, f.url, "alice")
	ctx := t.Context()

	counted := metrics.EndpointCalls.WithLabelValues("com.acme.echo", "echo", metrics.OK)
	before := testutil.ToFloat64(counted)
	r, err := c.Call(ctx, echo(map[string]string{"say": "hi"}))
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(counted) - before; n != 1 {
		t.Errorf("the call counted %v times in cotal_endpoint_calls_total, want once", n)
	}
	if string(r.Data) != `{"say":"hi"}` || r.From.Instance != f.instance || r.From.Epoch != 3 {
		t.Errorf("echo: %s from %+v", r.Data, r.From)
	}
	r, err = c.Call(ctx, Call{Endpoint: "com.acme.echo", Command: "whoami", Mode: wire.ModeSelf, InputDigest: inDig, OutputDigest: ouDig, Args: map[string]string{}})
	if err != nil || !strings.Contains(string(r.Data), me.String()) {
		t.Errorf("whoami: %v, %v", r, err)
	}
	r, err = c.Call(ctx, Call{Endpoint: "com.acme.echo", Command: "poke", Mode: wire.ModeOwner, InputDigest: inDig, OutputDigest: ouDig, Args: map[string]string{},
		Target: &wire.Target{Owner: "local", Actor: "bob", LifecycleUID: string(wire.NewLifecycleUID())}})
	if err != nil || string(r.Data) != `{"actor":"bob"}` {
		t.Errorf("poke: %v, %v", r, err)
	}

	// describe: untargeted, no digests, the descriptor the server was given.
	r, err = c.Call(ctx, Call{Endpoint: "com.acme.echo", Command: wire.CommandDescribe})
	if err != nil {
		t.Fatal(err)
	}
	var d DescribeAnswer
	if err := json.Unmarshal(r.Data, &d); err != nil || !d.Public || d.Descriptor.Endpoint != "com.acme.echo" || d.Descriptor.Protocol.V != 1 || len(d.Descriptor.Clusters) != 1 {
		t.Errorf("describe: %s, %v", r.Data, err)
	}

	// The versioned rail is answered on the versioned reply rail.
	c.generation = "0123456789abcdef0123456789abcdef"
	if r, err := c.Call(ctx, echo(map[string]string{})); err != nil || string(r.Data) != `{}` {
		t.Errorf("echo on ep.v1: %v, %v", r, err)
	}
	c.generation = ""

	// A cast runs the handler and is never answered.
	runs := f.runs.Load()
	if err := c.Cast(ctx, echo(map[string]string{})); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); f.runs.Load() != runs+1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the cast did not run")
		}
	}
}

func TestCallerClassifiesWhatItObserved(t *testing.T) {
	f := startFixture(t)
	c, _ := newCaller(t, f.url, "alice")

	// Nobody serves the endpoint: the broker's no-responders answer on the sentinel.
	_, err := c.Call(t.Context(), Call{Endpoint: "com.acme.nobody", Command: "x", InputDigest: inDig, OutputDigest: ouDig})
	wantCode(t, err, wire.CodeUnavailable, wire.OutcomeNotExecuted)

	// A request the grammar refuses never leaves.
	_, err = c.Call(t.Context(), Call{Endpoint: "com.acme.echo", Command: "Echo"})
	wantCode(t, err, wire.CodeBadRequest, wire.OutcomeNotExecuted)

	// Received and never answered: unknown.
	f.blocking.Store(true)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err = c.Call(ctx, echo(map[string]string{}))
	wantCode(t, err, wire.CodeDeadlineExceeded, wire.OutcomeUnknown)
}

func TestBindFence(t *testing.T) {
	f := startFixture(t)
	c, _ := newCaller(t, f.url, "alice")
	ctx := t.Context()
	before := f.runs.Load()

	call := echo(map[string]string{})
	call.Bind = &wire.Bind{InstanceID: string(wire.NewLifecycleUID()), Epoch: 3}
	_, err := c.Call(ctx, call)
	if e := wantCode(t, err, wire.CodeFailedPrecondition, wire.OutcomeNotExecuted); !e.HasDetail(wire.DetailBindRefused) {
		// The responder refused before its effect; the caller sees its own unbound check first,
		// keeping the responder's not-executed.
		if !e.HasDetail(wire.DetailUnboundResponder) {
			t.Errorf("another instance: %v", e)
		}
	}
	call.Bind = &wire.Bind{InstanceID: string(f.instance), Epoch: 2}
	_, err = c.Call(ctx, call)
	e := wantCode(t, err, wire.CodeFailedPrecondition, wire.OutcomeNotExecuted)
	if !e.HasDetail(wire.DetailUnboundResponder) {
		t.Errorf("another epoch: %v", e)
	}
	if f.runs.Load() != before {
		t.Fatalf("a bound request ran on another incarnation")
	}
	call.Bind = &wire.Bind{InstanceID: string(f.instance), Epoch: 3}
	if _, err := c.Call(ctx, call); err != nil {
		t.Fatalf("the bound incarnation refused: %v", err)
	}
}

// rawClient publishes request bodies of its own making, as a hostile or broken peer would.
type rawClient struct {
	t   *testing.T
	nc  *nats.Conn
	me  wire.Lifecycle
	url string
}

func newRaw(t *testing.T, url string) *rawClient {
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	p, _ := wire.NewPrincipal("local", "mallory")
	return &rawClient{t: t, nc: nc, me: wire.Lifecycle{Principal: p, UID: wire.NewLifecycleUID()}, url: url}
}

// send publishes body on the route's subject, with a decoy transport reply, and returns the reply
// that arrives on the derived rail (nil after a short wait for none) and what reached the decoy.
func (rc *rawClient) send(route wire.EndpointRoute, body []byte) (*wire.EndpointReply, int) {
	rc.t.Helper()
	subj, err := space.RequestSubject(route)
	if err != nil {
		rc.t.Fatal(err)
	}
	sub, err := rc.nc.SubscribeSync(space.ReplyFilter(route))
	if err != nil {
		rc.t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	decoy, _ := rc.nc.SubscribeSync("decoy.>")
	defer func() { _ = decoy.Unsubscribe() }()
	if err := rc.nc.PublishMsg(&nats.Msg{Subject: subj, Reply: "decoy.reply", Data: body}); err != nil {
		rc.t.Fatal(err)
	}
	msg, err := sub.NextMsg(time.Second)
	n, _, _ := decoy.Pending()
	if err != nil {
		return nil, n
	}
	r, err := wire.DecodeEndpointReply(msg.Data)
	if err != nil {
		rc.t.Fatalf("the responder's reply does not decode: %v: %s", err, msg.Data)
	}
	return r, n
}

// TestRefusalsNeverRunTheHandler sends every malformed request from a raw nats.go client: each
// is answered on the derived rail with its catalog code and outcome not-executed, the transport
// reply it named is ignored, and no handler runs.
func TestRefusalsNeverRunTheHandler(t *testing.T) {
	f := startFixture(t)
	rc := newRaw(t, f.url)
	base := func(command string, mode wire.AuthzMode) (wire.EndpointRoute, map[string]any) {
		route := wire.EndpointRoute{Address: wire.AddressOne, Endpoint: "com.acme.echo", Command: command, Mode: mode, Caller: rc.me, Nonce: wire.NewNonce()}
		body := map[string]any{"v": 1, "id": "r1", "class": "ephemeral", "replyExpected": true, "deadlineMs": 5000,
			"op":   map[string]any{"endpoint": "com.acme.echo", "command": command, "inputDigest": inDig, "outputDigest": ouDig},
			"from": map[string]any{"id": rc.me.Principal.String(), "name": "mallory"}, "args": map[string]any{}}
		return route, body
	}
	target := map[string]any{"owner": "local", "actor": "bob", "lifecycleUid": string(wire.NewLifecycleUID())}
	type tc struct {
		name   string
		mutate func(r *wire.EndpointRoute, b map[string]any)
		raw    string // replaces the body when set
		code   wire.ErrorCode
		detail string
	}
	cases := []tc{
		{name: "version 2", mutate: func(_ *wire.EndpointRoute, b map[string]any) { b["v"] = 2; b["novel"] = true }, code: wire.CodeUnsupportedVersion},
		{name: "duplicate keys", raw: `{"v":1,"id":"r1","id":"r2","class":"ephemeral","replyExpected":true,"deadlineMs":5000,"op":{"endpoint":"com.acme.echo","command":"echo","inputDigest":"` + inDig + `","outputDigest":"` + ouDig + `"},"from":{"id":"local.mallory","name":"m"}}`, code: wire.CodeBadRequest},
		{name: "lone surrogate", raw: `{"v":1,"id":"r1","class":"ephemeral","replyExpected":true,"deadlineMs":5000,"op":{"endpoint":"com.acme.echo","command":"echo","inputDigest":"` + inDig + `","outputDigest":"` + ouDig + `"},"from":{"id":"local.mallory","name":"\ud800"}}`, code: wire.CodeBadRequest},
		{name: "not json", raw: `{"v":1,`, code: wire.CodeBadRequest},
		{name: "op endpoint", mutate: func(_ *wire.EndpointRoute, b map[string]any) { b["op"].(map[string]any)["endpoint"] = "com.acme.other" }, code: wire.CodeOpMismatch},
		{name: "op command", mutate: func(_ *wire.EndpointRoute, b map[string]any) { b["op"].(map[string]any)["command"] = "poke" }, code: wire.CodeOpMismatch},
		{name: "sender", mutate: func(_ *wire.EndpointRoute, b map[string]any) {
			b["from"] = map[string]any{"id": "local.alice", "name": "alice"}
		}, code: wire.CodeSenderMismatch},
		{name: "self with a target", mutate: func(r *wire.EndpointRoute, b map[string]any) {
			r.Command, r.Mode = "whoami", wire.ModeSelf
			b["op"].(map[string]any)["command"] = "whoami"
			b["target"] = target
		}, code: wire.CodeTargetMismatch},
		{name: "untargeted with a target", mutate: func(_ *wire.EndpointRoute, b map[string]any) { b["target"] = target }, code: wire.CodeTargetMismatch},
		{name: "owner without a target", mutate: func(r *wire.EndpointRoute, b map[string]any) {
			r.Command, r.Mode, r.Target = "poke", wire.ModeOwner, wire.EndpointTarget{Owner: "local"}
			b["op"].(map[string]any)["command"] = "poke"
		}, code: wire.CodeTargetMismatch},
		{name: "owner with another owner", mutate: func(r *wire.EndpointRoute, b map[string]any) {
			r.Command, r.Mode, r.Target = "poke", wire.ModeOwner, wire.EndpointTarget{Owner: "local"}
			b["op"].(map[string]any)["command"] = "poke"
			b["target"] = map[string]any{"owner": "u_abcdefghijklmnopqrstuvwxyz", "actor": "bob", "lifecycleUid": string(wire.NewLifecycleUID())}
		}, code: wire.CodeTargetMismatch},
		{name: "mode not admitted", mutate: func(r *wire.EndpointRoute, b map[string]any) {
			r.Command, r.Mode, r.Target = "poke", wire.ModeLedger, wire.EndpointTarget{Owner: "local"}
			b["op"].(map[string]any)["command"] = "poke"
			b["target"] = target
		}, code: wire.CodePermissionDenied},
		{name: "mode on an untargeted command", mutate: func(r *wire.EndpointRoute, _ map[string]any) { r.Mode = wire.ModeSelf }, code: wire.CodePermissionDenied},
		{name: "journal class", mutate: func(_ *wire.EndpointRoute, b map[string]any) { b["class"] = "journal" }, code: wire.CodeClassMismatch},
		{name: "no digests", mutate: func(_ *wire.EndpointRoute, b map[string]any) {
			b["op"] = map[string]any{"endpoint": "com.acme.echo", "command": "echo"}
		}, code: wire.CodeContractMismatch},
		{name: "another contract", mutate: func(_ *wire.EndpointRoute, b map[string]any) { b["op"].(map[string]any)["inputDigest"] = ouDig }, code: wire.CodeContractMismatch},
		{name: "describe with digests", mutate: func(r *wire.EndpointRoute, b map[string]any) {
			r.Command = wire.CommandDescribe
			b["op"].(map[string]any)["command"] = wire.CommandDescribe
			delete(b, "args")
		}, code: wire.CodeContractMismatch},
		{name: "describe with a bind", mutate: func(r *wire.EndpointRoute, b map[string]any) {
			r.Command = wire.CommandDescribe
			b["op"] = map[string]any{"endpoint": "com.acme.echo", "command": wire.CommandDescribe}
			b["bind"] = map[string]any{"instanceId": string(f.instance), "epoch": 3}
			delete(b, "args")
		}, code: wire.CodeBadRequest},
		{name: "bind another instance", mutate: func(_ *wire.EndpointRoute, b map[string]any) {
			b["bind"] = map[string]any{"instanceId": string(wire.NewLifecycleUID()), "epoch": 3}
		}, code: wire.CodeFailedPrecondition, detail: wire.DetailBindRefused},
		{name: "bind another epoch", mutate: func(_ *wire.EndpointRoute, b map[string]any) {
			b["bind"] = map[string]any{"instanceId": string(f.instance), "epoch": 4}
		}, code: wire.CodeExpired, detail: wire.DetailBindRefused},
		{name: "bind on scatter", mutate: func(r *wire.EndpointRoute, b map[string]any) {
			r.Address = wire.AddressAll
			b["bind"] = map[string]any{"instanceId": string(f.instance), "epoch": 3}
		}, code: wire.CodeBadRequest},
		{name: "inst bind naming another instance", mutate: func(r *wire.EndpointRoute, b map[string]any) {
			r.Address, r.Instance = wire.AddressInst, f.instance
			b["bind"] = map[string]any{"instanceId": string(wire.NewLifecycleUID()), "epoch": 3}
		}, code: wire.CodeBadRequest},
		{name: "args against the schema", mutate: func(_ *wire.EndpointRoute, b map[string]any) { b["args"] = map[string]any{"n": 1} }, code: wire.CodeBadRequest},
		{name: "args absent on an object input", mutate: func(_ *wire.EndpointRoute, b map[string]any) { delete(b, "args") }, code: wire.CodeBadRequest},
		{name: "call without a deadline", mutate: func(_ *wire.EndpointRoute, b map[string]any) { delete(b, "deadlineMs") }, code: wire.CodeBadRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			route, body := base("echo", wire.ModeNone)
			if c.mutate != nil {
				c.mutate(&route, body)
			}
			raw := []byte(c.raw)
			if c.raw == "" {
				raw, _ = json.Marshal(body)
			}
			before := f.runs.Load()
			reply, decoy := rc.send(route, raw)
			if reply == nil {
				t.Fatal("no reply on the derived rail")
			}
			if reply.OK || reply.Error == nil || reply.Error.Code != c.code || reply.Error.Outcome != wire.OutcomeNotExecuted {
				t.Fatalf("reply %+v, want %s not-executed", reply.Error, c.code)
			}
			if c.detail != "" && !reply.Error.HasDetail(c.detail) {
				t.Errorf("reply lacks detail %s: %+v", c.detail, reply.Error)
			}
			if decoy != 0 {
				t.Errorf("the responder answered the transport reply")
			}
			if f.runs.Load() != before {
				t.Errorf("the handler ran")
			}
		})
	}

	// A malformed cast is never answered, and never run.
	route, body := base("echo", wire.ModeNone)
	body["replyExpected"] = false
	body["args"] = map[string]any{"n": 1}
	raw, _ := json.Marshal(body)
	before := f.runs.Load()
	if reply, _ := rc.send(route, raw); reply != nil {
		t.Errorf("a cast was answered: %+v", reply)
	}
	if f.runs.Load() != before {
		t.Error("a refused cast ran")
	}
}

// serveEcho serves com.acme.echo's echo as instance at epoch on its own connection.
func serveEcho(t *testing.T, url string, instance wire.LifecycleUID, epoch int64) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	srv, err := Serve(nc, Config{Space: space, Endpoint: "com.acme.echo", Owner: "local", Instance: instance, Epoch: epoch,
		Commands: []Command{{Name: "echo", Class: wire.ClassEphemeral, InputDigest: inDig, OutputDigest: ouDig, Input: objectSchema{}, Output: objectSchema{},
			Handle: func(_ context.Context, r *Request) (any, error) { return map[string]string{"i": string(instance)}, nil }}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
}

func TestScatterClassifiesEveryReply(t *testing.T) {
	url := brokertest.Start(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: string(meshwire.RecordsBucket(space))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	spec := ServiceSpec{Endpoint: "com.acme.echo", Owner: "local", ClusterDigests: []string{ouDig}, Protocol: Protocol{V: 1}}

	wantCode(t, func() error { _, err := Instances(ctx, kv, "com.acme.echo"); return err }(), wire.CodeFailedPrecondition, wire.OutcomeNotExecuted)

	live, silent, restarted, stray, gone := wire.NewLifecycleUID(), wire.NewLifecycleUID(), wire.NewLifecycleUID(), wire.NewLifecycleUID(), wire.NewLifecycleUID()
	for _, in := range []wire.LifecycleUID{live, silent, restarted, gone} {
		if _, err := Register(ctx, kv, in, 1, spec, nil); err != nil {
			t.Fatal(err)
		}
	}
	// gone stops cleanly: it leaves the expected set. Registering it again advances nothing
	// here (the epoch is the caller's), but its CAS must see the delete marker.
	reg, err := Register(ctx, kv, gone, 1, spec, nil)
	if err == nil {
		err = reg.Deregister(ctx, 1)
	}
	if err != nil {
		t.Fatalf("re-register and deregister: %v", err)
	}
	expected, err := Instances(ctx, kv, "com.acme.echo")
	if err != nil || len(expected) != 3 {
		t.Fatalf("expected set %+v, %v", expected, err)
	}

	serveEcho(t, url, live, 1)
	serveEcho(t, url, restarted, 2) // registered at epoch 1, answering at 2: churn
	serveEcho(t, url, stray, 1)     // answering, never registered: unexpected
	c, _ := newCaller(t, url, "alice")
	sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	g, err := c.Scatter(sctx, echo(map[string]string{}), expected, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Replies) != 1 || g.Replies[live] == nil {
		t.Errorf("replies %v, want live's alone", g.Replies)
	}
	if len(g.Missing) != 1 || g.Missing[0].ID != silent {
		t.Errorf("missing %+v, want silent", g.Missing)
	}
	if len(g.Churn) != 1 || g.Churn[0].From.Instance != restarted || len(g.Unexpected) != 1 || g.Unexpected[0].From.Instance != stray {
		t.Errorf("churn %v, unexpected %v", g.Churn, g.Unexpected)
	}
	if g.Complete() {
		t.Error("a partial gather reports complete")
	}

	// A bound scatter is refused before it leaves; so is an empty expected set.
	call := echo(map[string]string{})
	call.Bind = &wire.Bind{InstanceID: string(live), Epoch: 1}
	_, err = c.Scatter(ctx, call, expected, 0)
	wantCode(t, err, wire.CodeBadRequest, wire.OutcomeNotExecuted)
	_, err = c.Scatter(ctx, echo(map[string]string{}), nil, 0)
	wantCode(t, err, wire.CodeFailedPrecondition, wire.OutcomeNotExecuted)
}
