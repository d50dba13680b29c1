package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/runhost"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/internal/web"
	"github.com/gocotal/cotal/wire"
)

// rig is a dashboard on a real mesh, with an agent that posts and a browser-like client.
type rig struct {
	m     *meshtest.Mesh
	srv   *web.Server
	alice *cotal.Client
	base  string
	http  *http.Client
	// runs hosts the workflow runs the dashboard shows.
	runs *runhost.Host
}

// hostRuns shows a run host's runs on the dashboard, answering as the operator.
type hostRuns struct{ h *runhost.Host }

func (r hostRuns) List(ctx context.Context) ([]runhost.Row, error) { return r.h.List(ctx) }

func (r hostRuns) View(ctx context.Context, id string) (*runhost.View, error) {
	return r.h.View(ctx, id)
}

func (r hostRuns) Answer(ctx context.Context, id, step string, value json.RawMessage) error {
	_, err := r.h.Answer(ctx, id, step, value, operator.String())
	return err
}

// operator is the person the dashboards of these tests answer for.
var operator, _ = wire.NewPrincipal(wire.DevOwner, "operator")

func start(t *testing.T, opts ...meshtest.Option) *rig {
	t.Helper()
	m := meshtest.Start(t, opts...)
	ctx := t.Context()
	admin := m.Mint(t, ledger.Request{Profile: authority.ProfileAdmin, Name: "cotal_web"})
	ac, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(admin.Creds), cotal.WithPresence(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ac.Close(context.Background()) })
	purger := m.Mint(t, ledger.Request{Profile: authority.ProfilePurger, Name: "cotal_web_purger"})
	runs, err := runhost.NewHost(runhost.Config{
		Space: m.Space, Owner: wire.DevOwner, Dir: t.TempDir(), Issuer: m.Ledger(""),
		Serve: &authority.ServeRows{Endpoint: wire.ManagerEndpoint, Instance: wire.NewLifecycleUID(), Epoch: 1},
		Dial: func(ctx context.Context, cred *authority.Credential) (*nats.Conn, error) {
			return dial.As(ctx, m.URL(), cred)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(runs.Close)
	srv, err := web.Start(ctx, web.Config{Client: ac, Addr: "127.0.0.1:0", Operator: operator, Runs: hostRuns{runs}, Purge: func(ctx context.Context, channel string) (uint64, error) {
		nc, err := dial.As(ctx, m.URL(), purger)
		if err != nil {
			return 0, err
		}
		defer nc.Close()
		return space.PurgeChannel(ctx, nc, m.Space, channel)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	cred := m.AgentCred(t, ledger.Request{Name: "alice", Subscribe: []string{"general"}, AllowPublish: []string{"general"}})
	alice, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(cred.Creds), cotal.WithJoin("general"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = alice.Close(context.Background()) })
	return &rig{m: m, srv: srv, alice: alice, base: baseOf(srv), http: newBrowser(), runs: runs}
}

// baseOf is the dashboard's origin.
func baseOf(srv *web.Server) string {
	u, _ := url.Parse(srv.URL)
	return "http://" + u.Host
}

// newBrowser is an HTTP client that keeps cookies, as a browser does.
func newBrowser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 10 * time.Second}
}

// login redeems the launch URL, as the browser does.
func (r *rig) login(t *testing.T) {
	t.Helper()
	res, err := r.http.Get(r.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Request.URL.Query().Get("k") != "" {
		t.Fatalf("the launch URL: HTTP %d at %s", res.StatusCode, res.Request.URL)
	}
	// The page keeps the binding from the redirect's fragment and sends it with every data
	// request, as bind.js does.
	frag, _ := url.ParseQuery(res.Request.URL.Fragment)
	if frag.Get("bind") == "" {
		t.Fatalf("the launch redirect handed no binding: %s", res.Request.URL)
	}
	r.http.Transport = binding{value: frag.Get("bind")}
}

// binding sends the session's binding with every request, as the page does.
type binding struct{ value string }

func (b binding) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set(web.BindHeader, b.value)
	return http.DefaultTransport.RoundTrip(req)
}

// get fetches path and decodes its JSON into v, returning the status.
func (r *rig) get(t *testing.T, path string, v any) int {
	t.Helper()
	res, err := r.http.Get(r.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if v != nil {
		_ = json.NewDecoder(res.Body).Decode(v)
	}
	return res.StatusCode
}

// feed opens the live feed and returns next, which waits for the next event named want and
// returns its data.
func (r *rig) feed(t *testing.T) (next func(want string) string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, r.base+"/feed", nil)
	// The feed streams until the test ends: a client without the rig's timeout.
	res, err := (&http.Client{Jar: r.http.Jar, Transport: r.http.Transport}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	events := make(chan [2]string, 64)
	go func() {
		sc := bufio.NewScanner(res.Body)
		var name string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				select {
				case events <- [2]string{name, strings.TrimPrefix(line, "data: ")}:
				case <-t.Context().Done():
					return
				}
			}
		}
	}()
	return func(want string) string {
		t.Helper()
		for {
			select {
			case ev := <-events:
				if ev[0] == want {
					return ev[1]
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("no %s event", want)
			}
		}
	}
}

func errorOf(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	var e struct{ Error string }
	_ = json.NewDecoder(res.Body).Decode(&e)
	return e.Error
}

// TestGate: nothing without the session cookie; the launch token buys it once and never again; a
// foreign Origin and a non-loopback Host are refused even with the cookie.
func TestGate(t *testing.T) {
	r := start(t)
	plain := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := plain.Get(r.base + "/api/meta")
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusUnauthorized || errorOf(t, res) != "unauthenticated" {
		t.Fatalf("no cookie: HTTP %d", res.StatusCode)
	}
	res, err = plain.Get(r.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	cookie := res.Header.Get("Set-Cookie")
	res.Body.Close()
	if res.StatusCode != http.StatusFound || !strings.Contains(cookie, "HttpOnly") || !strings.Contains(cookie, "SameSite=Strict") || strings.Contains(res.Header.Get("Location"), "k=") {
		t.Fatalf("the launch token: HTTP %d, cookie %q, location %q", res.StatusCode, cookie, res.Header.Get("Location"))
	}
	to, err := url.Parse(res.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	frag, _ := url.ParseQuery(to.Fragment)
	bind := frag.Get("bind")
	if bind == "" || strings.Contains(cookie, bind) {
		t.Fatalf("the launch redirect's binding: %q (cookie %q)", to, cookie)
	}
	res, err = plain.Get(r.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusUnauthorized || errorOf(t, res) != "launch-token-already-used" {
		t.Fatalf("the launch token again: HTTP %d", res.StatusCode)
	}
	session := strings.SplitN(cookie, ";", 2)[0]
	do := func(mutate func(*http.Request)) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, r.base+"/api/meta", nil)
		req.Header.Set("Cookie", session)
		req.Header.Set(web.BindHeader, bind)
		mutate(req)
		res, err := plain.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := do(func(*http.Request) {}); res.StatusCode != http.StatusOK {
		t.Fatalf("with the cookie and the binding: HTTP %d", res.StatusCode)
	}
	// The cookie alone, as a server on another loopback port receives it from the browser and
	// replays it: no data route answers, on the header, the feed's parameter or neither.
	for path, mutate := range map[string]func(*http.Request){
		"/api/meta":   func(q *http.Request) { q.Header.Del(web.BindHeader) },
		"/api/roster": func(q *http.Request) { q.Header.Set(web.BindHeader, "guessed") },
		"/feed":       func(q *http.Request) { q.Header.Del(web.BindHeader); q.URL.RawQuery = "bind=guessed" },
	} {
		res := do(func(q *http.Request) { q.URL.Path = path; mutate(q) })
		if res.StatusCode != http.StatusUnauthorized || errorOf(t, res) != "unbound-session" {
			t.Errorf("the replayed cookie on %s: HTTP %d", path, res.StatusCode)
		}
	}
	if res := do(func(q *http.Request) {
		q.URL.Path, q.URL.RawQuery = "/feed", "bind="+url.QueryEscape(bind)
		q.Header.Del(web.BindHeader)
	}); res.StatusCode != http.StatusOK {
		t.Errorf("the feed with its binding as a parameter: HTTP %d", res.StatusCode)
	} else {
		res.Body.Close()
	}
	if res := do(func(q *http.Request) { q.Header.Set("Origin", "http://evil.example") }); res.StatusCode != http.StatusForbidden || errorOf(t, res) != "cross-origin" {
		t.Fatalf("a foreign Origin: HTTP %d", res.StatusCode)
	}
	if res := do(func(q *http.Request) { q.Host = "evil.example:80" }); res.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("a foreign Host: HTTP %d", res.StatusCode)
	}
}

// TestFeedAndHistory: a post arrives on the feed within a second, rendered inert when hostile;
// the channel's history and the channel list show it; bad input is refused by name.
func TestFeedAndHistory(t *testing.T) {
	r := start(t)
	r.login(t)
	ctx := t.Context()
	next := r.feed(t)
	next("roster")
	hostile := "**bold** <script>alert(1)</script> <img src=x onerror=alert(2)> [click](javascript:alert(3)) [ok](https://cotal.example)"
	sent := time.Now()
	if _, err := r.alice.Post(ctx, "general", []wire.Part{wire.TextPart(hostile)}); err != nil {
		t.Fatal(err)
	}
	var ev web.Event
	if err := json.Unmarshal([]byte(next("message")), &ev); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(sent); d > time.Second {
		t.Errorf("the post reached the feed after %s", d)
	}
	if ev.Mode != wire.DeliveryChannel || ev.Channel != "general" || ev.SenderID != r.alice.Principal().String() {
		t.Fatalf("the event: %+v", ev)
	}
	for _, bad := range []string{"<script", "onerror", "javascript:", "<img"} {
		if strings.Contains(strings.ToLower(ev.HTML), bad) {
			t.Errorf("the rendered body carries %q: %s", bad, ev.HTML)
		}
	}
	if !strings.Contains(ev.HTML, "<strong>bold</strong>") || !strings.Contains(ev.HTML, `href="https://cotal.example"`) || !strings.Contains(ev.HTML, "noopener") {
		t.Errorf("the rendered body lost its safe Markdown: %s", ev.HTML)
	}

	var hist []web.Event
	if st := r.get(t, "/api/channels/general/history?limit=10", &hist); st != http.StatusOK || len(hist) != 1 || hist[0].Msg.ID != ev.Msg.ID {
		t.Fatalf("history: HTTP %d %+v", st, hist)
	}
	var chans []web.Channel
	if st := r.get(t, "/api/channels", &chans); st != http.StatusOK || len(chans) != 1 || chans[0].Channel != "general" || chans[0].Messages != 1 {
		t.Fatalf("channels: HTTP %d %+v", st, chans)
	}
	for path, want := range map[string]int{
		"/api/channels/general/history?limit=0":     http.StatusBadRequest,
		"/api/channels/general/history?limit=1e3":   http.StatusBadRequest,
		"/api/channels/general/history?limit=99999": http.StatusBadRequest,
		"/api/channels/bad%20name/history":          http.StatusBadRequest,
		"/api/dms?limit=-1":                         http.StatusBadRequest,
	} {
		if st := r.get(t, path, nil); st != want {
			t.Errorf("GET %s: HTTP %d, want %d", path, st, want)
		}
	}

	// The one write: a channel's history deleted, through the purger.
	post := func(body string, ct string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/api/channel/delete", strings.NewReader(body))
		req.Header.Set("Content-Type", ct)
		return r.http.Do(req)
	}
	for body, want := range map[string]int{
		`{"channel":"bad name"}`:          http.StatusBadRequest,
		`{"channel":"general","x":1}`:     http.StatusBadRequest,
		strings.Repeat(" ", 9<<10) + "{}": http.StatusRequestEntityTooLarge,
	} {
		res, err := post(body, "application/json")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("delete with %.30q: HTTP %d, want %d", body, res.StatusCode, want)
		}
	}
	res2, err := post(`{"channel":"general"}`, "application/json")
	if err != nil {
		t.Fatal(err)
	}
	var del web.Deleted
	_ = json.NewDecoder(res2.Body).Decode(&del)
	res2.Body.Close()
	if res2.StatusCode != http.StatusOK || !del.OK || del.Purged != 1 {
		t.Fatalf("delete: HTTP %d %+v", res2.StatusCode, del)
	}
	if st := r.get(t, "/api/channels/general/history", &hist); st != http.StatusOK || len(hist) != 0 {
		t.Fatalf("history after the delete: HTTP %d %+v", st, hist)
	}
}

// TestRosterShowsWaiting: an agent waiting on a person is in the roster as waiting.
func TestRosterShowsWaiting(t *testing.T) {
	r := start(t)
	r.login(t)
	if err := r.alice.SetStatus(t.Context(), wire.StatusWaiting, "needs a decision on the schema"); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 10*time.Second, "alice waiting in the roster", func() bool {
		var peers []web.Peer
		r.get(t, "/api/roster", &peers)
		for _, p := range peers {
			if p.Key == r.alice.Principal().String() && p.Online && p.Presence.Status == wire.StatusWaiting {
				return true
			}
		}
		return false
	})
}

// TestHistoryIsTheLatest: a stream longer than one read walks still yields its latest messages.
func TestHistoryIsTheLatest(t *testing.T) {
	r := start(t)
	r.login(t)
	defer web.SetMaxScan(5)()
	for i := range 12 {
		if _, err := r.alice.Post(t.Context(), "general", []wire.Part{wire.TextPart(fmt.Sprintf("post-%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	var hist []web.Event
	meshtest.Eventually(t, 10*time.Second, "the history", func() bool {
		return r.get(t, "/api/channels/general/history?limit=3", &hist) == http.StatusOK && len(hist) == 3 && hist[2].Msg.Parts[0].Text == "post-11"
	})
	if hist[0].Msg.Parts[0].Text != "post-9" {
		t.Fatalf("the last three: %s, %s, %s", hist[0].Msg.Parts[0].Text, hist[1].Msg.Parts[0].Text, hist[2].Msg.Parts[0].Text)
	}
}

// TestRunsAPI: the runs routes list the runs, show one's journal with its open checkpoint's
// question, take an answer, and refuse what is not a run, a step or a JSON answer by name.
func TestRunsAPI(t *testing.T) {
	t.Parallel()
	r := start(t)
	r.login(t)
	ctx := t.Context()
	id, err := r.runs.Start(ctx, "const ok = await checkpoint(\"go\", \"Go?\")\nlog(ok.value)", webAdmit())
	if err != nil {
		t.Fatal(err)
	}
	var v runhost.View
	meshtest.Eventually(t, 10*time.Second, "the open checkpoint", func() bool {
		return r.get(t, "/api/runs/"+id, &v) == http.StatusOK && len(v.Journal) == 2 && v.Journal[1].Asks == "Go?"
	})
	var rows []runhost.Row
	if st := r.get(t, "/api/runs", &rows); st != http.StatusOK || len(rows) != 1 || rows[0].RunID != id {
		t.Errorf("GET /api/runs: HTTP %d %+v", st, rows)
	}
	for path, want := range map[string]int{"/api/runs/run-none": http.StatusNotFound, "/api/runs/bad%20id": http.StatusBadRequest} {
		if st := r.get(t, path, nil); st != want {
			t.Errorf("GET %s: HTTP %d, want %d", path, st, want)
		}
	}
	post := func(path, body, ct string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", ct)
		res, err := r.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	answer := "/api/runs/" + id + "/answer"
	for _, c := range []struct {
		path, body, ct string
		want           int
	}{
		{answer, `{"step":"/checkpoint:go#0","value":"yes"}`, "text/plain", http.StatusUnsupportedMediaType},
		{answer, `{"step":"/checkpoint:go#0","value":"yes","by":"x"}`, "application/json", http.StatusBadRequest},
		{answer, `{"step":"checkpoint","value":"yes"}`, "application/json", http.StatusBadRequest},
		{answer, `{"step":"/checkpoint:other#0","value":"yes"}`, "application/json", http.StatusNotFound},
		{"/api/runs/run-none/answer", `{"step":"/checkpoint:go#0"}`, "application/json", http.StatusNotFound},
		{answer, `{"step":"/checkpoint:go#0","value":"yes"}`, "application/json", http.StatusOK},
	} {
		if st := post(c.path, c.body, c.ct); st != c.want {
			t.Errorf("POST %s %s (%s): HTTP %d, want %d", c.path, c.body, c.ct, st, c.want)
		}
	}
	meshtest.Eventually(t, 10*time.Second, "the run to complete", func() bool {
		return r.get(t, "/api/runs", &rows) == http.StatusOK && len(rows) == 1 && rows[0].State == "completed"
	})
}

// webAdmit admits a test's run as the operator's instrument would: every channel.
func webAdmit() runhost.Admit {
	p, err := wire.NewPrincipal(string(wire.DevOwner), "cli")
	if err != nil {
		panic(err)
	}
	return runhost.OperatorAdmit(wire.Lifecycle{Principal: p, UID: wire.NewLifecycleUID()}, "a test")
}
