package manager_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/anchor"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/sessionrail"
	"github.com/gocotal/cotal/wire"
)

// serveSessions serves f's supervisor with sessions established through the mesh's ledger.
func (f *fixture) serveSessions(t *testing.T, maxSessions int, edits ...func(*manager.ServiceConfig)) *served {
	t.Helper()
	l := f.m.Ledger("")
	instance := wire.NewLifecycleUID()
	h, epoch, err := l.HoldServing(t.Context(), wire.ManagerEndpoint, "cotal_manager", instance, manager.Commands(), time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := manager.ServiceConfig{
		Conn: h.Conn, Space: f.m.Space, Instance: instance, Epoch: epoch, Owner: wire.DevOwner, Readiness: time.Second,
		Sessions: l, MaxSessions: maxSessions,
		HostLaunch: func(ctx context.Context, caller wire.Lifecycle) bool { ok, _ := l.Instrument(ctx, caller); return ok },
	}
	for _, edit := range edits {
		edit(&cfg)
	}
	svc, err := f.sup.Serve(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := &served{svc: svc, held: h, instance: instance, epoch: epoch}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := svc.Stop(ctx); err != nil && !srv.fenced {
			t.Errorf("stop the manager service: %v", err)
		}
		_ = f.sup.Close(ctx)
		_ = h.Release()
	})
	return srv
}

// attached is one side of a session as a holder sees it: its credential, its connection, its
// caller rail and the frames that arrive on it.
type attached struct {
	t      *testing.T
	grant  *manager.SessionGrant
	holder wire.Lifecycle
	cred   *authority.Credential
	c      *meshtest.Client
	rail   *sessionrail.Rail
	frames <-chan *meshwire.AttachFrame
	screen bytes.Buffer
}

// attachTo asks for a session on name, redeems the holder's half through the ledger and opens
// the caller's rail.
func attachTo(t *testing.T, f *fixture, mc *manager.Client, records jetstream.KeyValue, name string) *attached {
	t.Helper()
	g, err := mc.Attach(t.Context(), records, name)
	if err != nil {
		t.Fatalf("attach %s: %v", name, err)
	}
	p, err := wire.ParsePrincipal(g.Holder.ID)
	if err != nil {
		t.Fatal(err)
	}
	a := &attached{t: t, grant: g, holder: wire.Lifecycle{Principal: p, UID: g.Holder.LifecycleUID}}
	if a.cred, err = f.m.Ledger("").SessionCaller(t.Context(), g.Raw, a.holder); err != nil {
		t.Fatalf("redeem session %s: %v", g.SessionID, err)
	}
	a.c = f.m.Connect(t, a.cred)
	a.rail, a.frames = meshtest.CallerRail(t, a.c.Conn, g, 200*time.Millisecond)
	return a
}

func (a *attached) send(f *meshwire.AttachFrame) {
	a.t.Helper()
	a.sendRaw(f.Encode())
}

func (a *attached) sendRaw(data json.RawMessage) {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(a.t.Context(), 15*time.Second)
	defer cancel()
	if _, err := a.rail.SendWait(ctx, data); err != nil {
		a.t.Fatal(err)
	}
}

// until reads frames until the screen holds want (returning nil) or an end frame arrives
// (returning it).
func (a *attached) until(want string) *meshwire.AttachFrame {
	a.t.Helper()
	deadline := time.After(15 * time.Second)
	for !strings.Contains(a.screen.String(), want) {
		select {
		case f := <-a.frames:
			switch f.Kind {
			case meshwire.AttachData:
				a.screen.Write(f.Data)
			case meshwire.AttachEnd:
				return f
			}
		case <-deadline:
			a.t.Fatalf("%q never appeared; the screen: %q", want, a.screen.String())
		}
	}
	return nil
}

