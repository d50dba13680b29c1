package manager_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/contract"
	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// served is a supervisor served as a manager instance on its own serving credential.
type served struct {
	svc      *manager.Service
	held     *ledger.Held
	instance wire.LifecycleUID
	// fenced is set once a newer incarnation took the instance over: it can no longer stop cleanly.
	fenced bool
	epoch  int64
}

// serve serves f's supervisor as manager instance name, with the readiness deadline given, until
// the test ends.
func (f *fixture) serve(t *testing.T, name string, readiness time.Duration, edits ...func(*manager.ServiceConfig)) *served {
	t.Helper()
	l := f.m.Ledger("")
	instance := wire.NewLifecycleUID()
	h, epoch, err := l.HoldServing(t.Context(), wire.ManagerEndpoint, name, instance, manager.Commands(), time.Hour, nil)
	if err != nil {
		t.Fatalf("hold the manager credential: %v", err)
	}
	cfg := manager.ServiceConfig{
		Conn: h.Conn, Space: f.m.Space, Instance: instance, Epoch: epoch, Owner: wire.DevOwner, Readiness: readiness,
		HostLaunch: func(ctx context.Context, caller wire.Lifecycle) bool {
			ok, _ := l.Instrument(ctx, caller)
			return ok
		},
	}
	for _, edit := range edits {
		edit(&cfg)
	}
	svc, err := f.sup.Serve(t.Context(), cfg)
	if err != nil {
		t.Fatalf("serve the manager: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = f.sup.Close(ctx)
		if err := svc.Stop(ctx); err != nil {
			t.Errorf("stop the manager service: %v", err)
		}
		_ = h.Release()
	})
	return &served{svc: svc, held: h, instance: instance, epoch: epoch}
}

// operator returns a manager client on a control instrument credential, with the records bucket
// it reads the registry from.
func operator(t *testing.T, m *meshtest.Mesh) (*manager.Client, jetstream.KeyValue, wire.Lifecycle) {
	t.Helper()
	cred, err := m.Ledger("").Issue(t.Context(), ledger.Request{Profile: authority.ProfileControlAdmin, Name: "cotal_control"})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Connect(t, cred)
	records, err := c.JS.KeyValue(t.Context(), string(meshwire.RecordsBucket(m.Space)))
	if err != nil {
		t.Fatal(err)
	}
	me := wire.Lifecycle{Principal: cred.Principal, UID: cred.Instrument}
	mc := manager.NewClient(c.Conn, m.Space, me, "cotal_control")
	mc.Any = true
	return mc, records, me
}

// harnessArgs are spawn args running the test binary as the fake harness mode.
func harnessArgs(name, mode string) manager.SpawnArgs {
	return manager.SpawnArgs{Name: name, Subscribe: []string{"general"}, AllowPublish: []string{"general"},
		LaunchOptions: &manager.LaunchOptions{Command: []string{os.Args[0], "-test.run=^$"}, Env: []string{harnessEnv + "=" + mode}}}
}

func codeOf(err error) wire.ErrorCode {
	if e, ok := errors.AsType[*wire.EndpointError](err); ok {
		return e.Code
	}
	return ""
}

