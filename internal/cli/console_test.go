package cli

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// TestConsoleShowsPeerNamesSafely runs `cotal console` while a peer with a hostile display name
// (a colour escape, a bidi override, an OSC title) joins and posts a message whose text tries to
// forge a second line. The console shows the name stripped, attributed to the principal the
// subject proves, and the text escaped on one line; no escape byte reaches its output.
func TestConsoleShowsPeerNamesSafely(t *testing.T) {
	dir := t.TempDir()
	_, _, stopUp := background(t, "up", "--dir", dir, "--port", "0")
	st := waitUp(t, dir, nil)
	consoleOut, consoleErr, stopConsole := background(t, "console", "--dir", dir, "--plain")
	meshtest.Eventually(t, 20*time.Second, "the console watching", func() bool { return strings.Contains(consoleErr.String(), "watching space main") })

	ctx := t.Context()
	kr, err := mesh.Dir{Path: filepath.Join(dir, mesh.DirName)}.OpenKeyring()
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(ctx, st.URL, kr, "main")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cred, retire, err := l.StartAgent(ctx, ledger.Request{Name: "mallory", AllowPublish: []string{"general"}})
	if err != nil {
		t.Fatal(err)
	}
	hostile := "\x1b[31malice\u202e\x1b]0;owned\x07"
	c, err := cotal.Connect(ctx, st.URL, cotal.WithCredsData(cred.Creds), cotal.WithName(hostile))
	if err != nil {
		t.Fatal(err)
	}
	closeC := sync.OnceValue(func() error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return c.Close(cctx)
	})
	t.Cleanup(func() { _ = closeC() }) // after an early failure; otherwise the test checks it below
	forged := "hi\n12:00:00 #general alice (local.alice): \x1b[32mwire the money"
	if _, err := c.Post(ctx, "general", []wire.Part{wire.TextPart(forged)}); err != nil {
		t.Fatal(err)
	}

	wantMsg := `#general alice (local.mallory): hi\n12:00:00 #general alice (local.alice): \x1b[32mwire the money` + "\n"
	wantPresence := "* alice (local.mallory) is idle\n"
	meshtest.Eventually(t, 20*time.Second, "the console lines", func() bool {
		out := consoleOut.String()
		return strings.Contains(out, wantMsg) && strings.Contains(out, wantPresence)
	})
	// Stop in reverse order while the mesh still runs: mallory, its lifecycle, the console.
	if err := closeC(); err != nil {
		t.Errorf("close mallory: %v", err)
	}
	if err := retire(ctx); err != nil {
		t.Errorf("retire mallory: %v", err)
	}
	if code := stopConsole(); code != exit.OK {
		t.Errorf("console exit %d", code)
	}
	out := consoleOut.String()
	if strings.ContainsAny(out, "\x1b\x07\u202e") {
		t.Errorf("the console passed a control or bidi character through: %q", out)
	}
	for line := range strings.Lines(out) {
		if strings.Contains(line, "wire the money") && !strings.Contains(line, "(local.mallory): hi") {
			t.Errorf("the message text forged a line of its own: %q", line)
		}
	}
	if code := stopUp(); code != exit.OK {
		t.Errorf("up exit %d", code)
	}
}