// shellSession serves sessions, spawns an interactive shell and attaches to it as the operator,
// up to its first prompt.
func shellSession(t *testing.T) (*fixture, *served, *attached) {
	t.Helper()
	f := newFixture(t)
	s := f.serveSessions(t, 0)
	mc, records, _ := operator(t, f.m)
	if _, err := f.sup.Spawn(t.Context(), manager.Spec{Name: "shell", Command: []string{"sh", "-i"}, Env: []string{"PS1=prompt$ "}}); err != nil {
		t.Fatal(err)
	}
	a := attachTo(t, f, mc, records, "shell")
	a.send(&meshwire.AttachFrame{Kind: meshwire.AttachReady})
	if end := a.until("prompt$ "); end != nil {
		t.Fatalf("the session ended before the prompt: %+v", end)
	}
	return f, s, a
}

// TestAttachSession: a session on a shell shows its screen, carries keystrokes, survives a
// malformed frame, and ends with revocation: both halves refused by the broker, the row closed,
// a second redeem refused.
func TestAttachSession(t *testing.T) {
	t.Parallel()
	f, s, a := shellSession(t)
	ctx := t.Context()
	if a.grant.Serving.InstanceID != s.instance || !strings.Contains(a.grant.Subjects.In, ".eps.manager."+a.grant.SessionID+".") {
		t.Fatalf("grant = %+v", a.grant)
	}
	a.send(&meshwire.AttachFrame{Kind: meshwire.AttachResize, Cols: 100, Rows: 30})
	// A malformed terminal frame in a well-formed rail frame is dropped; the session goes on.
	a.sendRaw(json.RawMessage(`{"k":"data","b":"not base64!"}`))
	a.sendRaw(json.RawMessage(`{"k":"end","reason":"closed"}`))
	a.send(&meshwire.AttachFrame{Kind: meshwire.AttachData, Data: []byte("echo hi $((6*7)); stty size\r")})
	if end := a.until("30 100"); end != nil || !strings.Contains(a.screen.String(), "hi 42") {
		t.Fatalf("typed line: %q (end %+v)", a.screen.String(), end)
	}

	// The caller's half reaches only its own rails.
	for _, subject := range []string{a.grant.Subjects.Out, strings.Replace(a.grant.Subjects.In, a.grant.SessionID, meshwire.NewSessionID(), 1)} {
		if err := a.c.Publish(subject, (&meshwire.AttachFrame{Kind: meshwire.AttachReady}).Encode()); err != nil {
			t.Fatal(err)
		}
		if refused, err := a.c.Refused("Publish", subject); err != nil || !refused {
			t.Errorf("the caller's half published on %s: %v", subject, err)
		}
	}

	servingRow := func() *authstore.CredentialRow {
		rows, err := f.m.Ledger("").Credentials(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if strings.HasPrefix(r.CredentialID, a.grant.SessionID) && r.Profile == authority.ProfileSessionServing {
				return &r
			}
		}
		t.Fatal("the session has no serving credential row")
		return nil
	}
	if r := servingRow(); r.State != authstore.CredActive {
		t.Fatalf("the serving half is %s while the session runs", r.State)
	}
	servingCred, err := f.m.Ledger("").SessionServing(ctx, a.grant.SessionID, s.instance, s.epoch)
	if err != nil {
		t.Fatal(err)
	}

	// Detach: the rail's close ends the session for both.
	a.rail.Close()
	meshtest.Eventually(t, 15*time.Second, "the session row closed", func() bool {
		os, err := f.m.Ledger("").Session(ctx, a.grant.SessionID)
		return err == nil && os != nil && os.Row.State == authstore.SessionClosed && os.Row.Revoked.Caller && os.Row.Revoked.Serving
	})
	if r := servingRow(); r.State != authstore.CredRevoked {
		t.Fatalf("the serving half is %s after the close", r.State)
	}
	// The row records the halves revoked in the ledger; the broker's refusal follows the push
	// that comes right after.
	for half, cred := range map[string]*authority.Credential{"caller": a.cred, "serving": servingCred} {
		meshtest.Eventually(t, 10*time.Second, "the broker refusing the closed session's "+half+" half", func() bool {
			nc, err := dial.As(ctx, f.m.URL(), cred, nats.NoReconnect())
			if err == nil {
				nc.Close()
			}
			return err != nil
		})
	}
	if _, err := f.m.Ledger("").SessionCaller(ctx, a.grant.Raw, a.holder); !errors.Is(err, authstore.ErrConflict) {
		t.Fatalf("a second redeem of a closed session: %v", err)
	}
	// A grant with one byte changed is refused, for its signature, before any row is read.
	forged := bytes.Replace(a.grant.Raw, []byte(a.grant.SessionID), []byte(meshwire.NewSessionID()), 1)
	if _, err := f.m.Ledger("").SessionCaller(ctx, forged, a.holder); codeOf(err) != wire.CodePermissionDenied {
		t.Fatalf("a forged grant: %v, want permission-denied", err)
	}
	if st, ok := f.sup.Lookup("shell"); !ok || st.State != manager.StateRunning {
		t.Fatalf("detaching touched the agent: %+v", st)
	}
}

