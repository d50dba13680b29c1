package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/web"
	"github.com/gocotal/cotal/wire"
)

// TestMembershipAndActivity: with the delivery daemon writing the membership feed, the graph's
// API shows alice reading general and the feed live, and the feed's event carries it; the
// activity merges a post and a direct message oldest first, cuts to the limit and refuses a bad
// one.
func TestMembershipAndActivity(t *testing.T) {
	r := start(t, meshtest.WithDaemons())
	r.login(t)
	ctx := t.Context()
	alice := r.alice.Principal().String()
	reads := func(m web.Membership) bool {
		for _, row := range m.Members {
			if row.ID == alice && (slices.Contains(row.Live, "general") || slices.Contains(row.Durable, "general")) {
				return true
			}
		}
		return false
	}
	meshtest.Eventually(t, 20*time.Second, "alice reading general in the membership feed", func() bool {
		var m web.Membership
		return r.get(t, "/api/membership", &m) == http.StatusOK && m.State == web.FeedLive && m.AsOf > 0 && reads(m)
	})
	var fromFeed web.Membership
	if err := json.Unmarshal([]byte(r.feed(t)("membership")), &fromFeed); err != nil || !reads(fromFeed) {
		t.Fatalf("the feed's membership event = %+v (%v)", fromFeed, err)
	}

	if _, err := r.alice.Post(ctx, "general", []wire.Part{wire.TextPart("first")}); err != nil {
		t.Fatal(err)
	}
	bob := r.m.AgentCred(t, ledger.Request{Name: "bob"})
	bc, err := cotal.Connect(ctx, r.m.URL(), cotal.WithCredsData(bob.Creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bc.Close(ctx) })
	time.Sleep(5 * time.Millisecond) // the two must not share a millisecond: the order is by ts
	if _, err := bc.DirectMessage(ctx, r.alice.Principal(), []wire.Part{wire.TextPart("second")}); err != nil {
		t.Fatal(err)
	}
	var act web.Activity
	meshtest.Eventually(t, 10*time.Second, "both messages in the activity", func() bool {
		return r.get(t, "/api/activity?limit=10", &act) == http.StatusOK && len(act.Entries) == 2
	})
	if act.Partial || act.Read != 2 || act.Of != 2 || act.DeadlineMS != 8000 ||
		act.Entries[0].Mode != "chat" || act.Entries[0].Channel != "general" || act.Entries[1].Mode != "unicast" ||
		act.Entries[1].SenderID != bc.Principal().String() || act.Entries[1].Kind != wire.DeliveryDM || act.Entries[1].To != r.alice.Principal().String() {
		t.Fatalf("the activity = %+v", act)
	}
	if r.get(t, "/api/activity?limit=1", &act) != http.StatusOK || len(act.Entries) != 1 || act.Entries[0].Mode != "unicast" {
		t.Fatalf("the activity cut to one = %+v", act)
	}
	for _, bad := range []string{"abc", "0", "-3", "1001"} {
		if st := r.get(t, "/api/activity?limit="+bad, nil); st != http.StatusBadRequest {
			t.Errorf("limit=%s: HTTP %d, want 400", bad, st)
		}
	}
}

// TestMembershipWithoutDaemon: a space without a delivery daemon has no feed: the graph draws
// from traffic.
func TestMembershipWithoutDaemon(t *testing.T) {
	r := start(t)
	r.login(t)
	var m web.Membership
	if st := r.get(t, "/api/membership", &m); st != http.StatusOK || m.State != web.FeedTrafficOnly || len(m.Members) != 0 {
		t.Fatalf("membership without a daemon: HTTP %d %+v", st, m)
	}
}

