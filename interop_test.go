package cotal_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/cotaltest"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// wait bounds how long a test waits for something that should happen within a round trip or
// two; it only keeps a broken test from hanging.
const wait = 10 * time.Second

func text(d *cotal.Delivery) string {
	if len(d.Message.Parts) == 0 {
		return ""
	}
	return d.Message.Parts[0].Text
}

func hasText(s string) func(*cotal.Delivery) bool {
	return func(d *cotal.Delivery) bool { return text(d) == s }
}

func count(b *cotaltest.Recorder, s string) int {
	n := 0
	for _, d := range b.Deliveries() {
		if text(d) == s {
			n++
		}
	}
	return n
}

// join connects a with an inbox as its handler, through cotaltest: the client closes at
// cleanup.
func join(t *testing.T, a *cotaltest.Agent, opts ...cotal.Option) (*cotal.Client, *cotaltest.Recorder) {
	t.Helper()
	box := cotaltest.NewRecorder()
	opts = append([]cotal.Option{cotal.WithHandler(box.Handle), cotal.WithHeartbeat(200 * time.Millisecond)}, opts...)
	return a.Connect(t, opts...), box
}

// agent connects an SDK client for a freshly minted and provisioned agent credential, for the
// tests that need meshtest's handles on the mesh (other profiles, raw connections).
func agent(t *testing.T, m *meshtest.Mesh, req ledger.Request, opts ...cotal.Option) (*cotal.Client, *cotaltest.Recorder) {
	t.Helper()
	cred := m.AgentCred(t, req)
	return connect(t, m, cred.Creds, opts...)
}

func connect(t *testing.T, m *meshtest.Mesh, creds []byte, opts ...cotal.Option) (*cotal.Client, *cotaltest.Recorder) {
	t.Helper()
	box := cotaltest.NewRecorder()
	opts = append([]cotal.Option{cotal.WithCredsData(creds), cotal.WithHandler(box.Handle), cotal.WithHeartbeat(200 * time.Millisecond)}, opts...)
	c, err := cotal.Connect(t.Context(), m.URL(), opts...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = c.Close(ctx) // some tests close it themselves first
	})
	return c, box
}

func say(s string) []wire.Part { return []wire.Part{wire.TextPart(s)} }

