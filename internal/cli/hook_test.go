package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/mcptools"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// TestHookCommand: `cotal hook prompt` finds the agent's cotal mcp by its principal and prints
// Claude Code's hook output with what arrived as additionalContext; an unknown event or principal
// is a usage error; an agent not running is a note, never a failure of the harness.
func TestHookCommand(t *testing.T) {
	dir := upMesh(t)
	st := waitUp(t, dir, nil)
	l := openLedger(t, dir, st.URL)
	ctx := t.Context()
	start := func(name string, handler cotal.Handler) *cotal.Client {
		cred, retire, err := l.StartAgent(ctx, ledger.Request{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = retire(context.Background()) })
		c, err := cotal.Connect(ctx, st.URL, cotal.WithCredsData(cred.Creds), cotal.WithHandler(handler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	inbox := mcptools.NewInbox(100)
	agent := start("hooked", inbox.Offer)
	roster, err := agent.Roster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(roster.Stop)
	path, err := mcptools.HookSocket(agent.Space(), agent.Principal())
	if err != nil {
		t.Fatal(err)
	}
	hooks, err := mcptools.New(agent, inbox, roster, "test").ServeHooks(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hooks.Close() })
	sender := start("sender", func(context.Context, *cotal.Delivery) error { return nil })
	if _, err := sender.DirectMessage(ctx, agent.Principal(), []wire.Part{wire.TextPart("the build is green")}); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 10*time.Second, "the DM in the agent's inbox", func() bool { return inbox.Unread() == 1 })

	hook := func(stdin string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Main(ctx, &iostreams.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut}, append([]string{"hook"}, args...))
		return code, out.String(), errOut.String()
	}
	code, out, stderr := hook(`{"hook_event_name":"UserPromptSubmit","prompt":"go on"}`, "prompt", "--agent", agent.Principal().String())
	var claude struct {
		HookSpecificOutput struct {
			HookEventName, AdditionalContext string
		}
	}
	if code != exit.OK || json.Unmarshal([]byte(out), &claude) != nil || claude.HookSpecificOutput.HookEventName != "UserPromptSubmit" ||
		!strings.Contains(claude.HookSpecificOutput.AdditionalContext, "the build is green") {
		t.Fatalf("hook prompt: exit %d %q %s", code, out, stderr)
	}
	// Codex's notify program: the event's JSON as the last argument.
	status := func(want wire.PresenceStatus) {
		t.Helper()
		meshtest.Eventually(t, 10*time.Second, "the agent "+string(want), func() bool {
			for _, p := range roster.Peers() {
				if p.Key == agent.Principal().String() && p.Presence != nil && p.Presence.Status == want {
					return true
				}
			}
			return false
		})
	}
	if err := agent.SetStatus(ctx, wire.StatusWorking, "on it"); err != nil {
		t.Fatal(err)
	}
	status(wire.StatusWorking)
	if code, out, stderr := hook("", "stop", `{"type":"agent-turn-complete","turn-id":"1"}`, "--agent", agent.Principal().String()); code != exit.OK || out != "" || stderr != "" {
		t.Fatalf("hook stop with a payload argument: exit %d %q %s", code, out, stderr)
	}
	status(wire.StatusIdle)
	if code, _, stderr := hook("", "stop", "not json", "--agent", agent.Principal().String()); code != exit.Usage || !strings.Contains(stderr, "PAYLOAD") {
		t.Errorf("a payload argument that is not JSON: exit %d %s", code, stderr)
	}
	if code, _, stderr := hook("", "frobnicate", "--agent", agent.Principal().String()); code != exit.Usage || !strings.Contains(stderr, "EVENT") {
		t.Errorf("an unknown event: exit %d %s", code, stderr)
	}
	if code, _, stderr := hook("", "stop", "--agent", "not a principal"); code != exit.Usage || !strings.Contains(stderr, "--agent") {
		t.Errorf("a bad principal: exit %d %s", code, stderr)
	}
	if code, out, stderr := hook("", "stop", "--agent", "local.nobody"); code != exit.OK || out != "" || !strings.Contains(stderr, "did not answer") {
		t.Errorf("an agent not running: exit %d %q %s", code, out, stderr)
	}
}