// TestServiceSpawnGoal drives the manager endpoint as the operator: spawn is a goal that
// succeeds once the agent is present, ps and inspect report it, and despawn stops exactly the
// lifecycle it names.
func TestServiceSpawnGoal(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.serve(t, "cotal_manager", 0)
	mc, records, _ := operator(t, f.m)
	ctx := t.Context()

	got, err := mc.Spawn(ctx, harnessArgs("carol", "present"))
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	a := got.Acceptance
	if got.State != manager.GoalSucceeded || a.Name != "carol" || a.Actor != "carol" || a.Owner != wire.DevOwner || a.GoalID == "" ||
		a.Executor.LifecycleUID != string(s.instance) || a.Executor.Epoch != s.epoch || a.ReadinessDeadlineMs != manager.ReadinessDeadline.Milliseconds() {
		t.Fatalf("spawn = %+v", got)
	}
	g, err := mc.Ps(ctx, records)
	if err != nil || !g.Complete() {
		t.Fatalf("ps: %+v, %v", g, err)
	}
	rows, err := manager.Rows(g)
	if err != nil || len(rows) != 1 || rows[0].Name != "carol" || rows[0].LifecycleUID != a.UID || rows[0].InstanceID != string(s.instance) || rows[0].PID == 0 {
		t.Fatalf("ps rows = %+v, %v", rows, err)
	}
	row, instance, err := mc.Find(ctx, records, "carol")
	if err != nil || instance != s.instance || row.ID != "local.carol" {
		t.Fatalf("find carol = %+v on %s, %v", row, instance, err)
	}

	// A despawn pinned to a lifecycle carol no longer is: expired, and carol keeps running.
	r, err := mc.Caller().Describe(ctx, wire.ManagerEndpoint, s.instance)
	if err != nil {
		t.Fatal(err)
	}
	call, err := r.Call(manager.CommandDespawn, map[string]bool{"graceful": true})
	if err != nil {
		t.Fatal(err)
	}
	call.Address, call.Instance, call.Mode = wire.AddressInst, s.instance, wire.ModeAny
	call.Target = &wire.Target{Owner: wire.DevOwner, Actor: "carol", LifecycleUID: string(wire.NewLifecycleUID())}
	if _, err := mc.Caller().Call(ctx, call); codeOf(err) != wire.CodeExpired || endpoint.Outcome(err) != wire.OutcomeNotExecuted {
		t.Fatalf("despawn of a stale lifecycle: %v", err)
	}
	if st, ok := f.sup.Lookup("carol"); !ok || st.State != manager.StateRunning {
		t.Fatalf("a stale despawn touched carol: %+v", st)
	}

	if _, err := mc.Despawn(ctx, records, "carol", true); err != nil {
		t.Fatalf("despawn: %v", err)
	}
	if st := f.wait(t, "carol"); st.State != manager.StateStopped {
		t.Fatalf("carol after despawn: %+v", st)
	}
	f.retired(t, "carol")
	if _, _, err := mc.Find(ctx, records, "carol"); err == nil {
		// A stopped agent is still listed until replaced; it must not read as running.
		if row, _, _ := mc.Find(ctx, records, "carol"); row.Status == string(manager.StateRunning) {
			t.Fatalf("carol still runs: %+v", row)
		}
	}
}

// TestServiceGoalStates: an agent that never becomes present ends its goal uncertain at the
// readiness deadline, one that exits at once ends it failed, and the first terminal fact stands.
func TestServiceGoalStates(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *manager.Config) { c.MaxRestarts = -1 })
	s := f.serve(t, "cotal_manager", 2*time.Second)
	mc, _, me := operator(t, f.m)
	ctx := t.Context()

	got, err := mc.Spawn(ctx, harnessArgs("quiet", "sleep"))
	if err != nil || got.State != manager.GoalUncertain || got.Acceptance.ReadinessDeadlineMs != 2000 {
		t.Fatalf("spawn of a never-present agent = %+v, %v", got, err)
	}
	if st, ok := f.sup.Lookup("quiet"); !ok || st.State != manager.StateRunning {
		t.Fatalf("an uncertain goal must leave its agent running: %+v", st)
	}
	got, err = mc.Spawn(ctx, harnessArgs("crasher", "crash"))
	if err != nil || got.State != manager.GoalFailed {
		t.Fatalf("spawn of an agent that exits = %+v, %v", got, err)
	}
	// The result fact is create-only: a second write of the same goal is refused by the stream.
	fact, err := f.m.Space.FactSubject(wire.ManagerEndpoint, wire.GoalResultTopic(me, got.Acceptance.GoalID)...)
	if err != nil {
		t.Fatal(err)
	}
	// The manager's own credential holds the create-only row: a second terminal fact is refused
	// because the first is stored.
	js, err := jetstream.New(s.held.Conn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = js.Publish(ctx, fact, []byte(`{"state":"succeeded"}`), jetstream.WithExpectLastSequencePerSubject(0))
	if apiErr, ok := errors.AsType[*jetstream.APIError](err); !ok || apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
		t.Fatalf("a second result fact for goal %s: %v", got.Acceptance.GoalID, err)
	}
}