// TestInteropScenario is SPEC §12's interop scenario against a real broker.
func TestInteropScenario(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	team := []string{"team.backend"}
	alice, _ := agent(t, m, ledger.Request{Name: "alice", AllowPublish: team, Subscribe: team}, cotal.WithJoin("team.backend"))
	bob, bobBox := agent(t, m, ledger.Request{Name: "bob", Subscribe: team}, cotal.WithJoin("team.backend"))
	_, r1 := agent(t, m, ledger.Request{Name: "rev1", Subscribe: team, Role: "reviewer"}, cotal.WithJoin("team.backend"))
	_, r2 := agent(t, m, ledger.Request{Name: "rev2", Subscribe: team, Role: "reviewer"}, cotal.WithJoin("team.backend"))

	// Presence: alice sees the others online, each key its card's id.
	roster, err := alice.Roster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer roster.Stop()
	for _, name := range []string{"bob", "rev1", "rev2"} {
		peers := roster.Find(name)
		if len(peers) != 1 || !peers[0].Online || peers[0].Key != "local."+name || peers[0].Presence.Card.ProtocolVersion != "0.4" {
			t.Errorf("roster entry for %s: %+v", name, peers)
		}
	}

	// Multicast arrives as a channel delivery.
	if _, err := alice.Post(ctx, "team.backend", say("hello team")); err != nil {
		t.Fatal(err)
	}
	d := bobBox.Next(t, "multicast", hasText("hello team"))
	if d.Kind != wire.DeliveryChannel || d.Historical || d.Channel != "team.backend" || d.Sender.String() != "local.alice" {
		t.Errorf("multicast surfaced as %+v", d)
	}

	// Unicast arrives as a dm.
	sent, err := alice.DirectMessage(ctx, bob.Principal(), say("psst"))
	if err != nil || sent.Stream != "DM_main" || sent.Seq == 0 {
		t.Fatalf("DirectMessage = %+v, %v", sent, err)
	}
	if d := bobBox.Next(t, "dm", hasText("psst")); d.Kind != wire.DeliveryDM {
		t.Errorf("dm surfaced as %s", d.Kind)
	}

	// Anycast reaches exactly one reviewer.
	if _, err := alice.Ask(ctx, "reviewer", say("please review")); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, wait, "the task to surface", func() bool { return count(r1, "please review")+count(r2, "please review") > 0 })
	js := jetstreamOf(t, m)
	meshtest.Eventually(t, wait, "the task to be acknowledged and removed", func() bool {
		st, err := js.Stream(ctx, "TASK_main")
		return err == nil && st.CachedInfo().State.Msgs == 0
	})
	if n := count(r1, "please review") + count(r2, "please review"); n != 1 {
		t.Errorf("the task surfaced %d times, want exactly once", n)
	}
	for _, b := range []*cotaltest.Recorder{r1, r2} {
		for _, d := range b.Deliveries() {
			if text(d) == "please review" && d.Kind != wire.DeliveryAnycast {
				t.Errorf("anycast surfaced as %s", d.Kind)
			}
		}
	}

	// A late joiner gets the history, marked historical, and drops live duplicates by id.
	carol, carolBox := agent(t, m, ledger.Request{Name: "carol", Subscribe: team})
	res, err := carol.Join(ctx, "team.backend")
	if err != nil {
		t.Fatal(err)
	}
	if res.Backfilled != 1 || res.Config.DeliveryClass != wire.ClassDurable || !res.Config.Replay {
		t.Errorf("join = %+v", res)
	}
	if d := carolBox.Next(t, "history", hasText("hello team")); !d.Historical || d.Kind != wire.DeliveryChannel {
		t.Errorf("history surfaced as %+v", d)
	}
	// Replay the stored message live (same id, same subject, as alice): carol drops it.
	first := bobBox.Next(t, "multicast", hasText("hello team"))
	raw, err := json.Marshal(first.Message)
	if err != nil {
		t.Fatal(err)
	}
	subject, _ := m.Space.ChatSubject(alice.Principal(), "team.backend")
	if err := alice.Conn().Publish(subject, raw); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Post(ctx, "team.backend", say("after the join")); err != nil {
		t.Fatal(err)
	}
	if d := carolBox.Next(t, "live message", hasText("after the join")); d.Historical {
		t.Error("a live message surfaced as historical")
	}
	if n := count(carolBox, "hello team"); n != 1 {
		t.Errorf("the replayed message surfaced %d times to the late joiner, want once", n)
	}
}

func jetstreamOf(t *testing.T, m *meshtest.Mesh) jetstream.JetStream {
	t.Helper()
	admin := m.Connect(t, m.Mint(t, ledger.Request{Profile: "provisioner", Name: "inspector"}))
	return admin.JS
}

func TestForgedSenderIsTerminated(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	carolCred := m.AgentCred(t, ledger.Request{Name: "carol"})
	_, carolBox := connect(t, m, carolCred.Creds)
	bobCred := m.AgentCred(t, ledger.Request{Name: "bob"})
	bob := m.Connect(t, bobCred)
	carolP, _ := wire.NewPrincipal("local", "carol")

	// bob may publish only as himself; he claims to be alice in the payload.
	forged := `{"id":"f1","ts":1,"space":"main","from":{"id":"local.alice","name":"alice"},"to":"local.carol","parts":[{"kind":"text","text":"forged"}]}`
	if _, err := bob.JS.Publish(ctx, m.Space.DMSubject(carolP, bobCred.Principal), []byte(forged)); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.JS.Publish(ctx, m.Space.DMSubject(carolP, bobCred.Principal), []byte(`{"id": "broken`)); err != nil {
		t.Fatal(err)
	}
	honest := `{"id":"h1","ts":1,"space":"main","from":{"id":"local.bob","name":"bob"},"to":"local.carol","parts":[{"kind":"text","text":"honest"}],"future":{"field":true}}`
	if _, err := bob.JS.Publish(ctx, m.Space.DMSubject(carolP, bobCred.Principal), []byte(honest)); err != nil {
		t.Fatal(err)
	}
	carolBox.Next(t, "the honest dm (with an unknown field)", hasText("honest"))
	if n := count(carolBox, "forged"); n != 0 {
		t.Fatalf("a forged dm surfaced %d times", n)
	}
	js := jetstreamOf(t, m)
	durable := wire.DMDurable(wire.Lifecycle{Principal: carolCred.Principal, UID: carolCred.LifecycleUID})
	meshtest.Eventually(t, wait, "all three dms settled, none pending redelivery", func() bool {
		cons, err := js.Consumer(ctx, "DM_main", durable)
		if err != nil {
			return false
		}
		info := cons.CachedInfo()
		return info.AckFloor.Stream == 3 && info.NumAckPending == 0 && info.NumRedelivered == 0
	})
}

