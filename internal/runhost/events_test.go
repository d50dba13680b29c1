package runhost_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cotal "github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/runhost"
	"github.com/gocotal/cotal/wire"
)

// liveSeats spawn each seat as a real agent on the mesh, connected through the SDK with its
// own credential (it may post on general), so a test can make it speak and stop it.
type liveSeats struct {
	t      *testing.T
	m      *meshtest.Mesh
	mu     sync.Mutex
	c      map[string]*cotal.Client // by persona
	byName map[string]*cotal.Client
	member map[string]*runhost.Membership // by name
	told   map[string][][]string          // the conclaves each seat was told, by name
}

func (s *liveSeats) Spawn(ctx context.Context, sp runhost.SeatSpec) (wire.Principal, error) {
	name, persona, channels := sp.Name, sp.Persona, sp.Channels
	cred := s.m.AgentCred(s.t, ledger.Request{Name: name, Subscribe: []string{"general"},
		AllowSubscribe: append([]string{"general"}, channels...), AllowPublish: append([]string{"general"}, channels...)})
	c, err := cotal.Connect(ctx, s.m.URL(), cotal.WithCredsData(cred.Creds))
	if err != nil {
		return wire.Principal{}, err
	}
	if _, err := c.Join(ctx, "general"); err != nil {
		return wire.Principal{}, err
	}
	s.mu.Lock()
	s.c[persona] = c
	if s.byName == nil {
		s.byName, s.member, s.told = map[string]*cotal.Client{}, map[string]*runhost.Membership{}, map[string][][]string{}
	}
	s.byName[name], s.member[name] = c, &runhost.Membership{}
	s.mu.Unlock()
	return c.Principal(), nil
}

func (s *liveSeats) EndTurn(string, string) {}

// Conclaves joins the seat's client to its conclaves, as its own server would.
func (s *liveSeats) Conclaves(name string, channels []string) error {
	s.mu.Lock()
	c, ms := s.byName[name], s.member[name]
	s.told[name] = append(s.told[name], channels)
	s.mu.Unlock()
	if c == nil {
		return runhost.ErrSeatGone
	}
	return ms.Sync(s.t.Context(), c, channels)
}

func (s *liveSeats) Turn(context.Context, string, string, string, time.Time) (runhost.SeatYield, error) {
	return runhost.SeatYield{Status: "done", At: time.Now().UnixMilli()}, nil
}

func (s *liveSeats) client(persona string) *cotal.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c[persona]
}

// awaitPending waits until run id's journal holds step pending: the step has started.
func awaitPending(t *testing.T, h *runhost.Host, id, step string) {
	t.Helper()
	var v *runhost.View
	defer func() {
		if t.Failed() && v != nil {
			t.Logf("the journal: %+v", v.Journal)
		}
	}()
	meshtest.Eventually(t, 20*time.Second, step+" to start", func() bool {
		if st, _ := h.Status(id); st.State == meshwire.RunFailed || st.State == meshwire.RunCompleted {
			t.Fatalf("the run ended %s before %s started: %s", st.State, step, st.Error)
		}
		var err error
		if v, err = h.View(t.Context(), id); err != nil {
			return false
		}
		for _, r := range v.Journal {
			if r.Step == step && r.State == "pending" {
				return true
			}
		}
		return false
	})
}

