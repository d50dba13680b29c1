package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// TestConsoleUnderTmux drives the interactive console as a person would, in tmux at 120x40: the
// tabs start with all and gain each channel as it speaks, a number selects a tab, the roster shows
// its glyphs and NEEDS YOU the agent waiting on a person, :msg is refused under the read-only
// credential with its reason, an unknown command is named, and q quits.
func TestConsoleUnderTmux(t *testing.T) {
	meshtest.Long(t, "drives tmux")
	dir := upMesh(t)
	st := waitUp(t, dir, nil)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The shell lingers after the console: tmux clears a dead pane that used the alternate screen.
	pane := newTmux(t, fmt.Sprintf("env %s=1 %s console --dir %s; echo \"[exit $?]\"; sleep 60", envRunCLI, self, dir))
	pane.waitFor("the tabs", func(l string) bool { return strings.HasPrefix(l, " all ") })
	pane.waitFor("the tiles", func(l string) bool { return strings.HasPrefix(l, "● 0 working") })

	// An agent waiting on a person.
	l := openLedger(t, dir, st.URL)
	cred, retire, err := l.StartAgent(t.Context(), ledger.Request{Name: "bob", Subscribe: []string{"general"}, AllowPublish: []string{"general"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = retire(context.Background()) })
	bob, err := cotal.Connect(t.Context(), st.URL, cotal.WithCredsData(cred.Creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bob.Close(context.Background()) })
	if err := bob.SetStatus(t.Context(), wire.StatusWaiting, "needs a decision"); err != nil {
		t.Fatal(err)
	}
	pane.waitFor("NEEDS YOU", func(l string) bool { return strings.Contains(l, "NEEDS YOU · 1") })
	pane.waitFor("bob waiting", func(l string) bool { return strings.Contains(l, "◐ bob is waiting") })

	for _, post := range [][]string{{"general", "hello-general"}, {"team", "hello-team"}} {
		if code, _, stderr := run(t, "send", "msg", post[0], post[1], "--dir", dir); code != exit.OK {
			t.Fatalf("send to %s: exit %d %s", post[0], code, stderr)
		}
	}
	pane.waitFor("the team post", func(l string) bool { return strings.Contains(l, "hello-team") })
	pane.waitFor("a tab per channel", func(l string) bool {
		return strings.HasPrefix(l, " all ") && strings.Contains(l, " general ") && strings.Contains(l, " team ") && strings.HasSuffix(l, " dms")
	})
	// 2 selects the second tab, #general: the team post goes from the feed.
	pane.run("send-keys", "-t", "t", "2")
	pane.waitFor("the general tab alone", func(string) bool {
		s := pane.screen()
		return strings.Contains(s, "hello-general") && !strings.Contains(s, "hello-team")
	})

	pane.run("send-keys", "-t", "t", ":msg #general hi", "Enter")
	pane.waitFor("the refusal", equals("read-only - pass --creds to send"))
	pane.run("send-keys", "-t", "t", ":frobnicate", "Enter")
	pane.waitFor("the unknown command", equals("unknown command: frobnicate"))

	// Too narrow for the side column: the prompt names who waits, and n shows them full screen.
	pane.run("resize-window", "-t", "t", "-x", "80")
	pane.waitFor("the narrow hint", func(l string) bool { return strings.HasPrefix(l, "n NEEDS YOU · 1") })
	pane.run("send-keys", "-t", "t", "n")
	pane.waitFor("bob waiting, full screen", func(l string) bool { return strings.HasPrefix(l, " ◐ bob is waiting") })
	pane.run("send-keys", "-t", "t", "Escape")
	pane.waitFor("the feed again", func(l string) bool { return strings.Contains(l, "hello-general") })
	pane.run("send-keys", "-t", "t", "q")
	pane.waitFor("the console's exit", equals("[exit 0]"))
}