func TestDMWaitsForOfflineAgent(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t)
	ctx := t.Context()
	alice, _ := join(t, m.Agent(t, "alice"))
	dave := m.Agent(t, "dave") // provisioned, not connected
	if _, err := alice.DirectMessage(ctx, dave.Principal, say("while you were out")); err != nil {
		t.Fatal(err)
	}
	_, daveBox := join(t, dave)
	if d := daveBox.Next(t, "the waiting dm", hasText("while you were out")); d.Kind != wire.DeliveryDM {
		t.Errorf("surfaced as %s", d.Kind)
	}
}

// TestEmptyIDsBothSurface runs without the delivery daemon: the live path alone de-duplicates by
// id, and must not take two messages with no id for one.
func TestEmptyIDsBothSurface(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t, cotaltest.WithoutDaemons())
	a := m.Agent(t, "alice", cotaltest.Channels("general"))
	alice, box := join(t, a, cotal.WithJoin("general"))
	subject, _ := m.Space().ChatSubject(a.Principal, "general")
	for range 2 {
		msg := `{"id":"","ts":1,"space":"main","from":{"id":"local.alice","name":"alice"},"channel":"general","parts":[{"kind":"text","text":"anonymous"}]}`
		if err := alice.Conn().Publish(subject, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	meshtest.Eventually(t, wait, "both id-less messages", func() bool { return count(box, "anonymous") == 2 })
}

func TestKilledAgentGoesOffline(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t)
	ctx := t.Context()
	alice, _ := join(t, m.Agent(t, "alice"))
	erin, _ := join(t, m.Agent(t, "erin"))
	roster, err := alice.Roster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer roster.Stop()
	if p := roster.Find("erin"); len(p) != 1 || !p[0].Online {
		t.Fatalf("erin not online: %+v", p)
	}
	erin.Conn().Close() // killed: no final offline row, the heartbeat just stops
	start := time.Now()
	deadline := start.Add(3 * wire.LivenessWindow)
	for {
		p := roster.Find("erin")
		if len(p) == 1 && !p[0].Online {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("erin still online %s after being killed", time.Since(start))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("erin offline %s after the kill", time.Since(start).Round(100*time.Millisecond))
}

func TestCloseWritesOffline(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t)
	ctx := t.Context()
	alice, _ := join(t, m.Agent(t, "alice"))
	bob, _ := join(t, m.Agent(t, "bob"))
	roster, err := alice.Roster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer roster.Stop()
	if err := bob.Close(ctx); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, wait, "bob's offline row", func() bool {
		p := roster.Find("bob")
		return len(p) == 1 && p[0].Presence != nil && p[0].Presence.Status == wire.StatusOffline && !p[0].Online
	})
}

func TestJoinOutsideACLIsRefusedByTheBroker(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t)
	alice, _ := join(t, m.Agent(t, "alice", cotaltest.ReadOnly("general")))
	if _, err := alice.Join(t.Context(), "secret"); !errors.Is(err, cotal.ErrJoinRefused) {
		t.Fatalf("Join(secret) = %v, want ErrJoinRefused", err)
	}
	if got := alice.Channels(); len(got) != 0 {
		t.Errorf("a refused join counted: %v", got)
	}
	if _, err := alice.Join(t.Context(), "general"); err != nil {
		t.Errorf("Join(general) = %v", err)
	}
}

func TestSendRefusals(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t)
	ctx := t.Context()
	alice, _ := join(t, m.Agent(t, "alice", cotaltest.Channels("general")))
	big := strings.Repeat("x", int(alice.Conn().MaxPayload())+1)
	_, err := alice.Post(ctx, "general", say(big))
	if !errors.Is(err, wire.ErrInvalid) || !strings.Contains(err.Error(), "max_payload") {
		t.Errorf("an oversized post = %v, want a size error", err)
	}
	if _, err := alice.Post(ctx, "secret", say("x")); !errors.Is(err, cotal.ErrNotPermitted) {
		t.Errorf("a post outside allow-publish = %v, want ErrNotPermitted", err)
	}
	if _, err := alice.Post(ctx, "team.>", say("x")); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("a post to a wildcard = %v", err)
	}
	if _, err := alice.Ask(ctx, " ", say("x")); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("an ask with no role = %v", err)
	}
}