// TestServiceTwoManagers: two supervisors serve one space; ps scatters to both and gathers each
// one's agents, and despawn reaches the manager that runs the agent.
func TestServiceTwoManagers(t *testing.T) {
	meshtest.Long(t, "two managers")
	t.Parallel()
	one := newFixture(t)
	two := supervisorOn(t, one.m)
	s1 := one.serve(t, "cotal_manager", 0)
	s2 := two.serve(t, "second_manager", 0)
	mc, records, _ := operator(t, one.m)
	ctx := t.Context()

	for _, name := range []string{"ann", "bob"} {
		if got, err := mc.Spawn(ctx, harnessArgs(name, "present")); err != nil || got.State != manager.GoalSucceeded {
			t.Fatalf("spawn %s: %+v, %v", name, got, err)
		}
	}
	// The class rail hands each spawn to one member of the queue group: make sure each manager
	// runs one agent by spawning on the other's instance rail when both landed together.
	_, onOne := one.sup.Lookup("ann")
	_, bobOnOne := one.sup.Lookup("bob")
	if onOne == bobOnOne {
		if _, err := mc.Despawn(ctx, records, "bob", false); err != nil {
			t.Fatal(err)
		}
		target := s2.instance
		if !onOne {
			target = s1.instance
		}
		spawnOn(t, mc, target, harnessArgs("cyd", "present"))
	}
	g, err := mc.Ps(ctx, records)
	if err != nil || !g.Complete() || len(g.Replies) != 2 {
		t.Fatalf("ps across two managers: %+v, %v", g, err)
	}
	rows, err := manager.Rows(g)
	if err != nil {
		t.Fatal(err)
	}
	from := map[string]bool{}
	for _, r := range rows {
		if r.Status == string(manager.StateRunning) {
			from[r.InstanceID] = true
		}
	}
	if !from[string(s1.instance)] || !from[string(s2.instance)] {
		t.Fatalf("ps rows %+v do not come from both managers %s and %s", rows, s1.instance, s2.instance)
	}
}

// spawnOn spawns on one manager instance's rail and waits for its goal.
func spawnOn(t *testing.T, mc *manager.Client, instance wire.LifecycleUID, args manager.SpawnArgs) {
	t.Helper()
	r, err := mc.Caller().Describe(t.Context(), wire.ManagerEndpoint, instance)
	if err != nil {
		t.Fatal(err)
	}
	call, err := r.Call(manager.CommandSpawn, args)
	if err != nil {
		t.Fatal(err)
	}
	call.Address, call.Instance = wire.AddressInst, instance
	if _, err := mc.Caller().Call(t.Context(), call); err != nil {
		t.Fatalf("spawn %s on %s: %v", args.Name, instance, err)
	}
}

// TestServiceAgentCallers: an agent without the spawn capability is refused by the broker; one
// with it reaches the manager, which still refuses it a raw command (host launch authority); an
// agent the manager spawned stops itself with stop (mode self).
func TestServiceAgentCallers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.serve(t, "cotal_manager", 0)
	ctx := t.Context()
	agent := func(name string, caps ...string) *manager.Client {
		cred, c := f.m.Agent(t, ledger.Request{Name: name, Capabilities: caps})
		return manager.NewClient(c.Conn, f.m.Space, wire.Lifecycle{Principal: cred.Principal, UID: cred.LifecycleUID}, name)
	}

	plain := agent("plain")
	if _, err := plain.Spawn(ctx, manager.SpawnArgs{Name: "x"}); codeOf(err) != wire.CodePermissionDenied || endpoint.Outcome(err) != wire.OutcomeNotExecuted {
		t.Fatalf("spawn without the capability: %v", err)
	}
	if _, ok := f.sup.Lookup("x"); ok {
		t.Fatal("a refused spawn ran")
	}
	spawner := agent("spawner", authority.CapabilitySpawn)
	if _, err := spawner.Spawn(ctx, harnessArgs("y", "present")); codeOf(err) != wire.CodePermissionDenied {
		t.Fatalf("a raw command from an agent: %v", err)
	}
	if _, ok := f.sup.Lookup("y"); ok {
		t.Fatal("an agent launched a raw command")
	}

	mc, _, _ := operator(t, f.m)
	if _, err := mc.Spawn(ctx, harnessArgs("quitter", "selfstop")); err != nil {
		t.Fatal(err)
	}
	// Exit 0: the agent had its reply before the stop's signal reached it.
	if st := f.wait(t, "quitter"); st.State != manager.StateStopped || st.ExitCode != 0 {
		t.Fatalf("an agent that stopped itself: %+v", st)
	}
	f.retired(t, "quitter")
}

