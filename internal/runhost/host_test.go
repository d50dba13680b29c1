package runhost_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/runhost"
	"github.com/gocotal/cotal/lang"
	"github.com/gocotal/cotal/wire"
)

const approve = `const ok = await checkpoint("approve", "Ship it?", { timeout: "1h" })
await sleep("300ms", { name: "settle" })
log("shipped", ok.value, ok.by)`

// host returns a run host on m for one manager instance, keeping its programs in dir.
func host(t testing.TB, m *meshtest.Mesh, instance wire.LifecycleUID, dir string) *runhost.Host {
	t.Helper()
	return hostAt(t, m, instance, 1, dir)
}

// hostAt is host serving the instance at epoch.
func hostAt(t testing.TB, m *meshtest.Mesh, instance wire.LifecycleUID, epoch int64, dir string) *runhost.Host {
	t.Helper()
	h, err := runhost.NewHost(runhost.Config{
		Space: m.Space, Owner: wire.DevOwner, Dir: dir, Issuer: m.Ledger(""),
		Serve: &authority.ServeRows{Endpoint: wire.ManagerEndpoint, Instance: instance, Epoch: epoch},
		Dial: func(ctx context.Context, cred *authority.Credential) (*nats.Conn, error) {
			return dial.As(ctx, m.URL(), cred)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// openCheckpoint waits until run id waits on the checkpoint at step.
func openCheckpoint(t *testing.T, h *runhost.Host, id, step string) runhost.OpenCheckpoint {
	t.Helper()
	var got runhost.OpenCheckpoint
	meshtest.Eventually(t, 10*time.Second, "the checkpoint "+step+" to open", func() bool {
		st, _ := h.Status(id)
		for _, o := range st.Open {
			if o.Step == step {
				got = o
				return true
			}
		}
		return false
	})
	return got
}

// TestRunWithACheckpoint: a started run waits on its checkpoint, takes the answer given, waits
// out its sleep and completes; its journal on the mesh holds each step once, pending then
// settled, and its status record says completed.
func TestRunWithACheckpoint(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	h := host(t, m, wire.NewLifecycleUID(), t.TempDir())
	if _, err := h.Start(ctx, "var x = 1", operatorAdmit); err == nil {
		t.Fatal("a refused program started")
	}
	id, err := h.Start(ctx, approve, operatorAdmit)
	if err != nil {
		t.Fatal(err)
	}
	if o := openCheckpoint(t, h, id, "/checkpoint:approve#0"); o.Prompt != "Ship it?" {
		t.Errorf("the open checkpoint: %+v", o)
	}
	v, err := h.View(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(v.Journal); n != 2 || v.Journal[0].Kind != "activation" || v.Journal[1].Step != "/checkpoint:approve#0" ||
		v.Journal[1].Outcome != "pending" || v.Journal[1].Asks != "Ship it?" || v.Spec == nil {
		t.Fatalf("the view of a run at its checkpoint: %+v", v)
	}
	if _, err := h.Answer(ctx, id, "/checkpoint:nope#0", json.RawMessage(`"yes"`), "ann"); err == nil {
		t.Error("an answer to a step the run does not wait on was taken")
	}
	if _, err := h.Answer(ctx, id, "/checkpoint:approve#0", json.RawMessage(`"yes"`), "ann"); err != nil {
		t.Fatal(err)
	}
	st, err := h.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != meshwire.RunCompleted {
		t.Fatalf("the run ended %+v", st)
	}
	rec, err := m.Ledger("").ReadJournal(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Records) != 5 { // the activation, then each step pending and settled
		t.Errorf("the journal holds %d records", len(rec.Records))
	}
	if v, err = h.View(ctx, id); err != nil || len(v.Journal) != 5 || v.Journal[2].Answer == nil || string(v.Journal[2].Answer.Value) != `"yes"` || v.Journal[2].Outcome != "resolved" ||
		v.Journal[4].Step != "/sleep:settle#0" || v.Journal[4].Outcome != "ok" {
		t.Errorf("the view of the run completed: %+v %v", v, err)
	}
	rows, err := h.List(ctx)
	if err != nil || len(rows) != 1 || rows[0].RunID != id || rows[0].State != meshwire.RunCompleted {
		t.Errorf("the run list: %+v %v", rows, err)
	}
	if _, err := h.View(ctx, "run-none"); !errors.Is(err, runhost.ErrNoRun) {
		t.Errorf("the view of no run: %v", err)
	}
	status, err := m.Ledger("").RunStatus(ctx, id)
	if err != nil || status == nil || status.State != meshwire.RunCompleted || status.JournalHigh != 4 {
		t.Errorf("the status record: %+v %v", status, err)
	}
}

// TestRunTakenBack: a host that stops while its run waits on a checkpoint leaves the run
// running; the answer given meanwhile is recorded; a new host on the same directory takes the
// run back (and not the run that had completed), finds the answer, waits out only what is left
// of its sleep and completes, the checkpoint performed once.
func TestRunTakenBack(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	dir := t.TempDir()
	first := host(t, m, wire.NewLifecycleUID(), dir)
	done, err := first.Start(ctx, `log("at once")`, operatorAdmit)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := first.Wait(ctx, done); err != nil || st.State != meshwire.RunCompleted {
		t.Fatalf("a run that ends at once: %+v %v", st, err)
	}
	id, err := first.Start(ctx, approve, operatorAdmit)
	if err != nil {
		t.Fatal(err)
	}
	openCheckpoint(t, first, id, "/checkpoint:approve#0")
	if _, err := first.Answer(ctx, id, "/checkpoint:approve#0", json.RawMessage(`"yes"`), "ann"); err != nil {
		t.Fatal(err)
	}
	first.Close()

	second := host(t, m, wire.NewLifecycleUID(), dir)
	if err := second.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if _, taken := second.Status(done); taken {
		t.Error("a run that had completed was taken back")
	}
	st, err := second.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != meshwire.RunCompleted {
		t.Fatalf("the run taken back ended %+v", st)
	}
	rec, err := m.Ledger("").ReadJournal(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	pendings := map[string]int{}
	activations := 0
	for _, r := range rec.Records {
		if r.Kind == meshwire.JournalActivation {
			activations++
			continue
		}
		var e lang.Entry
		if err := json.Unmarshal(r.Entry, &e); err != nil {
			t.Fatal(err)
		}
		if e.State == lang.StatePending {
			pendings[e.Key()]++
		}
	}
	if activations != 2 || pendings["/checkpoint:approve#0"] != 1 {
		t.Errorf("%d activations, pending writes %v", activations, pendings)
	}
}

// TestRunTakenOverByAnotherNode: a node that serves the manager instance after the one that
// started a run died (a cluster's standby: the same instance, the next epoch, its own directory)
// takes the run back from the program recorded on the mesh and completes it; a run of another
// instance, whose program it does not keep, it leaves alone.
func TestRunTakenOverByAnotherNode(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	instance := wire.NewLifecycleUID()
	first := hostAt(t, m, instance, 1, t.TempDir())
	id, err := first.Start(ctx, approve, operatorAdmit)
	if err != nil {
		t.Fatal(err)
	}
	openCheckpoint(t, first, id, "/checkpoint:approve#0")
	other := host(t, m, wire.NewLifecycleUID(), t.TempDir())
	theirs, err := other.Start(ctx, approve, operatorAdmit)
	if err != nil {
		t.Fatal(err)
	}
	openCheckpoint(t, other, theirs, "/checkpoint:approve#0")
	first.Close()

	standby := hostAt(t, m, instance, 2, t.TempDir())
	if err := standby.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if _, taken := standby.Status(theirs); taken {
		t.Error("the standby took another instance's run")
	}
	openCheckpoint(t, standby, id, "/checkpoint:approve#0")
	if _, err := standby.Answer(ctx, id, "/checkpoint:approve#0", json.RawMessage(`"yes"`), "ann"); err != nil {
		t.Fatal(err)
	}
	if st, err := standby.Wait(ctx, id); err != nil || st.State != meshwire.RunCompleted {
		t.Fatalf("the run taken over: %+v %v", st, err)
	}
}

// TestRunHeldThenTampered: a step this host cannot perform (a spawn, on a host that serves no seats) holds the run
// (released, the step settled refused L5016) rather than failing it. A journal whose settled
// result was edited on the stream is refused when the run is taken back (L5024), and nothing is
// activated over it.
func TestRunHeldThenTampered(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	h := host(t, m, wire.NewLifecycleUID(), t.TempDir())
	id, err := h.Start(ctx, "await sleep(\"10ms\", { name: \"first\" })\nconst a = await spawn(\"coder\")\nlog(a)", operatorAdmit)
	if err != nil {
		t.Fatal(err)
	}
	st, err := h.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != meshwire.RunReleased || !strings.Contains(st.Error, "L5025") {
		t.Fatalf("the held run: %+v", st)
	}
	v, err := h.View(ctx, id)
	if err != nil || len(v.Journal) != 5 || v.Journal[4].Step != "/spawn:coder#0" || v.Journal[4].State != lang.StateSettled || !strings.HasPrefix(v.Journal[4].Outcome, "refused (L5016: spawn is not durable on this host") {
		t.Fatalf("the held run's journal: %+v %v", v, err)
	}

	// Rewrite the journal with the sleep's settled result edited, as a store user could.
	rec, err := m.Ledger("").ReadJournal(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	store := m.StoreClient(t)
	stream, err := store.JS.Stream(ctx, meshwire.WFJStream(m.Space))
	if err != nil {
		t.Fatal(err)
	}
	subject := meshwire.WFJSubject(m.Space, id)
	if err := stream.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		t.Fatal(err)
	}
	for _, r := range rec.Records {
		fields := map[string]any{"v": r.V, "kind": r.Kind, "run": r.Run, "n": r.N, "at": r.At}
		if r.Kind == meshwire.JournalActivation {
			fields["holder"], fields["fencingToken"], fields["epoch"], fields["replayedTo"] = r.Holder, r.FencingToken, r.Epoch, r.ReplayedTo
		} else {
			fields["entry"] = r.Entry
			if strings.Contains(string(r.Entry), `"state":"settled"`) && strings.Contains(string(r.Entry), `"name":"first"`) {
				var e map[string]any
				json.Unmarshal(r.Entry, &e)
				e["result"] = json.RawMessage(`{"n":1e400}`)
				fields["entry"] = e
			}
		}
		data, _ := json.Marshal(fields)
		if _, err := store.JS.Publish(ctx, subject, data); err != nil {
			t.Fatal(err)
		}
	}
	err = h.Resume(ctx, id, "")
	if err == nil || !strings.Contains(err.Error(), "L5024") {
		t.Fatalf("a tampered journal was taken: %v", err)
	}
	after, err := m.Ledger("").ReadJournal(ctx, id)
	if err != nil || len(after.Records) != len(rec.Records) {
		t.Errorf("the refused takeover wrote to the journal: %d records, %v", len(after.Records), err)
	}
}

// TestWaitUntilTakenBack: a waitUntil counts its deadline from its step's recorded start, so a
// run taken back mid-wait gives up when the first host would have.
func TestWaitUntilTakenBack(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	dir := t.TempDir()
	first := host(t, m, wire.NewLifecycleUID(), dir)
	id, err := first.Start(ctx, `await waitUntil(async () => null, { name: "poll", every: "100ms", deadline: "1s" })`, operatorAdmit)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	first.Close()
	second := host(t, m, wire.NewLifecycleUID(), dir)
	if err := second.Resume(ctx, id, ""); err != nil {
		t.Fatal(err)
	}
	st, err := second.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != meshwire.RunFailed || !strings.Contains(st.Error, "L4023") {
		t.Fatalf("the wait taken back ended %+v", st)
	}
	rec, err := m.Ledger("").ReadJournal(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var writes []lang.Entry
	for _, r := range rec.Records {
		var e lang.Entry
		if r.Kind == meshwire.JournalStep && json.Unmarshal(r.Entry, &e) == nil && e.Kind == "waitUntil" {
			writes = append(writes, e)
		}
	}
	// Each observation rewrites the pending entry; every write, after the takeover too, keeps
	// the start the first host recorded.
	for i, w := range writes {
		if w.StartedAt != writes[0].StartedAt {
			t.Errorf("write %d of the waitUntil starts at %d, not the recorded %d", i, w.StartedAt, writes[0].StartedAt)
		}
	}
	if last := writes[len(writes)-1]; last.State != lang.StateSettled || last.Error == nil || last.Error.Code != "L4023" {
		t.Errorf("the waitUntil settled %+v", last)
	}
}

// TestForkAndMigrate: an operator reads a completed run back, forks it before its checkpoint
// into a new run whose journal is the parent's prefix and whose record names its lineage, and a
// host takes the child and asks the checkpoint again; a migration onto an edited step is
// rejected with the step named.
func TestForkAndMigrate(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	dir := t.TempDir()
	h := host(t, m, wire.NewLifecycleUID(), dir)
	src := "await sleep(\"10ms\", { name: \"a\" })\nconst ok = await checkpoint(\"go\", \"Go?\")\nawait sleep(\"10ms\", { name: \"b\" })"
	id, err := h.Start(ctx, src, operatorAdmit)
	if err != nil {
		t.Fatal(err)
	}
	openCheckpoint(t, h, id, "/checkpoint:go#0")
	if _, err := h.Answer(ctx, id, "/checkpoint:go#0", json.RawMessage(`1`), "ann"); err != nil {
		t.Fatal(err)
	}
	if st, err := h.Wait(ctx, id); err != nil || st.State != meshwire.RunCompleted {
		t.Fatalf("the parent: %+v %v", st, err)
	}
	op := h.Operator()
	parent, err := op.Recorded(ctx, id)
	if err != nil || len(parent.Entries) != 6 || parent.Pins.Seed != id {
		t.Fatalf("the parent read back: %d writes, %+v, %v", len(parent.Entries), parent.Pins, err)
	}
	mig, err := lang.Migrate(ctx, strings.Replace(src, `"10ms", { name: "a" }`, `"20ms", { name: "a" }`, 1), parent, lang.MigrateOptions{})
	if err != nil || mig.Accepted || len(mig.Rejections) != 1 || mig.Rejections[0].Step != "/sleep:a#0" {
		t.Errorf("a migration onto an edited sleep: %+v %v", mig, err)
	}

	child, err := op.Fork(ctx, src, parent, "/checkpoint:go#0")
	if err != nil {
		t.Fatal(err)
	}
	if err := runhost.WriteProgram(dir, child, src); err != nil {
		t.Fatal(err)
	}
	if err := h.Resume(ctx, child, ""); err != nil {
		t.Fatal(err)
	}
	openCheckpoint(t, h, child, "/checkpoint:go#0")
	v, err := h.View(ctx, child)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := meshwire.ParseRunSpec(v.Spec)
	if err != nil || spec.ForkedFrom == nil || spec.ForkedFrom.Run != id || spec.ForkedFrom.Step != "/checkpoint:go#0" || spec.Pins.Seed != id {
		t.Errorf("the child's record: %+v %v", spec, err)
	}
	if v.Journal[1].Step != "/sleep:a#0" || v.Journal[1].Outcome != "ok" || v.Journal[0].Holder != "fork" {
		t.Errorf("the child's journal: %+v", v.Journal)
	}
}

// seatsOnHand are seats that spawn nothing and yield every turn done at once, keeping the
// payloads they were handed: the manager's side, for the run host's own tests.
type seatsOnHand struct {
	mu       sync.Mutex
	payloads map[string][]runhost.TurnPayload
	// answer, when set, gives the value a seat answers an ask's attempt with (nil: none), as
	// the agent asked would, through the host, before it yields.
	answer func(ask *runhost.TurnAsk) json.RawMessage
	host   *runhost.Host
	// addressed are, for each turn with a host, the addressee its step's journal row names.
	addressed []string
	// yield, when set, is how a seat yields the turn of payload p (nil: done).
	yield func(p runhost.TurnPayload) *runhost.SeatYield
	// takes is how long each turn takes; inTurn and most count the turns each seat takes at
	// once, and the most it ever took.
	takes  time.Duration
	inTurn map[string]int
	most   int
	// spawned are the seats asked for, in order.
	spawned []runhost.SeatSpec
	// told are the conclaves each seat was told it is in, by name; ended the turns withdrawn.
	told  map[string][][]string
	ended []string
	// hold, when set, keeps each turn of a step it names until the step is cut.
	hold func(step string) bool
}

// addresseeOf reads the addressee of p's step off the run's journal, as its turn runs.
func (s *seatsOnHand) addresseeOf(p runhost.TurnPayload) string {
	if s.host == nil {
		return ""
	}
	v, err := s.host.View(context.Background(), p.Run)
	if err != nil {
		return err.Error()
	}
	for _, r := range slices.Backward(v.Journal) {
		if r.Step == p.Step {
			return r.Addressee
		}
	}
	return "no row"
}

func (s *seatsOnHand) Spawn(_ context.Context, sp runhost.SeatSpec) (wire.Principal, error) {
	s.mu.Lock()
	s.spawned = append(s.spawned, sp)
	s.mu.Unlock()
	return wire.NewPrincipal(wire.DevOwner, sp.Name)
}

func (s *seatsOnHand) Conclaves(name string, channels []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.told == nil {
		s.told = map[string][][]string{}
	}
	s.told[name] = append(s.told[name], channels)
	return nil
}

func (s *seatsOnHand) EndTurn(name, goalID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = append(s.ended, name+" "+goalID)
}

// name is the principal of the seat spawned from persona, once it was.
func (s *seatsOnHand) name(persona string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range s.payloads {
		if strings.HasPrefix(name, persona+"_") {
			return string(wire.DevOwner) + "." + name
		}
	}
	return ""
}

func (s *seatsOnHand) Turn(ctx context.Context, name, _, payload string, _ time.Time) (runhost.SeatYield, error) {
	var p runhost.TurnPayload
	if err := json.Unmarshal([]byte(payload), &p); err != nil {
		return runhost.SeatYield{}, err
	}
	s.mu.Lock()
	s.payloads[name] = append(s.payloads[name], p)
	s.addressed = append(s.addressed, s.addresseeOf(p))
	if s.inTurn == nil {
		s.inTurn = map[string]int{}
	}
	s.inTurn[name]++
	s.most = max(s.most, s.inTurn[name])
	s.mu.Unlock()
	time.Sleep(s.takes)
	if s.hold != nil && s.hold(p.Step) {
		<-ctx.Done()
		s.mu.Lock()
		s.inTurn[name]--
		s.mu.Unlock()
		return runhost.SeatYield{}, ctx.Err()
	}
	defer func() {
		s.mu.Lock()
		s.inTurn[name]--
		s.mu.Unlock()
	}()
	if s.yield != nil {
		if y := s.yield(p); y != nil {
			return *y, nil
		}
	}
	if p.Ask != nil && s.answer != nil {
		if v := s.answer(p.Ask); v != nil {
			if _, err := s.host.Answer(context.Background(), p.Run, p.Step, v, string(wire.DevOwner)+"."+name); err != nil {
				return runhost.SeatYield{}, err
			}
		}
	}
	return runhost.SeatYield{Status: "done", At: time.Now().UnixMilli()}, nil
}

// TestAskOnTheMesh: an ask is a turn whose seat answers the step with a record; a reply that
// does not conform to the schema costs an attempt and the next attempt is a turn of its own,
// one that never conforms fails the step (L4006), an unreadable schema is L4022, and a yield
// with no answer counts as a reply that does not conform.
func TestAskOnTheMesh(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	h := host(t, m, wire.NewLifecycleUID(), t.TempDir())
	seats := &seatsOnHand{payloads: map[string][]runhost.TurnPayload{}, host: h}
	seats.answer = func(ask *runhost.TurnAsk) json.RawMessage {
		switch {
		case string(ask.Schema) == `{"days":"number"}` && ask.Attempt == 1:
			return json.RawMessage(`{"days":"two"}`)
		case string(ask.Schema) == `{"days":"number"}`:
			return json.RawMessage(`{"days":2,"why":"tests"}`)
		case string(ask.Schema) == `{"ok":"boolean"}`:
			return json.RawMessage(`"yes"`)
		}
		return nil
	}
	h.SetSeats(seats)
	id, err := h.Start(ctx, `const a = await spawn("builder")
const r = await ask(a, { name: "estimate", schema: { days: "number" }, attempts: 2 })
assert(r.days === 2 && r.why === "tests", "the second reply is the step's value")
const codes = []
async function failure(f) {
  try {
    await f()
  } catch (e) {
    codes.push(e.code)
  }
}
await failure(async () => await ask(a, { name: "sure", schema: { ok: "boolean" } }))
await failure(async () => await ask(a, { name: "silent", schema: { n: "number" } }))
await failure(async () => await ask(a, { name: "odd", schema: { n: "integer" } }))
assert(codes.join(",") === "L4006,L4006,L4022", "the failures: " + codes.join(","))`, operatorAdmit)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := h.Wait(ctx, id); err != nil || st.State != meshwire.RunCompleted {
		t.Fatalf("%+v %v", st, err)
	}
	var asks []int
	for _, ps := range seats.payloads {
		for _, p := range ps {
			if p.Ask != nil {
				asks = append(asks, p.Ask.Attempt)
			}
		}
	}
	if fmt.Sprint(asks) != "[1 2 1 1]" {
		t.Errorf("the asks' turns were attempts %v, want one turn per attempt and none for an unreadable schema", asks)
	}
	for _, a := range seats.addressed {
		if !strings.HasPrefix(a, string(wire.DevOwner)+".builder_") {
			t.Errorf("an open ask's journal row names addressee %q, want the builder", a)
		}
	}
}

// TestTurnsOfOneAgentTakeTheirTurn: two branches turning one agent at once are served one
// after the other, never two turns at once; a handoff to an agent the run did not spawn fails
// the turn (L4005), one to an agent it did is a yield like any other.
func TestTurnsOfOneAgentTakeTheirTurn(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	h := host(t, m, wire.NewLifecycleUID(), t.TempDir())
	seats := &seatsOnHand{payloads: map[string][]runhost.TurnPayload{}, takes: 100 * time.Millisecond}
	seats.yield = func(p runhost.TurnPayload) *runhost.SeatYield {
		switch p.Step {
		case "/turn:away#0":
			return &runhost.SeatYield{Status: "handoff", To: "stranger", At: 1}
		case "/turn:hand#0":
			return &runhost.SeatYield{Status: "handoff", To: seats.name("builder"), At: 1}
		}
		return nil
	}
	h.SetSeats(seats)
	id, err := h.Start(ctx, `const a = await spawn("builder")
const b = await spawn("reviewer")
const both = await parallel({ one: () => turn(a, { name: "one" }), two: () => turn(a, { name: "two" }), three: () => turn(b, { name: "three" }) }, { name: "both" })
assert(both.one.status === "done" && both.two.status === "done", "both turns were taken")
let code = ""
try {
  await turn(b, { name: "away" })
} catch (e) {
  code = e.code
}
assert(code === "L4005", "a handoff outside the run: " + code)
const handed = await turn(b, { name: "hand" })
assert(handed.status === "handoff" && handed.to === a.agent, "a handoff within the run: " + json.stringify(handed))`, operatorAdmit)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := h.Wait(ctx, id); err != nil || st.State != meshwire.RunCompleted {
		v, _ := h.View(ctx, id)
		t.Fatalf("%+v %v\n%+v", st, err, v.Journal)
	}
	if seats.most != 1 {
		t.Errorf("a seat took %d turns at once", seats.most)
	}
}

// TestCutBranchesLetGo: a turn whose branch loses a race is withdrawn from its agent, and a
// conclave whose body loses one is released at once (its member told it is in none); a handle
// the program made up, naming an agent the run did not spawn, reaches no one.
func TestCutBranchesLetGo(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	h := host(t, m, wire.NewLifecycleUID(), t.TempDir())
	seats := &seatsOnHand{payloads: map[string][]runhost.TurnPayload{}, hold: func(step string) bool { return strings.Contains(step, "turn:slow") }}
	h.SetSeats(seats)
	id, err := h.Start(ctx, `const a = await spawn("builder")
await race({ slow: () => turn(a, { name: "slow" }), quick: () => sleep("50ms", { name: "quick" }) }, { name: "turning" })
await race({ room: () => conclave([a], async (ch) => await sleep("1h", { name: "long" }), { name: "room" }), quick: () => sleep("50ms", { name: "quick" }) }, { name: "talking" })
let forged = ""
try {
  await turn({ agent: "dev.carol", persona: "builder" }, { name: "forged" })
} catch (e) {
  forged = e.message
}
assert(contains(forged, "no agent this run spawned"), "a made-up handle: " + forged)`, operatorAdmit)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := h.Wait(ctx, id); err != nil || st.State != meshwire.RunCompleted {
		v, _ := h.View(ctx, id)
		t.Fatalf("%+v %v\n%+v", st, err, v.Journal)
	}
	seats.mu.Lock()
	defer seats.mu.Unlock()
	if len(seats.ended) != 1 || !strings.HasPrefix(seats.ended[0], seats.spawned[0].Name+" ") {
		t.Errorf("the turns withdrawn: %q", seats.ended)
	}
	if got := fmt.Sprint(seats.told[seats.spawned[0].Name]); got != fmt.Sprintf("[[%s] []]", runhost.ConclaveChannel(id)) {
		t.Errorf("the builder was told it is in %s", got)
	}
	if _, ok := seats.payloads["carol"]; ok {
		t.Error("a made-up handle reached carol")
	}
}

// TestSpawnOptions: what a spawn step sets over its persona (its model, role and the channels
// it joins) reaches the seat the manager starts, and rides the handle and the step's record;
// an option this host cannot honour (a worktree, a placement on another manager) holds the
// run (L5016) rather than run without it.
func TestSpawnOptions(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	h := host(t, m, wire.NewLifecycleUID(), t.TempDir())
	seats := &seatsOnHand{payloads: map[string][]runhost.TurnPayload{}}
	h.SetSeats(seats)
	id, err := h.Start(ctx, `const a = await spawn({ persona: "builder", model: "m-2" }, { name: "lead", role: "dev", join: ["team.backend", channel("team.web")] })
assert(a.role === "dev" && a.persona === "builder", "the handle: " + json.stringify(a))
await spawn("builder", { name: "isolated", worktree: "wt-1" })`, operatorAdmit)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := h.Wait(ctx, id); err != nil || st.State != meshwire.RunReleased {
		t.Fatalf("%+v %v", st, err)
	}
	v, err := h.View(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if last := v.Journal[len(v.Journal)-1]; last.Step != "/spawn:isolated#0" || !strings.Contains(last.Outcome, "L5016: spawn: worktree is not available on this host") {
		t.Errorf("the worktree spawn's record: %+v", last)
	}
	if len(seats.spawned) != 1 {
		t.Fatalf("the seats asked for: %+v, want one", seats.spawned)
	}
	want := runhost.SeatSpec{Name: seats.spawned[0].Name, Persona: "builder", Model: "m-2", Role: "dev", Join: []string{"team.backend", "team.web"}, Channels: []string{runhost.ConclaveChannel(id)}}
	if !reflect.DeepEqual(seats.spawned[0], want) {
		t.Errorf("the seats asked for: %+v, want %+v", seats.spawned, want)
	}
	placed, err := h.Start(ctx, `await spawn("builder", { placement: { endpoint: "manager", instanceId: "elsewhere" } })`, operatorAdmit)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := h.Wait(ctx, placed); err != nil || st.State != meshwire.RunReleased || !strings.Contains(st.Error, "not this host's manager") {
		t.Errorf("a placement elsewhere: %+v %v", st, err)
	}
}

// TestNoticesRideTheNextTurn: notify writes a notice for each addressee onto the run; the
// addressee's next turn carries it, and the one after does not.
func TestNoticesRideTheNextTurn(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	h := host(t, m, wire.NewLifecycleUID(), t.TempDir())
	seats := &seatsOnHand{payloads: map[string][]runhost.TurnPayload{}}
	h.SetSeats(seats)
	id, err := h.Start(ctx, `const a = await spawn("builder")
const b = await spawn("reviewer")
await notify([a, b], { decision: "scope", outcome: "narrowed" })
await turn(a, { name: "build" })
await turn(a, { name: "build-again" })`, operatorAdmit)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := h.Wait(ctx, id); err != nil || st.State != meshwire.RunCompleted {
		t.Fatalf("%+v %v", st, err)
	}
	var builder []runhost.TurnPayload
	for name, ps := range seats.payloads {
		if strings.HasPrefix(name, "builder_") {
			builder = ps
		}
	}
	if len(builder) != 2 || len(builder[0].Notices) != 1 || builder[0].Notices[0].Step != "/notify#0" ||
		string(builder[0].Notices[0].Fact) != `{"decision":"scope","outcome":"narrowed"}` || len(builder[1].Notices) != 0 {
		t.Errorf("the builder's turns carried %+v", builder)
	}
}

// operatorAdmit admits a run as the operator's instrument admits one: every channel.
var operatorAdmit = runhost.OperatorAdmit(operatorCLI(), "a test")

// operatorCLI is the operator's instrument of the tests: local.cli, a lifecycle of its own.
func operatorCLI() wire.Lifecycle {
	p, err := wire.NewPrincipal(string(wire.DevOwner), "cli")
	if err != nil {
		panic(err)
	}
	return wire.Lifecycle{Principal: p, UID: wire.NewLifecycleUID()}
}