func TestConnectRefusals(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t)
	alice := m.Agent(t, "alice")
	ctx := t.Context()
	_, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(alice.Creds), cotal.WithCard(wire.AgentCard{ID: "local.mallory"}))
	if !errors.Is(err, cotal.ErrInvalidOption) || !strings.Contains(err.Error(), "local.mallory") {
		t.Errorf("a card naming another principal = %v", err)
	}
	_, err = cotal.Connect(ctx, "nats://127.0.0.1:1", cotal.WithCredsData(alice.Creds), cotal.WithConnectAttempts(2))
	if !errors.Is(err, cotal.ErrUnreachable) || !strings.Contains(err.Error(), "2 attempts") {
		t.Errorf("an unreachable broker = %v", err)
	}
	_, err = cotal.Connect(ctx, m.URL(), cotal.WithCredsData(alice.Creds), cotal.WithSpace("other"))
	if !errors.Is(err, cotal.ErrInvalidOption) {
		t.Errorf("a space other than the credential's = %v", err)
	}
	_, err = cotal.Connect(ctx, "cotal://127.0.0.1:1/main", cotal.WithCredsData([]byte("not creds")))
	if err == nil || !strings.Contains(err.Error(), "creds") {
		t.Errorf("garbage creds = %v", err)
	}
}

// TestHandlerErrorRedelivers shows ack-on-surface: a handler that fails gets the durable message
// again, and it is acknowledged once surfaced.
func TestHandlerErrorRedelivers(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t)
	ctx := t.Context()
	alice, _ := join(t, m.Agent(t, "alice"))
	bob := m.Agent(t, "bob")
	var mu sync.Mutex
	attempts := 0
	surfaced := make(chan struct{}, 1)
	bob.Connect(t, cotal.WithPresence(false),
		cotal.WithHandler(func(_ context.Context, d *cotal.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			attempts++
			if attempts == 1 {
				return errors.New("not ready yet")
			}
			surfaced <- struct{}{}
			return nil
		}))
	if _, err := alice.DirectMessage(ctx, bob.Principal, say("again")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-surfaced:
	case <-time.After(wait):
		t.Fatal("the message was not redelivered after the handler failed")
	}
	mu.Lock()
	defer mu.Unlock()
	if attempts != 2 {
		t.Errorf("%d attempts, want 2", attempts)
	}
}

// TestDurableJoinWithoutDaemon: on a durable channel with no delivery daemon the join is live,
// and says so; it never claims to be durable.
func TestDurableJoinWithoutDaemon(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t, cotaltest.WithoutDaemons())
	alice, _ := join(t, m.Agent(t, "alice", cotaltest.ReadOnly("general")))
	res, err := alice.Join(t.Context(), "general")
	if err != nil {
		t.Fatal(err)
	}
	if res.Config.DeliveryClass != wire.ClassDurable || res.Durable || res.Backstop != cotal.BackstopUnavailable {
		t.Errorf("join = %+v", res)
	}
}

// TestRosterStopEndsQuietly checks that a stopped roster's Done closes and that stopping it is
// not reported as a watch the broker ended.
func TestRosterStopEndsQuietly(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t)
	alice, _ := join(t, m.Agent(t, "alice"))
	roster, err := alice.Roster(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	roster.Stop()
	select {
	case <-roster.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done did not close after Stop")
	}
	for {
		select {
		case err := <-alice.Errors():
			if errors.Is(err, cotal.ErrRosterEnded) {
				t.Fatalf("Stop reported as %v", err)
			}
		default:
			return
		}
	}
}

// TestConnectRetriesASilentBroker: a broker that accepts the connection but does not complete
// the handshake in time (one busy with a mass join) is tried again, each attempt a connection of
// its own, and then reported unreachable.
func TestConnectRetriesASilentBroker(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	done := make(chan struct{})
	go func() { // owned: ends when the listener closes at cleanup
		defer close(done)
		var conns []net.Conn // silent: no INFO is ever sent
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() { _ = l.Close(); <-done })
	_, err = cotal.Connect(t.Context(), "nats://"+l.Addr().String(), cotal.WithSpace("main"),
		cotal.WithConnectAttempts(2), cotal.WithNATSOptions(nats.Timeout(200*time.Millisecond)))
	if !errors.Is(err, cotal.ErrUnreachable) || !strings.Contains(err.Error(), "2 attempts") {
		t.Errorf("a silent broker = %v", err)
	}
	if n := accepted.Load(); n != 2 {
		t.Errorf("%d connections to a silent broker, want one per attempt (2)", n)
	}
}