// TestRawAgentOnTheManager speaks to the manager from a raw nats.go connection holding only an
// agent credential, on the versioned ep.v1 rail its issued generation pins: describe is answered
// on the derived reply subject, and every malformed request gets its catalog code, not-executed,
// without reaching a handler.
func TestRawAgentOnTheManager(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.serve(t, "cotal_manager", 0)
	cred, c := f.m.Agent(t, ledger.Request{Name: "mallory"})
	if wire.ValidateGeneration(cred.Generation) != nil {
		t.Fatalf("the agent credential carries no issued generation: %q", cred.Generation)
	}
	me := wire.Lifecycle{Principal: cred.Principal, UID: cred.LifecycleUID}
	sp := f.m.Space

	// send publishes body on route's request subject and returns the raw reply and its subject.
	send := func(route wire.EndpointRoute, body []byte) (*wire.EndpointReply, string) {
		t.Helper()
		subject, err := sp.RequestSubject(route)
		if err != nil {
			t.Fatal(err)
		}
		sub, err := c.SubscribeSync(sp.ReplyFilter(route))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sub.Unsubscribe() }()
		if err := c.Publish(subject, body); err != nil {
			t.Fatal(err)
		}
		msg, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("no reply to %s: %v (broker: %v)", subject, err, c.Errors())
		}
		reply, err := wire.DecodeEndpointReply(msg.Data)
		if err != nil {
			t.Fatalf("reply %s: %v", msg.Data, err)
		}
		return reply, msg.Subject
	}
	route := func(command string, mode wire.AuthzMode) wire.EndpointRoute {
		return wire.EndpointRoute{Generation: cred.Generation, Address: wire.AddressOne, Endpoint: wire.ManagerEndpoint,
			Command: command, Mode: mode, Caller: me, Nonce: wire.NewNonce()}
	}
	body := func(command string, edit func(map[string]any)) []byte {
		b := map[string]any{"v": 1, "id": "q1", "class": "ephemeral", "replyExpected": true, "deadlineMs": 5000,
			"op":   map[string]any{"endpoint": "manager", "command": command},
			"from": map[string]any{"id": me.Principal.String(), "name": "mallory"}}
		if edit != nil {
			edit(b)
		}
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}

	r := route(wire.CommandDescribe, "")
	reply, subject := send(r, body(wire.CommandDescribe, nil))
	want, err := sp.ReplySubject(r, s.instance, s.epoch)
	if err != nil {
		t.Fatal(err)
	}
	var answer endpoint.DescribeAnswer
	if !reply.OK || subject != want || json.Unmarshal(reply.Data, &answer) != nil || answer.Descriptor.Endpoint != "manager" || !answer.Public {
		t.Fatalf("describe on ep.v1: %+v on %s, want a descriptor on %s", reply, subject, want)
	}

	// The broker pins the generation: another one, or the versioned rail without one, is refused.
	forged := route(wire.CommandDescribe, "")
	forged.Generation = meshwire.NewGeneration()
	forgedSubject, err := sp.RequestSubject(forged)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Publish(forgedSubject, body(wire.CommandDescribe, nil)); err != nil {
		t.Fatal(err)
	}
	if refused, err := c.Refused("Publish", forgedSubject); err != nil || !refused {
		t.Fatalf("a describe under another generation was not refused by the broker: %v", err)
	}

	stopTarget := map[string]any{"owner": wire.DevOwner, "actor": "bob", "lifecycleUid": string(wire.NewLifecycleUID())}
	for _, tc := range []struct {
		name    string
		command string
		mode    wire.AuthzMode
		body    []byte
		code    wire.ErrorCode
	}{
		{"version 2", wire.CommandDescribe, "", body(wire.CommandDescribe, func(b map[string]any) { b["v"] = 2 }), wire.CodeUnsupportedVersion},
		{"op names another command", wire.CommandDescribe, "", body(manager.CommandPs, nil), wire.CodeOpMismatch},
		{"op names another endpoint", wire.CommandDescribe, "", body(wire.CommandDescribe, func(b map[string]any) {
			b["op"] = map[string]any{"endpoint": "delivery", "command": wire.CommandDescribe}
		}), wire.CodeOpMismatch},
		{"self with a body target", manager.CommandStop, wire.ModeSelf, body(manager.CommandStop, func(b map[string]any) { b["target"] = stopTarget }), wire.CodeTargetMismatch},
		{"untargeted with a body target", wire.CommandDescribe, "", body(wire.CommandDescribe, func(b map[string]any) { b["target"] = stopTarget }), wire.CodeTargetMismatch},
		{"another sender", wire.CommandDescribe, "", body(wire.CommandDescribe, func(b map[string]any) {
			b["from"] = map[string]any{"id": "local.alice", "name": "alice"}
		}), wire.CodeSenderMismatch},
		{"duplicate keys", wire.CommandDescribe, "", []byte(`{"v":1,"id":"q1","id":"q2","class":"ephemeral","replyExpected":true,"deadlineMs":5000,"op":{"endpoint":"manager","command":"describe"},"from":{"id":"` + me.Principal.String() + `","name":"m"}}`), wire.CodeBadRequest},
		{"not json", wire.CommandDescribe, "", []byte(`{"v":1,`), wire.CodeBadRequest},
		{"describe pinned to digests", wire.CommandDescribe, "", body(wire.CommandDescribe, func(b map[string]any) {
			b["op"] = map[string]any{"endpoint": "manager", "command": wire.CommandDescribe, "inputDigest": contract.VoidDigest(), "outputDigest": contract.VoidDigest()}
		}), wire.CodeContractMismatch},
		{"describe args not void", wire.CommandDescribe, "", body(wire.CommandDescribe, func(b map[string]any) { b["args"] = map[string]any{"x": 1} }), wire.CodeBadRequest},
		{"journal class", wire.CommandDescribe, "", body(wire.CommandDescribe, func(b map[string]any) { b["class"] = "journal" }), wire.CodeClassMismatch},
		{"stop args outside its schema", manager.CommandStop, wire.ModeSelf, body(manager.CommandStop, func(b map[string]any) {
			b["args"] = map[string]any{"graceful": "yes"}
			b["op"] = stopOp(t)
		}), wire.CodeBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply, _ := send(route(tc.command, tc.mode), tc.body)
			if reply.OK || reply.Error == nil || reply.Error.Code != tc.code || reply.Error.OutcomeOrUnknown() != wire.OutcomeNotExecuted {
				t.Fatalf("reply %+v, want %s not-executed", reply, tc.code)
			}
		})
	}
}