// TestQuestionsToTheOperator: an agent's direct message to the operator waits in NEEDS YOU, a
// dashboard started later finds it in the history, and the operator's answer clears it, on the
// feed too.
func TestQuestionsToTheOperator(t *testing.T) {
	r := start(t)
	r.login(t)
	ctx := t.Context()
	next := r.feed(t)
	if _, err := r.alice.DirectMessage(ctx, operator, []wire.Part{wire.TextPart("may I **deploy** to prod?")}); err != nil {
		t.Fatal(err)
	}
	var qs []web.Question
	for len(qs) == 0 {
		if err := json.Unmarshal([]byte(next("questions")), &qs); err != nil {
			t.Fatal(err)
		}
	}
	if qs[0].From != r.alice.Principal().String() || qs[0].HTML == "" {
		t.Fatalf("the question = %+v", qs)
	}
	var needs web.NeedsYou
	if st := r.get(t, "/api/needs-you", &needs); st != http.StatusOK || needs.Operator != operator.String() || len(needs.Questions) != 1 {
		t.Fatalf("needs-you: HTTP %d %+v", st, needs)
	}

	// A second dashboard finds the question in the history.
	admin := r.m.Mint(t, ledger.Request{Profile: authority.ProfileAdmin, Name: "cotal_web2"})
	ac, err := cotal.Connect(ctx, r.m.URL(), cotal.WithCredsData(admin.Creds), cotal.WithPresence(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ac.Close(ctx) })
	later, err := web.Start(ctx, web.Config{Client: ac, Addr: "127.0.0.1:0", Operator: operator})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = later.Close(ctx) })
	r2 := &rig{m: r.m, srv: later, alice: r.alice, base: baseOf(later), http: newBrowser()}
	r2.login(t)
	meshtest.Eventually(t, 10*time.Second, "the question found in the history", func() bool {
		return r2.get(t, "/api/needs-you", &needs) == http.StatusOK && len(needs.Questions) == 1
	})

	// The operator answers: the question is gone.
	opCred := r.m.Mint(t, ledger.Request{Profile: authority.ProfileOperator, Name: operator.Actor()})
	oc, err := cotal.Connect(ctx, r.m.URL(), cotal.WithCredsData(opCred.Creds), cotal.WithPresence(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = oc.Close(ctx) })
	if _, err := oc.DirectMessage(ctx, r.alice.Principal(), []wire.Part{wire.TextPart("yes, go")}); err != nil {
		t.Fatal(err)
	}
	for len(qs) != 0 {
		if err := json.Unmarshal([]byte(next("questions")), &qs); err != nil {
			t.Fatal(err)
		}
	}
	meshtest.Eventually(t, 10*time.Second, "the answered question gone from the later dashboard", func() bool {
		return r2.get(t, "/api/needs-you", &needs) == http.StatusOK && len(needs.Questions) == 0
	})
}

// TestEscalatedSpawn: an agent that keeps crashing is given up on by its manager, and the
// dashboard, asking the managers as cotal web does, shows it in NEEDS YOU, in Chromium and in
// the API.
func TestEscalatedSpawn(t *testing.T) {
	r := start(t, meshtest.WithDaemons())
	ctx := t.Context()
	cred, err := r.m.Ledger("").Issue(ctx, ledger.Request{Profile: authority.ProfileControlAdmin, Name: "cotal_control"})
	if err != nil {
		t.Fatal(err)
	}
	c := r.m.Connect(t, cred)
	records, err := c.JS.KeyValue(ctx, string(meshwire.RecordsBucket(r.m.Space)))
	if err != nil {
		t.Fatal(err)
	}
	mc := manager.NewClient(c.Conn, r.m.Space, wire.Lifecycle{Principal: cred.Principal, UID: cred.Instrument}, "cotal_control")
	mc.Any = true
	admin := r.m.Mint(t, ledger.Request{Profile: authority.ProfileAdmin, Name: "cotal_web2"})
	ac, err := cotal.Connect(ctx, r.m.URL(), cotal.WithCredsData(admin.Creds), cotal.WithPresence(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ac.Close(ctx) })
	srv, err := web.Start(ctx, web.Config{Client: ac, Addr: "127.0.0.1:0", AgentsEvery: 200 * time.Millisecond,
		Agents: func(ctx context.Context) ([]manager.Row, error) {
			g, err := mc.Ps(ctx, records)
			if err != nil {
				return nil, err
			}
			return manager.Rows(g)
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(ctx) })
	bctx := browser(t)
	run := steps(t, bctx, 30*time.Second)
	run("open the dashboard", chromedp.Navigate(srv.URL), chromedp.WaitVisible(`#conn.on`, chromedp.ByQuery))
	crashy, err := exec.LookPath("false")
	if err != nil {
		t.Skip("no false command to crash with")
	}
	got, err := mc.Spawn(ctx, manager.SpawnArgs{Name: "crashy", LaunchOptions: &manager.LaunchOptions{Command: []string{crashy}}})
	if err != nil {
		t.Fatal(err)
	}
	if got.State == manager.GoalSucceeded {
		t.Fatal("a spawn whose process ends at once succeeded")
	}
	run("crashy in NEEDS YOU", chromedp.WaitVisible(`#needs-you li.card.escalated[data-name="crashy"]`, chromedp.ByQuery))
	var needs web.NeedsYou
	run("GET /api/needs-you", chromedp.Evaluate(`fetch("/api/needs-you", bound()).then((r) => r.json())`, &needs,
		func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if len(needs.Escalated) != 1 || needs.Escalated[0].ID != "local.crashy" ||
		(needs.Escalated[0].Status != string(manager.StateEscalated) && needs.Escalated[0].Status != string(manager.StateFailed)) {
		t.Fatalf("needs-you: %+v", needs)
	}
	var shot []byte
	run("screenshot", chromedp.FullScreenshot(&shot, 100))
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "escalated.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
}