// TestSessionEnds: a session ends with process-exit when the agent's process ends and with
// target-despawn on a despawn; input types without a session; the ceiling refuses one session
// too many, naming --max-sessions.
func TestSessionEnds(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *manager.Config) { c.MaxRestarts = -1 })
	s := f.serveSessions(t, 1)
	mc, records, _ := operator(t, f.m)
	ctx := t.Context()
	for _, name := range []string{"one", "two"} {
		if _, err := f.sup.Spawn(ctx, manager.Spec{Name: name, Command: []string{"sh", "-i"}, Env: []string{"PS1=" + name + "$ "}}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := mc.Input(ctx, records, "one", "echo from-input", true)
	if err != nil || n != len("echo from-input")+1 {
		t.Fatalf("input = %d, %v", n, err)
	}
	term, err := f.sup.Terminal("one")
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 15*time.Second, "input in the scrollback", func() bool {
		tap := term.Attach(1)
		defer tap.Close()
		return bytes.Contains(tap.Snapshot, []byte("\nfrom-input"))
	})
	if n, err := mc.Input(ctx, records, "one", "x", false); err != nil || n != 1 {
		t.Fatalf("input --no-enter = %d, %v", n, err)
	}

	a := attachTo(t, f, mc, records, "one")
	if _, err := mc.Attach(ctx, records, "two"); codeOf(err) != wire.CodeResourceExhausted || !strings.Contains(err.Error(), "--max-sessions") {
		t.Fatalf("a session past the ceiling: %v", err)
	}
	a.send(&meshwire.AttachFrame{Kind: meshwire.AttachReady})
	a.send(&meshwire.AttachFrame{Kind: meshwire.AttachData, Data: []byte("\x15exit 3\r")})
	end := a.until("never printed")
	if end == nil || end.Reason != meshwire.EndProcessExit {
		t.Fatalf("the shell's exit ended the session with %+v", end)
	}

	meshtest.Eventually(t, 15*time.Second, "the ended session forgotten", func() bool { return s.svc.SessionCount() == 0 })
	b := attachTo(t, f, mc, records, "two")
	b.send(&meshwire.AttachFrame{Kind: meshwire.AttachReady})
	if end := b.until("two$ "); end != nil {
		t.Fatalf("ended early: %+v", end)
	}
	if _, err := mc.Despawn(ctx, records, "two", true); err != nil {
		t.Fatal(err)
	}
	if end := b.until("never printed"); end == nil || end.Reason != meshwire.EndTargetDespawn {
		t.Fatalf("a despawn ended the session with %+v", end)
	}
	os, err := f.m.Ledger("").Session(ctx, b.grant.SessionID)
	if err != nil || os == nil || !os.Row.State.Terminal() {
		t.Fatalf("the despawned agent's session row: %+v, %v", os, err)
	}
}