// stopOp is stop's op block, pinned to the manager's contract.
func stopOp(t *testing.T) map[string]any {
	t.Helper()
	cl, err := manager.Contract()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cl.Document.Commands {
		if c.Name == manager.CommandStop {
			return map[string]any{"endpoint": "manager", "command": c.Name, "inputDigest": c.InputDigest, "outputDigest": c.OutputDigest}
		}
	}
	t.Fatal("the contract has no stop")
	return nil
}

// acceptSpawn sends spawn and returns the acceptance without following the goal.
func acceptSpawn(t *testing.T, mc *manager.Client, args manager.SpawnArgs) manager.Acceptance {
	t.Helper()
	r, err := mc.Caller().Describe(t.Context(), wire.ManagerEndpoint, "")
	if err != nil {
		t.Fatal(err)
	}
	call, err := r.Call(manager.CommandSpawn, args)
	if err != nil {
		t.Fatal(err)
	}
	reply, err := mc.Caller().Call(t.Context(), call)
	if err != nil {
		t.Fatalf("spawn %s: %v", args.Name, err)
	}
	var a manager.Acceptance
	if err := json.Unmarshal(reply.Data, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestServiceCancelGoal: cancel stops a spawn goal's agent and settles the goal cancelled; a
// second cancel, or one after the goal succeeded, is failed-precondition with the cached
// outcome; an agent finds only the goals it started.
func TestServiceCancelGoal(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.serve(t, "cotal_manager", 0)
	mc, _, _ := operator(t, f.m)
	cred, c := f.m.Agent(t, ledger.Request{Name: "nosy", Capabilities: []string{authority.CapabilitySpawn}})
	other := manager.NewClient(c.Conn, f.m.Space, wire.Lifecycle{Principal: cred.Principal, UID: cred.LifecycleUID}, "nosy")
	ctx := t.Context()

	a := acceptSpawn(t, mc, harnessArgs("slow", "sleep"))
	if _, err := other.Cancel(ctx, a, endpoint.CancelTerminate); codeOf(err) != wire.CodeFailedPrecondition {
		t.Fatalf("an agent's cancel of another caller's goal: %v", err)
	}
	res, err := mc.Cancel(ctx, a, endpoint.CancelTerminate)
	if err != nil || res.GoalID != a.GoalID || res.State != manager.GoalCancelled {
		t.Fatalf("cancel = %+v, %v", res, err)
	}
	if st, ok := f.sup.Lookup("slow"); !ok || st.State == manager.StateRunning {
		t.Fatalf("a cancelled spawn's agent still runs: %+v", st)
	}
	_, err = mc.Cancel(ctx, a, endpoint.CancelGraceful)
	if e, ok := errors.AsType[*wire.EndpointError](err); !ok || e.Code != wire.CodeFailedPrecondition || !e.HasDetail(wire.DetailGoalOutcome) ||
		!strings.Contains(string(e.Details[0].Extra["outcome"]), `"state":"cancelled"`) {
		t.Fatalf("a second cancel: %v", err)
	}

	got, err := mc.Spawn(ctx, harnessArgs("quick", "present"))
	if err != nil || got.State != manager.GoalSucceeded {
		t.Fatalf("spawn: %+v, %v", got, err)
	}
	_, err = mc.Cancel(ctx, got.Acceptance, endpoint.CancelGraceful)
	if e, ok := errors.AsType[*wire.EndpointError](err); !ok || e.Code != wire.CodeFailedPrecondition || !strings.Contains(string(e.Details[0].Extra["outcome"]), `"state":"succeeded"`) {
		t.Fatalf("a cancel after success: %v", err)
	}
	if st, ok := f.sup.Lookup("quick"); !ok || st.State != manager.StateRunning {
		t.Fatalf("a refused cancel touched the agent: %+v", st)
	}
	// A command of the reference's contract cotal-go does not implement has no server here: the
	// call finds no responder and is not executed.
	purge := endpoint.Call{Endpoint: wire.ManagerEndpoint, Command: manager.CommandPurge}
	if _, err := mc.Caller().Call(ctx, purge); codeOf(err) != wire.CodeUnavailable || endpoint.Outcome(err) != wire.OutcomeNotExecuted {
		t.Fatalf("purge: %v, want unavailable and not executed", err)
	}
	// A cancel names its goal, and takes only a known mode.
	call := endpoint.Call{Endpoint: wire.ManagerEndpoint, Command: wire.CommandCancel}
	if _, err := mc.Caller().Call(ctx, call); codeOf(err) != wire.CodeBadRequest {
		t.Fatalf("a cancel without a goal: %v", err)
	}
	call.GoalID, call.Args = got.Acceptance.GoalID, map[string]string{"mode": "now"}
	if _, err := mc.Caller().Call(ctx, call); codeOf(err) != wire.CodeBadRequest {
		t.Fatalf("a cancel in an unknown mode: %v", err)
	}
}

// TestServicePsShowsOwnAgents: ps and inspect show a caller the agents of its own owner (an agent
// of the host's sees the host's); another owner's manager-caller view, which holds no host launch
// authority, sees none of them.
func TestServicePsShowsOwnAgents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.serve(t, "cotal_manager", 0)
	ctx := t.Context()
	mc, records, _ := operator(t, f.m)
	if _, err := mc.Spawn(ctx, harnessArgs("hosted", "present")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := mc.Find(ctx, records, "hosted"); err != nil {
		t.Fatalf("the operator finds the host's agent: %v", err)
	}
	// An agent of the same owner, on its own credential (no host launch authority), sees it.
	peerCred, peerConn := f.m.Agent(t, ledger.Request{Name: "peer", Capabilities: []string{authority.CapabilitySpawn}})
	peer := manager.NewClient(peerConn.Conn, f.m.Space, wire.Lifecycle{Principal: peerCred.Principal, UID: peerCred.LifecycleUID}, "peer")
	if row, _, err := peer.Find(ctx, nil, "hosted"); err != nil || row.Name != "hosted" {
		t.Fatalf("an agent of the host's owner inspects the host's agent: %+v %v", row, err)
	}

	keys, err := f.m.Keyring().Space(f.m.Space)
	if err != nil {
		t.Fatal(err)
	}
	p, err := wire.NewPrincipal("u_cccccccccccccccccccccccccc", "cli")
	if err != nil {
		t.Fatal(err)
	}
	me := wire.Lifecycle{Principal: p, UID: wire.NewLifecycleUID()}
	// A person's incarnation is the ledger's, as the exchange makes it: never an instrument's.
	if _, err := f.m.Ledger("").EnsureRoot(ctx, p.Owner(), p.Actor(), me.UID); err != nil {
		t.Fatal(err)
	}
	cred, err := keys.Mint(authority.MintRequest{Profile: authority.ProfileManagerCaller, Grant: authority.Grant{Principal: p, LifecycleUID: me.UID,
		Serve: &authority.ServeRows{Endpoint: wire.ManagerEndpoint, Instance: s.instance}}})
	if err != nil {
		t.Fatal(err)
	}
	person := manager.NewClient(f.m.Connect(t, cred).Conn, f.m.Space, me, "cli")
	person.Pinned = s.instance
	if rows, _, err := person.PsPinned(ctx); err != nil || len(rows) != 0 {
		t.Fatalf("another owner's ps: %+v %v", rows, err)
	}
	if _, _, err := person.Find(ctx, nil, "hosted"); codeOf(err) != wire.CodeNotFound {
		t.Fatalf("another owner's inspect of the host's agent: %v", err)
	}
}

// TestDespawnOnlyOwnChildren: an agent with the spawn capability despawns the agents it spawned
// and itself, never the operator's agents nor another agent's children (SPEC's child mode); a
// name over the SPEC's bound is a bad request, and nothing runs.
func TestDespawnOnlyOwnChildren(t *testing.T) {
	meshtest.Long(t, "spawns and stops several agents")
	bin := t.TempDir()
	standIn := "#!/bin/sh\n" + harnessEnv + "=present exec " + os.Args[0] + " -test.run='^$'\n"
	if err := os.WriteFile(filepath.Join(bin, "claude"), []byte(standIn), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	f := newFixture(t)
	l := f.m.Ledger("")
	// Agents may spawn here within their own grant, as on a mesh from cotal up.
	f.serve(t, "cotal_manager", 20*time.Second, func(c *manager.ServiceConfig) {
		c.CallerGrant = func(ctx context.Context, caller wire.Lifecycle) (*cotal.Grant, error) {
			token, err := l.ActiveCredential(ctx, caller.UID, authority.ProfileAgent)
			if err != nil {
				return nil, err
			}
			return cotal.ParseJWT(token)
		}
	})
	ctx := t.Context()
	mc, records, _ := operator(t, f.m)
	agent := func(name string) *manager.Client {
		cred, c := f.m.Agent(t, ledger.Request{Name: name, Capabilities: []string{authority.CapabilitySpawn},
			Subscribe: []string{"general"}, AllowPublish: []string{"general"}})
		return manager.NewClient(c.Conn, f.m.Space, wire.Lifecycle{Principal: cred.Principal, UID: cred.LifecycleUID}, name)
	}
	alice, bob := agent("alice"), agent("bob")

	if _, err := alice.Spawn(ctx, manager.SpawnArgs{Name: strings.Repeat("n", 5000), Agent: string(manager.HarnessClaude)}); codeOf(err) != wire.CodeBadRequest || endpoint.Outcome(err) != wire.OutcomeNotExecuted {
		t.Fatalf("a 5,000-character name: %v", err)
	}
	if _, err := mc.Spawn(ctx, manager.SpawnArgs{Name: strings.Repeat("n", wire.MaxNameLength+1), LaunchOptions: harnessArgs("", "present").LaunchOptions}); codeOf(err) != wire.CodeBadRequest {
		t.Fatalf("a name one over the bound from the operator: %v", err)
	}

	for _, a := range []struct {
		c    *manager.Client
		name string
	}{{alice, "alice_kid"}, {bob, "bob_kid"}} {
		if got, err := a.c.Spawn(ctx, manager.SpawnArgs{Name: a.name, Agent: string(manager.HarnessClaude), Subscribe: []string{"general"}}); err != nil || got.State != manager.GoalSucceeded {
			t.Fatalf("spawn %s: %+v, %v", a.name, got, err)
		}
	}
	if got, err := mc.Spawn(ctx, harnessArgs("op_agent", "present")); err != nil || got.State != manager.GoalSucceeded {
		t.Fatalf("the operator's spawn: %+v, %v", got, err)
	}
	for _, name := range []string{"op_agent", "bob_kid"} {
		// An agent cannot read the registry: it asks whichever manager answers the class rail.
		if _, err := alice.Despawn(ctx, nil, name, false); codeOf(err) != wire.CodePermissionDenied || !strings.Contains(err.Error(), "was not spawned by") {
			t.Errorf("alice despawning %s: %v", name, err)
		}
		if st, ok := f.sup.Lookup(name); !ok || st.State != manager.StateRunning {
			t.Errorf("a refused despawn touched %s: %+v", name, st)
		}
	}
	if _, err := alice.Despawn(ctx, nil, "alice_kid", false); err != nil {
		t.Fatalf("alice despawning her own child: %v", err)
	}
	if _, err := mc.Despawn(ctx, records, "bob_kid", false); err != nil {
		t.Fatalf("the operator despawning bob's child: %v", err)
	}
}

// TestRegistryCapturesAreInert: publish acknowledgements stored at the manager's spec and status
// records (their keys are in describe's reply subject), planted through the store account as no
// reply from the space's account lands there. The registry's readers take a record only whole,
// and the manager writes its records again over any row it did not write, so the manager stays
// registered: spawn, despawn and ps still reach it.
func TestRegistryCapturesAreInert(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.serve(t, "cotal_manager", 0)
	mc, records, _ := operator(t, f.m)
	ctx := t.Context()
	cred := f.m.AgentCred(t, ledger.Request{Name: "mallory", Subscribe: []string{"general"}, AllowPublish: []string{"general"}})
	mal := f.m.StoreClient(t)
	own, _ := f.m.Space.ChatSubject(cred.Principal, "general")
	body := []byte(`{"not":"a message"}`)
	for range 3 {
		for _, leaf := range []string{meshwire.ServiceSpecLeaf, meshwire.ServiceStatusLeaf, "junk"} {
			for _, instance := range []wire.LifecycleUID{s.instance, wire.NewLifecycleUID()} {
				key := meshwire.RecordsBucket(f.m.Space).Subject(meshwire.ServiceKey(wire.ManagerEndpoint, instance, leaf))
				if err := mal.PublishMsg(&nats.Msg{Subject: own, Reply: key, Data: body}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := mal.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// The captures landed: the records stream stored acknowledgements.
	inspector := f.m.Connect(t, f.m.Mint(t, ledger.Request{Profile: authority.ProfileWarden, Name: "inspector"}))
	junk := meshwire.RecordsBucket(f.m.Space).Subject(meshwire.ServiceKey(wire.ManagerEndpoint, s.instance, "junk"))
	meshtest.Eventually(t, 10*time.Second, "a capture stored under the manager's keys", func() bool {
		m, err := kvget.ReadLast(ctx, inspector.Conn, meshwire.RecordsBucket(f.m.Space).Stream(), junk)
		return err == nil && strings.Contains(string(m.Data), `"seq"`)
	})
	meshtest.Eventually(t, 10*time.Second, "the manager registered alone, whole", func() bool {
		got, err := endpoint.Instances(ctx, records, wire.ManagerEndpoint)
		return err == nil && len(got) == 1 && got[0].ID == s.instance
	})
	if got, err := mc.Spawn(ctx, harnessArgs("survivor", "present")); err != nil || got.State != manager.GoalSucceeded {
		t.Fatalf("spawn after the captures: %+v, %v", got, err)
	}
	if _, err := mc.Despawn(ctx, records, "survivor", true); err != nil {
		t.Fatalf("despawn after the captures: %v", err)
	}
}

// TestContractStoreCapturesAreInert: before the manager first serves, publish acknowledgements
// are stored at the digest subjects of its contract (digests anyone can compute from the source),
// planted through the store account as no reply from the space's account lands there. The
// contract stream keeps the first message per subject and refuses deletes, so the manager's
// artifacts cannot be stored there; it serves all the same, its describe carrying the documents a
// caller checks against their digests.
func TestContractStoreCapturesAreInert(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	cluster, err := manager.Contract()
	if err != nil {
		t.Fatal(err)
	}
	cred := f.m.AgentCred(t, ledger.Request{Name: "mallory", Subscribe: []string{"general"}, AllowPublish: []string{"general"}})
	mal := f.m.StoreClient(t)
	own, _ := f.m.Space.ChatSubject(cred.Principal, "general")
	for _, a := range cluster.Artifacts {
		at, err := f.m.Space.ContractSubject(strings.TrimPrefix(a.Digest, "sha256:"))
		if err != nil {
			t.Fatal(err)
		}
		if err := mal.PublishMsg(&nats.Msg{Subject: own, Reply: at, Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := mal.Flush(); err != nil {
		t.Fatal(err)
	}
	inspector := f.m.Connect(t, f.m.Mint(t, ledger.Request{Profile: authority.ProfileWarden, Name: "inspector"}))
	root, _ := f.m.Space.ContractSubject(strings.TrimPrefix(cluster.Closure.Digest, "sha256:"))
	meshtest.Eventually(t, 10*time.Second, "the captures stored at the contract's digest subjects", func() bool {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		m, err := kvget.ReadLast(rctx, inspector.Conn, meshwire.ContractStream(f.m.Space), root)
		return err == nil && strings.Contains(string(m.Data), `"seq"`)
	})
	f.serve(t, "cotal_manager", 0)
	mc, _, _ := operator(t, f.m)
	if got, err := mc.Spawn(ctx, harnessArgs("after_mining", "present")); err != nil || got.State != manager.GoalSucceeded {
		t.Fatalf("spawn on a manager whose contract subjects were mined: %+v, %v", got, err)
	}
}