// TestWaitOnTheMesh: wait observes its event on the mesh from its step's start: a message on
// a channel from one sender carrying some text (an earlier one that does not match is passed
// over), an agent's reply, a channel gone quiet, a monitored agent going down (its graceful
// close), and null when the timeout comes first. A wait on down of an agent the run does not
// monitor fails.
func TestWaitOnTheMesh(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	h := host(t, m, wire.NewLifecycleUID(), t.TempDir())
	seats := &liveSeats{t: t, m: m, c: map[string]*cotal.Client{}}
	h.SetSeats(seats)
	id, err := h.Start(ctx, `const a = await spawn("alice")
const b = await spawn("bob")
await monitor(b)
const said = await wait(message("general", { from: a.agent, matches: "ship" }), { timeout: "30s" })
assert(said.text === "ship it" && said.from === a.agent && said.channel === "general", "the message: " + json.stringify(said))
const reply = await wait(replied(b), { timeout: "30s" })
assert(reply.text === "done" && reply.from === b.agent, "the reply: " + json.stringify(reply))
const quiet = await wait(idle("general", "300ms"), { timeout: "30s" })
assert(quiet.channel === "general", "the quiet: " + json.stringify(quiet))
const none = await wait(message("general"), { timeout: "300ms" })
assert(none === null, "the timeout: " + json.stringify(none))
let refused = ""
try {
  await wait(down(a), { timeout: "30s" })
} catch (e) {
  refused = e.message
}
assert(contains(refused, "does not monitor"), "an unmonitored down: " + refused)
const gone = await wait(down(b), { timeout: "30s" })
assert(gone.agent === b.agent && gone.reason === "offline", "the down: " + json.stringify(gone))`, operatorAdmit)
	if err != nil {
		t.Fatal(err)
	}
	post := func(persona, text string) {
		t.Helper()
		if _, err := seats.client(persona).Post(ctx, "general", []wire.Part{wire.TextPart(text)}); err != nil {
			t.Fatal(err)
		}
	}
	awaitPending(t, h, id, "/wait#0")
	post("bob", "ship it, says bob")
	post("alice", "not this one")
	// The reply bob gives next is observed from the second wait's start, which is after this
	// (a step's start is kept to the millisecond).
	time.Sleep(20 * time.Millisecond)
	post("alice", "ship it")
	awaitPending(t, h, id, "/wait#1")
	post("bob", "done")
	awaitPending(t, h, id, "/wait#5")
	if err := seats.client("bob").Close(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := h.Wait(ctx, id)
	if err != nil || st.State != meshwire.RunCompleted {
		v, _ := h.View(ctx, id)
		t.Fatalf("%+v %v\n%+v", st, err, v.Journal)
	}
	if err := seats.client("alice").Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestWaitTakenBack: a message that lands while the run's host is down is the one the wait,
// taken back by the next host, resolves with: it observes from its step's recorded start.
func TestWaitTakenBack(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	dir := t.TempDir()
	first := host(t, m, wire.NewLifecycleUID(), dir)
	id, err := first.Start(ctx, `const go = await wait(message("general", { matches: "go" }), { name: "go", timeout: "1m" })
assert(go.text === "go ahead", "the message: " + json.stringify(go))`, operatorAdmit)
	if err != nil {
		t.Fatal(err)
	}
	awaitPending(t, first, id, "/wait:go#0")
	first.Close()
	cred := m.AgentCred(t, ledger.Request{Name: "poster", AllowPublish: []string{"general"}})
	poster, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(cred.Creds), cotal.WithPresence(false))
	if err != nil {
		t.Fatal(err)
	}
	defer poster.Close(context.WithoutCancel(ctx))
	if _, err := poster.Post(ctx, "general", []wire.Part{wire.TextPart("go ahead")}); err != nil {
		t.Fatal(err)
	}
	second := host(t, m, wire.NewLifecycleUID(), dir)
	if err := second.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := second.Wait(ctx, id); err != nil || st.State != meshwire.RunCompleted {
		t.Fatalf("%+v %v", st, err)
	}
}

// TestConclaveOnTheMesh: a conclave opens the run's own conclave channel, which every seat the
// run spawned may read and post on; its members are told of it (and join it), what one says
// there the body hears, and once the body returns they are told they left it (and leave). A
// conclave that names a channel opens that one.
func TestConclaveOnTheMesh(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	h := host(t, m, wire.NewLifecycleUID(), t.TempDir())
	seats := &liveSeats{t: t, m: m, c: map[string]*cotal.Client{}}
	h.SetSeats(seats)
	id, err := h.Start(ctx, `const a = await spawn("alice")
const b = await spawn("bob")
const heard = await conclave([a, b], async (ch) => await wait(message(ch, { from: a.agent }), { name: "heard", timeout: "30s" }), { name: "room" })
assert(heard.text === "in the room" && startsWith(heard.channel, "conclave."), "what the body heard: " + json.stringify(heard))
const named = await conclave([b], async (ch) => ch.channel, { name: "named", channel: "general" })
assert(named === "general", "the named conclave's channel: " + named)`, operatorAdmit)
	if err != nil {
		t.Fatal(err)
	}
	channel := runhost.ConclaveChannel(id)
	awaitPending(t, h, id, "/conclave:room#0/b:in/wait:heard#0")
	for _, persona := range []string{"alice", "bob"} {
		if got := seats.client(persona).Channels(); !slices.Contains(got, channel) {
			t.Fatalf("%s's channels: %q, want %s among them", persona, got, channel)
		}
	}
	if _, err := seats.client("alice").Post(ctx, channel, []wire.Part{wire.TextPart("in the room")}); err != nil {
		t.Fatal(err)
	}
	if st, err := h.Wait(ctx, id); err != nil || st.State != meshwire.RunCompleted {
		v, _ := h.View(ctx, id)
		t.Fatalf("%+v %v\n%+v", st, err, v.Journal)
	}
	for _, persona := range []string{"alice", "bob"} {
		if got := seats.client(persona).Channels(); slices.Contains(got, channel) {
			t.Errorf("%s is still in the conclave: %q", persona, got)
		}
	}
	if got := seats.client("bob").Channels(); !slices.Contains(got, "general") {
		t.Errorf("bob left general, which it joined on its own: %q", got)
	}
	seats.mu.Lock()
	defer seats.mu.Unlock()
	want := map[string]string{"alice": fmt.Sprintf("[[%s] []]", channel), "bob": fmt.Sprintf("[[%s] [] [general] []]", channel)}
	for name, told := range seats.told {
		persona, _, _ := strings.Cut(name, "_")
		if got := fmt.Sprint(told); got != want[persona] {
			t.Errorf("%s was told %s, want %s", name, got, want[persona])
		}
	}
}

// TestRunConfinedToItsAdmission: a run waits only on what its caller may read: a channel the
// admission's ceiling does not cover is refused (a failure the program catches), one it does is
// observed, and a reply, which reads the agent on every channel, is refused to a caller who may
// read only some.
func TestRunConfinedToItsAdmission(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	h := host(t, m, wire.NewLifecycleUID(), t.TempDir())
	h.SetSeats(&seatsOnHand{payloads: map[string][]runhost.TurnPayload{}})
	caller, err := wire.NewPrincipal(string(wire.DevOwner), "carol")
	if err != nil {
		t.Fatal(err)
	}
	ceiling, err := meshwire.GrantCeiling(m.Space, caller, nil, []string{"team.*"})
	if err != nil {
		t.Fatal(err)
	}
	admit := runhost.Admit{Caller: meshwire.Caller{Owner: caller.Owner(), Actor: caller.Actor(), UID: string(wire.NewLifecycleUID())}, Ceiling: ceiling,
		Provenance: meshwire.Provenance{Kind: meshwire.ProvenanceOperator, By: "manager/test", Reason: "carol's credential"}}
	id, err := h.Start(ctx, `const a = await spawn("builder")
const refused = []
async function denied(f) {
  try {
    await f()
  } catch (e) {
    refused.push(e.code + " " + (contains(e.message, "permission denied") ? "denied" : e.message))
  }
}
await denied(async () => await wait(message("general"), { name: "general", timeout: "5s" }))
await denied(async () => await wait(replied(a), { name: "reply", timeout: "5s" }))
await denied(async () => await wait(idle("general", "10ms"), { name: "quiet", timeout: "5s" }))
const none = await wait(message("team.backend"), { name: "team", timeout: "200ms" })
assert(none === null, "a channel the caller reads is observed")
assert(refused.join(",") === "L4000 denied,L4000 denied,L4000 denied", "the refusals: " + refused.join(","))`, admit)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := h.Wait(ctx, id); err != nil || st.State != meshwire.RunCompleted {
		t.Fatalf("%+v %v", st, err)
	}
}

// TestRevokedRun: a revoked run is stopped by its host, wherever it waits, and recorded failed
// as revoked; no host takes a revoked run back; revoking it again keeps the first marker; and
// the operator reads its admission.
func TestRevokedRun(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	h := host(t, m, wire.NewLifecycleUID(), t.TempDir())
	id, err := h.Start(ctx, `await checkpoint("approve", "Ship it?", { timeout: "1h" })`, operatorAdmit)
	if err != nil {
		t.Fatal(err)
	}
	openCheckpoint(t, h, id, "/checkpoint:approve#0")
	op := h.Operator()
	if err := op.Revoke(ctx, id, "ann", "the release was pulled"); err != nil {
		t.Fatal(err)
	}
	if err := op.Revoke(ctx, id, "bob", "again"); err != nil {
		t.Fatalf("revoking again: %v", err)
	}
	st, err := h.Wait(ctx, id)
	if err != nil || st.State != meshwire.RunFailed || !strings.Contains(st.Error, "revoked by ann: the release was pulled") {
		t.Fatalf("the revoked run: %+v %v", st, err)
	}
	if err := h.Resume(ctx, id, ""); !errors.Is(err, runhost.ErrEnded) {
		t.Errorf("a resume of a run that ended revoked: %v", err)
	}
	// A held run (its spawn beyond this host, which serves no seats) revoked before a resume.
	held, err := h.Start(ctx, `await spawn("builder")`, operatorAdmit)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := h.Wait(ctx, held); err != nil || st.State != meshwire.RunReleased {
		t.Fatalf("the held run: %+v %v", st, err)
	}
	if err := op.Revoke(ctx, held, "ann", "not this one"); err != nil {
		t.Fatal(err)
	}
	if err := h.Resume(ctx, held, ""); !errors.Is(err, runhost.ErrRevoked) || !strings.Contains(err.Error(), "not this one") {
		t.Errorf("a resume of a revoked run: %v", err)
	}
	a, err := op.Admission(ctx, id)
	if err != nil || a.Provenance.Reason != "a test" || a.Ceiling.Subscribe.Allow.Mode != meshwire.AllowAll {
		t.Errorf("the run's admission: %+v %v", a, err)
	}
}