// TestSessionSupersededByTakeover: a new incarnation of the manager instance fences the old one's
// serving credentials, and with them the sessions they served: the row goes superseded and both
// halves are refused by the broker.
func TestSessionSupersededByTakeover(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.serveSessions(t, 0)
	mc, records, _ := operator(t, f.m)
	ctx := t.Context()
	if _, err := f.sup.Spawn(ctx, manager.Spec{Name: "shell", Command: []string{"sh", "-i"}}); err != nil {
		t.Fatal(err)
	}
	a := attachTo(t, f, mc, records, "shell")
	l := f.m.Ledger("")
	s.fenced = true // its connection is refused from here on, so it cannot deregister
	if _, epoch, err := l.Serve(ctx, wire.ManagerEndpoint, "cotal_manager", s.instance, manager.Commands(), time.Hour); err != nil || epoch != s.epoch+1 {
		t.Fatalf("take the instance over: epoch %d, %v", epoch, err)
	}
	os, err := l.Session(ctx, a.grant.SessionID)
	if err != nil || os == nil || os.Row.State != authstore.SessionSuperseded || !os.Row.Revoked.Caller || !os.Row.Revoked.Serving {
		t.Fatalf("the session after a takeover: %+v, %v", os, err)
	}
	if nc, err := dial.As(ctx, f.m.URL(), a.cred, nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("the superseded session's caller half connected again")
	}
}

// TestSessionBackpressure: an agent that reads no input holds up neither its session nor the
// manager: keystrokes past the window are dropped, the holder's end still ends the session, a
// silent holder's session ends at the idle deadline, and an agent (which cannot redeem a session
// here) is refused attach without taking a slot.
func TestSessionBackpressure(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.serveSessions(t, 2, func(c *manager.ServiceConfig) { c.SessionIdle = time.Second })
	mc, records, _ := operator(t, f.m)
	ctx := t.Context()
	if _, err := f.sup.Spawn(ctx, manager.Spec{Name: "deaf", Command: []string{"sh", "-c", "stty raw -echo; echo deaf; exec sleep 1000"}}); err != nil {
		t.Fatal(err)
	}
	a := attachTo(t, f, mc, records, "deaf")
	a.send(&meshwire.AttachFrame{Kind: meshwire.AttachReady})
	if end := a.until("deaf"); end != nil {
		t.Fatalf("ended early: %+v", end)
	}
	chunk := bytes.Repeat([]byte("x"), meshwire.MaxAttachData)
	for range 8 {
		a.send(&meshwire.AttachFrame{Kind: meshwire.AttachData, Data: chunk})
	}
	a.rail.Close()
	meshtest.Eventually(t, 15*time.Second, "the session ended though its agent reads nothing", func() bool { return s.svc.SessionCount() == 0 })

	// A holder that goes silent: ended at the idle deadline, with an end frame.
	b := attachTo(t, f, mc, records, "deaf")
	if end := b.until("never printed"); end == nil || end.Reason != meshwire.EndClosed {
		t.Fatalf("a silent holder's session ended with %+v", end)
	}

	cred, c := f.m.Agent(t, ledger.Request{Name: "nosy", Capabilities: []string{authority.CapabilitySpawn}})
	agent := manager.NewClient(c.Conn, f.m.Space, wire.Lifecycle{Principal: cred.Principal, UID: cred.LifecycleUID}, "nosy")
	if _, err := agent.Attach(ctx, nil, "deaf"); codeOf(err) != wire.CodePermissionDenied {
		t.Fatalf("an agent's attach: %v", err)
	}
}

