package web_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// chromium finds a Chromium to drive. Without one the browser tests are skipped, unless
// COTAL_REQUIRE_BROWSER is set (CI sets it, having installed Chromium), when they fail.
func chromium(t *testing.T) string {
	t.Helper()
	meshtest.Long(t, "drives Chromium")
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("COTAL_REQUIRE_BROWSER") != "" {
		t.Fatal("no Chromium on PATH, and COTAL_REQUIRE_BROWSER is set")
	}
	t.Skip("no Chromium on PATH: the browser tests need one (apt install chromium)")
	return ""
}

// browser starts a headless Chromium for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // CI runs as root
		chromedp.WindowSize(1400, 860),
	)
	actx, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	// The browser starts on this context, not on a step's shorter one, which would close it.
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// steps returns run, which runs a named step of chromedp actions in the browser of ctx, within
// within, failing the test with the step's name.
func steps(t *testing.T, ctx context.Context, within time.Duration) (run func(what string, actions ...chromedp.Action)) {
	return func(what string, actions ...chromedp.Action) {
		t.Helper()
		tctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		if err := chromedp.Run(tctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// TestDashboardInChromium opens the dashboard as a person would: the launch URL, then a post by
// an agent appears in Monitor within a second, a hostile body renders inert, a waiting agent
// appears in NEEDS YOU, and so does her question to the operator, and the launch URL opened again
// is refused. It keeps a screenshot of the
// page as a test artifact (go test -artifacts).
func TestDashboardInChromium(t *testing.T) {
	r := start(t)
	ctx := browser(t)
	run := steps(t, ctx, 20*time.Second)
	run("open the launch URL", chromedp.Navigate(r.srv.URL), chromedp.WaitVisible(`#conn.on`, chromedp.ByQuery))
	var location string
	run("read the location", chromedp.Location(&location))
	if strings.Contains(location, "k=") {
		t.Errorf("the launch token stayed in the address bar: %s", location)
	}

	// A post, with a body that tries everything.
	hostile := "**shipped** the fix <img src=x onerror=\"window.pwned=1\"> <script>window.pwned=2</script> [click](javascript:window.pwned=3)"
	sent := time.Now()
	if _, err := r.alice.Post(t.Context(), "general", []wire.Part{wire.TextPart(hostile)}); err != nil {
		t.Fatal(err)
	}
	run("the post in Monitor", chromedp.WaitVisible(`#messages li.msg strong`, chromedp.ByQuery))
	if d := time.Since(sent); d > time.Second {
		t.Errorf("the post appeared after %s", d)
	}
	var pwned, images, jsLinks int
	run("probe the page", chromedp.Evaluate(`window.pwned === undefined ? 0 : 1`, &pwned),
		chromedp.Evaluate(`document.querySelectorAll('#messages img').length`, &images),
		chromedp.Evaluate(`document.querySelectorAll('#messages a[href^="javascript"]').length`, &jsLinks))
	if pwned != 0 || images != 0 || jsLinks != 0 {
		t.Fatalf("the hostile body was not inert: ran %d, images %d, javascript links %d", pwned, images, jsLinks)
	}

	// An agent waiting on a person.
	if err := r.alice.SetStatus(t.Context(), wire.StatusWaiting, "needs a decision on the schema"); err != nil {
		t.Fatal(err)
	}
	// And a question addressed to the operator.
	if _, err := r.alice.DirectMessage(t.Context(), operator, []wire.Part{wire.TextPart("Ship the **schema change** tonight, or wait for review?")}); err != nil {
		t.Fatal(err)
	}
	var title, answer string
	run("alice in NEEDS YOU, waiting and asking", chromedp.WaitVisible(`#needs-you li.card[data-key="`+r.alice.Principal().String()+`"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#needs-you li.card.question[data-from="`+r.alice.Principal().String()+`"] strong`, chromedp.ByQuery),
		chromedp.Text(`#needs-title`, &title, chromedp.ByQuery),
		chromedp.Text(`#needs-you li.card.question code.answer`, &answer, chromedp.ByQuery))
	if title != "NEEDS YOU · 2" {
		t.Errorf("the lane's title: %q", title)
	}
	// The answer the card shows is a command that exists: `cotal send dm` takes a principal.
	if want := "cotal send dm " + r.alice.Principal().String() + " …"; answer != want {
		t.Errorf("the question's answer: %q, want %q", answer, want)
	}
	var shot []byte
	run("screenshot", chromedp.FullScreenshot(&shot, 100))
	path := filepath.Join(t.ArtifactDir(), "dashboard.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)

	// The launch URL again, in another browser: refused.
	other := browser(t)
	var body string
	tctx, cancel := context.WithTimeout(other, 20*time.Second)
	defer cancel()
	if err := chromedp.Run(tctx, chromedp.Navigate(r.srv.URL), chromedp.Text(`body`, &body, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, "launch-token-already-used") {
		t.Fatalf("the launch URL opened twice: %q", body)
	}
}

// TestSpoofedNameInChromium: an agent whose display name is "\u202erotarepo" (a right-to-left
// override that draws "operator") shows everywhere on the page as its name stripped of the
// control, beside its principal: in the roster, on its post and on its question in NEEDS YOU.
// It keeps a screenshot.
func TestSpoofedNameInChromium(t *testing.T) {
	r := start(t)
	cred := r.m.AgentCred(t, ledger.Request{Name: "mallory", Subscribe: []string{"general"}, AllowPublish: []string{"general"}})
	mal, err := cotal.Connect(t.Context(), r.m.URL(), cotal.WithCredsData(cred.Creds), cotal.WithJoin("general"), cotal.WithName("\u202erotarepo"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mal.Close(context.Background()) })
	ctx := browser(t)
	run := steps(t, ctx, 20*time.Second)
	run("open the launch URL", chromedp.Navigate(r.srv.URL), chromedp.WaitVisible(`#conn.on`, chromedp.ByQuery))
	if _, err := mal.Post(t.Context(), "general", []wire.Part{wire.TextPart("I am the operator, **approve** my spawn")}); err != nil {
		t.Fatal(err)
	}
	if _, err := mal.DirectMessage(t.Context(), operator, []wire.Part{wire.TextPart("Please confirm")}); err != nil {
		t.Fatal(err)
	}
	want := "rotarepo (" + cred.Principal.String() + ")"
	var roster, from, asks string
	run("mallory on the page", chromedp.WaitVisible(`#messages li.msg strong`, chromedp.ByQuery),
		chromedp.WaitVisible(`#needs-you li.card.question[data-from="`+cred.Principal.String()+`"]`, chromedp.ByQuery),
		chromedp.Text(`#roster`, &roster, chromedp.ByQuery),
		chromedp.Text(`#messages li.msg .from`, &from, chromedp.ByQuery),
		chromedp.Text(`#needs-you li.card.question[data-from="`+cred.Principal.String()+`"] .who`, &asks, chromedp.ByQuery))
	for where, text := range map[string]string{"roster": roster, "post": from, "question": asks} {
		if strings.ContainsRune(text, '\u202e') || !strings.Contains(text, want) {
			t.Errorf("the %s shows %q, want %q without the override", where, text, want)
		}
	}
	var shot []byte
	run("screenshot", chromedp.FullScreenshot(&shot, 100))
	path := filepath.Join(t.ArtifactDir(), "spoofed-name.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// TestGraphInChromium opens the graph as a person would: with the delivery daemon writing the
// membership feed, alice and the channel she reads are drawn with a live spoke between them and
// the feed's pill reads live; bob, joining two channels, brings the second; alice's post runs
// along her spoke as a comet. It keeps a screenshot.
func TestGraphInChromium(t *testing.T) {
	r := start(t, meshtest.WithDaemons())
	ctx := browser(t)
	run := steps(t, ctx, 30*time.Second)
	alice := r.alice.Principal().String()
	run("log in, then open the graph", chromedp.Navigate(r.srv.URL), chromedp.WaitVisible(`#conn.on`, chromedp.ByQuery),
		chromedp.Click(`#graph-link`, chromedp.ByQuery), chromedp.WaitVisible(`svg#graph`, chromedp.ByQuery))
	run("alice, #general and a live spoke", chromedp.WaitVisible(`g.node.agent[data-id="`+alice+`"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`g.node.hub[data-hub="general"]`, chromedp.ByQuery),
		chromedp.WaitReady(`line.spoke.live[data-a="`+alice+`"][data-b="hub:general"]`, chromedp.ByQuery))
	var pill string
	run("the feed's pill", chromedp.Text(`#feed`, &pill, chromedp.ByQuery))
	if pill != "membership: live" {
		t.Errorf("the feed's pill: %q", pill)
	}
	// bob reads general and team: team joins the picture.
	cred := r.m.AgentCred(t, ledger.Request{Name: "bob", Subscribe: []string{"general", "team"}, AllowPublish: []string{"general", "team"}})
	bob, err := cotal.Connect(t.Context(), r.m.URL(), cotal.WithCredsData(cred.Creds), cotal.WithJoin("general", "team"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bob.Close(context.Background()) })
	run("bob's spoke to #team", chromedp.WaitReady(`line.spoke.live[data-a="`+bob.Principal().String()+`"][data-b="hub:team"]`, chromedp.ByQuery))
	if _, err := r.alice.Post(t.Context(), "general", []wire.Part{wire.TextPart("graph me")}); err != nil {
		t.Fatal(err)
	}
	run("a comet", chromedp.WaitReady(`svg#graph:not([data-comets="0"])`, chromedp.ByQuery))
	time.Sleep(time.Second) // let the layout settle for the picture
	var shot []byte
	run("screenshot", chromedp.FullScreenshot(&shot, 100))
	path := filepath.Join(t.ArtifactDir(), "graph.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// TestRunsInChromium: a person opens Workflow runs, finds the run waiting on its checkpoint,
// reads its question, answers it in the page, and sees the checkpoint resolved with the answer
// and the run completed. It keeps a screenshot of the run as a test artifact.
func TestRunsInChromium(t *testing.T) {
	r := start(t)
	id, err := r.runs.Start(t.Context(), "const ok = await checkpoint(\"ship\", \"Ship the release tonight?\", { timeout: \"1h\" })\nlog(ok.value)", webAdmit())
	if err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	run := steps(t, ctx, 20*time.Second)
	run("open the launch URL", chromedp.Navigate(r.srv.URL), chromedp.WaitVisible(`#conn.on`, chromedp.ByQuery))
	run("open Workflow runs", chromedp.Click(`nav a[data-view="runs"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`tr.run-row[data-run="`+id+`"] a`, chromedp.ByQuery))
	var question string
	run("open the run", chromedp.Click(`tr.run-row[data-run="`+id+`"] a`, chromedp.ByQuery),
		chromedp.WaitVisible(`form.answer-form input`, chromedp.ByQuery),
		chromedp.Text(`form.answer-form .question`, &question, chromedp.ByQuery))
	if question != "Ship the release tonight?" {
		t.Errorf("the question: %q", question)
	}
	var before []byte
	run("screenshot the open checkpoint", chromedp.FullScreenshot(&before, 100))
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "run-open.png"), before, 0o644); err != nil {
		t.Fatal(err)
	}
	var answered, state string
	run("answer it", chromedp.SendKeys(`form.answer-form input`, "yes", chromedp.ByQuery),
		chromedp.Click(`form.answer-form button`, chromedp.ByQuery),
		chromedp.WaitVisible(`ol.journal li[data-step="/checkpoint:ship#0"] span.answer`, chromedp.ByQuery),
		chromedp.Text(`ol.journal li[data-step="/checkpoint:ship#0"] span.answer`, &answered, chromedp.ByQuery))
	if !strings.Contains(answered, `answered "yes" by `+operator.String()) {
		t.Errorf("the answered checkpoint: %q", answered)
	}
	run("the run completed", chromedp.Poll(`document.querySelector("p.run-state").textContent.startsWith("completed")`, nil, chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.Text(`p.run-state`, &state, chromedp.ByQuery))
	var shot []byte
	run("screenshot", chromedp.FullScreenshot(&shot, 100))
	path := filepath.Join(t.ArtifactDir(), "run.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%s)", path, state)
}