// TestSessionRailRefusesDeliveries: an agent that pulls a direct message it wrote to itself with
// the session's in rail as the pull's reply subject makes JetStream deliver it onto the rail (the
// broker checks a pull's subject, never its reply subject). The bridge takes only what was
// published on the rail, so the delivered frame is never typed; the holder's own frames are.
func TestSessionRailRefusesDeliveries(t *testing.T) {
	t.Parallel()
	f, s, a := shellSession(t)
	ctx := t.Context()
	// A witness on the serving half's credential sees what reaches the rail.
	servingCred, err := f.m.Ledger("").SessionServing(ctx, a.grant.SessionID, s.instance, s.epoch)
	if err != nil {
		t.Fatal(err)
	}

	cred, mal := f.m.Agent(t, ledger.Request{Name: "mallory"})
	me := cred.Principal
	// The delivered message is a well-formed frame, numbered as the holder's next.
	evil := (&meshwire.RailFrame{Kind: meshwire.RailData, Seq: a.rail.Stats().Sent + 1,
		Data: (&meshwire.AttachFrame{Kind: meshwire.AttachData, Data: []byte("echo pwned-$((6*7))\r")}).Encode()}).Encode()
	if _, err := mal.JS.Publish(ctx, f.m.Space.DMSubject(me, me), evil); err != nil {
		t.Fatal(err)
	}
	durable := wire.DMDurable(wire.Lifecycle{Principal: me, UID: cred.LifecycleUID})
	delivered := make(chan *nats.Msg, 1)
	wc := f.m.Connect(t, servingCred)
	witness, err := wc.ChanSubscribe(a.grant.Subjects.In, delivered)
	if err != nil {
		t.Fatal(err)
	}
	if err := wc.Flush(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = witness.Unsubscribe() }()
	next := "$JS.API.CONSUMER.MSG.NEXT." + f.m.Space.DMStream() + "." + durable
	if err := mal.PublishRequest(next, a.grant.Subjects.In, []byte(`{"batch":1,"no_wait":true}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-delivered:
		if m.Subject == a.grant.Subjects.In {
			t.Fatalf("the delivery arrived under the rail's own subject: the test no longer shows the attack")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("JetStream never delivered the pulled message onto the rail: the attack did not land")
	}

	a.send(&meshwire.AttachFrame{Kind: meshwire.AttachData, Data: []byte("echo fine-$((2*3))\r")})
	if end := a.until("fine-6"); end != nil {
		t.Fatalf("the session ended: %+v", end)
	}
	if strings.Contains(a.screen.String(), "pwned-42") {
		t.Fatalf("the manager typed a frame delivered onto its rail: %q", a.screen.String())
	}
}

// TestAStalledHolderEndsItsSession: a holder that takes the screen and never credits it fills the
// serving rail's window; after the stall timeout the manager ends the session, saying why, and
// the agent runs on.
func TestAStalledHolderEndsItsSession(t *testing.T) {
	meshtest.Long(t, "waits out the 30 s stall timeout")
	t.Parallel()
	logs := &meshtest.Logs{Min: slog.LevelWarn}
	f := newFixture(t)
	s := f.serveSessions(t, 0, func(c *manager.ServiceConfig) { c.Log = slog.New(logs) })
	mc, records, _ := operator(t, f.m)
	ctx := t.Context()
	if _, err := f.sup.Spawn(ctx, manager.Spec{Name: "chatty", Command: []string{"sh", "-c", "while :; do echo chatter; sleep 0.01; done"}}); err != nil {
		t.Fatal(err)
	}
	g, err := mc.Attach(ctx, records, "chatty")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := wire.ParsePrincipal(g.Holder.ID)
	holder := wire.Lifecycle{Principal: p, UID: g.Holder.LifecycleUID}
	cred, err := f.m.Ledger("").SessionCaller(ctx, g.Raw, holder)
	if err != nil {
		t.Fatal(err)
	}
	// The holder is a bare connection: it asks for the screen and reads, but never credits.
	c := f.m.Connect(t, cred)
	var frames atomic.Int64
	if _, err := c.Subscribe(g.Subjects.Out, func(m *nats.Msg) {
		if f, err := meshwire.DecodeRailFrame(m.Data); err == nil && f.Kind == meshwire.RailData {
			frames.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	ready := meshwire.RailFrame{Kind: meshwire.RailData, Seq: 1, Data: (&meshwire.AttachFrame{Kind: meshwire.AttachReady}).Encode()}
	if err := c.Publish(g.Subjects.In, ready.Encode()); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 15*time.Second, "the window full", func() bool { return frames.Load() >= int64(g.Window) })
	started := time.Now()
	meshtest.Eventually(t, 60*time.Second, "the stalled session ended", func() bool { return s.svc.SessionCount() == 0 })
	if waited := time.Since(started); waited < 25*time.Second {
		t.Errorf("the session ended %s after its window filled, before the stall timeout", waited)
	}
	if got := frames.Load(); got != int64(g.Window) { // the window full: not even the advisory end fits
		t.Errorf("the manager sent %d frames to a holder that acknowledged none; the window is %d", got, g.Window)
	}
	stalled := false
	for _, r := range logs.At(slog.LevelWarn, "end a session whose rail broke") {
		stalled = stalled || meshtest.Attr(r, "reason") == sessionrail.ReasonStall
	}
	if !stalled {
		t.Errorf("the manager did not say the rail stalled: %s", logs)
	}
	// The ledger's close follows the bridge's end on its own goroutine.
	meshtest.Eventually(t, 15*time.Second, "the stalled session's row closed", func() bool {
		os, err := f.m.Ledger("").Session(ctx, g.SessionID)
		return err == nil && os != nil && os.Row.State == authstore.SessionClosed
	})
	if st, ok := f.sup.Lookup("chatty"); !ok || st.State != manager.StateRunning {
		t.Fatalf("the stall touched the agent: %+v", st)
	}
}

// TestSessionKeysRotate: the ledger's sessions key is replaced before its window runs short;
// the successor signs the next grant, the predecessor's window is closed in the registry, and
// the session its grant opened goes on, its grant still verifying.
func TestSessionKeysRotate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	kr, err := f.m.Dir.OpenKeyring()
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(t.Context(), f.m.URL(), kr, f.m.Space, ledger.WithSessionKeyLife(6*time.Second, 3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	f.serveSessions(t, 0, func(c *manager.ServiceConfig) { c.Sessions = l })
	mc, records, _ := operator(t, f.m)
	ctx := t.Context()
	if _, err := f.sup.Spawn(ctx, manager.Spec{Name: "shell", Command: []string{"sh", "-i"}, Env: []string{"PS1=prompt$ "}}); err != nil {
		t.Fatal(err)
	}
	a := attachTo(t, f, mc, records, "shell")
	a.send(&meshwire.AttachFrame{Kind: meshwire.AttachReady})
	if end := a.until("prompt$ "); end != nil {
		t.Fatalf("ended early: %+v", end)
	}
	time.Sleep(3500 * time.Millisecond) // past the first key's reserve
	b := attachTo(t, f, mc, records, "shell")
	first, second := a.grant.Issuer.KeyID, b.grant.Issuer.KeyID
	if first == second {
		t.Fatalf("both grants are signed by %s: the key did not rotate", first)
	}
	listed, err := l.Anchors(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := wire.MillisOf(time.Now())
	byID := map[string]anchor.Anchor{}
	for _, an := range listed {
		byID[an.KeyID] = an
	}
	if old, ok := byID[first]; !ok || old.ValidTo >= now || old.ValidTo < a.grant.Iat {
		t.Fatalf("the first key after the rotation: %+v (grant issued %d, now %d)", old, a.grant.Iat, now)
	}
	if cur, ok := byID[second]; !ok || cur.ValidFrom > b.grant.Iat || cur.ValidTo < now || !slices.Equal(cur.Roles, []anchor.Role{anchor.RoleSessions}) {
		t.Fatalf("the second key: %+v", cur)
	}
	// The first grant still verifies: it was signed inside its key's window.
	if _, err := l.VerifyGrant(ctx, a.grant.Raw); err != nil {
		t.Fatalf("the first grant after the rotation: %v", err)
	}
	a.send(&meshwire.AttachFrame{Kind: meshwire.AttachData, Data: []byte("echo still-$((40+2))\r")})
	if end := a.until("still-42"); end != nil {
		t.Fatalf("the first session ended at the rotation: %+v", end)
	}
}
