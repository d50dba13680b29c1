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
	"github.com/gocotal/cotal/internal/hooksock"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/mcptools"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// hookedAgent is an agent named name on a fresh mesh, served as `cotal mcp` serves it with its
// hooks on their socket, as `cotal hook` finds them.
type hookedAgent struct {
	*cotal.Client
	inbox  *mcptools.Inbox
	roster *cotal.Roster
	// start connects another agent of the mesh, its deliveries to handler.
	start func(name string, handler cotal.Handler) *cotal.Client
}

func newHookedAgent(t *testing.T, name string) *hookedAgent {
	t.Helper()
	dir := upMesh(t)
	st := waitUp(t, dir, nil)
	l := openLedger(t, dir, st.URL)
	ctx := t.Context()
	a := &hookedAgent{inbox: mcptools.NewInbox(100)}
	a.start = func(name string, handler cotal.Handler) *cotal.Client {
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
	a.Client = a.start(name, a.inbox.Offer)
	var err error
	if a.roster, err = a.Roster(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.roster.Stop)
	path, err := hooksock.Socket(a.Space(), a.Principal())
	if err != nil {
		t.Fatal(err)
	}
	hooks, err := mcptools.New(a.Client, a.inbox, a.roster, "test").ServeHooks(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hooks.Close() })
	return a
}

// status waits until the agent's presence shows want, its activity containing activity.
func (a *hookedAgent) status(t *testing.T, want wire.PresenceStatus, activity string) {
	t.Helper()
	meshtest.Eventually(t, 20*time.Second, "the agent "+string(want), func() bool {
		for _, p := range a.roster.Peers() {
			if p.Key == a.Principal().String() && p.Presence != nil && p.Presence.Status == want && strings.Contains(p.Presence.Activity, activity) {
				return true
			}
		}
		return false
	})
}

// TestHookCommand: `cotal hook prompt` finds the agent's cotal mcp by its principal and prints
// Claude Code's hook output with what arrived as additionalContext; `cotal hook stop PAYLOAD`, as
// Codex's notify runs it, makes a working agent idle and a PAYLOAD that is not JSON is refused;
// tool-done and turn-end print what Codex's PostToolUse and Stop hooks read; an
// unknown event or principal is a usage error; an agent not running is a note, never a failure of
// the harness.
func TestHookCommand(t *testing.T) {
	meshtest.Long(t, "many agents and hook calls")
	ctx := t.Context()
	agent := newHookedAgent(t, "hooked")
	inbox, start := agent.inbox, agent.start
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
	if err := agent.SetStatus(ctx, wire.StatusWorking, "on it"); err != nil {
		t.Fatal(err)
	}
	agent.status(t, wire.StatusWorking, "")
	if code, out, stderr := hook("", "stop", `{"type":"agent-turn-complete","turn-id":"1"}`, "--agent", agent.Principal().String()); code != exit.OK || out != "" || stderr != "" {
		t.Fatalf("hook stop with a payload argument: exit %d %q %s", code, out, stderr)
	}
	agent.status(t, wire.StatusIdle, "")

	// Codex's hooks: after a tool, a DM is handed in as PostToolUse context; at the turn's end,
	// what waits becomes a Stop hook's block, so Codex goes on with it; with nothing waiting the
	// turn's end prints nothing and the agent is idle.
	me := agent.Principal().String()
	if code, _, stderr := hook(`{"prompt":"go on"}`, "prompt", "--agent", me); code != exit.OK {
		t.Fatalf("hook prompt: exit %d %s", code, stderr)
	}
	agent.status(t, wire.StatusWorking, "")
	for i, text := range []string{"the build is red", "and the deploy is stuck"} {
		if _, err := sender.DirectMessage(ctx, agent.Principal(), []wire.Part{wire.TextPart(text)}); err != nil {
			t.Fatal(err)
		}
		meshtest.Eventually(t, 10*time.Second, "the DM in the agent's inbox", func() bool { return inbox.Unread() == 1 })
		if i == 0 {
			code, out, stderr := hook(`{"hook_event_name":"PostToolUse","tool_name":"Bash"}`, "tool-done", "--agent", me)
			var codex struct {
				HookSpecificOutput struct{ HookEventName, AdditionalContext string }
			}
			if code != exit.OK || json.Unmarshal([]byte(out), &codex) != nil || codex.HookSpecificOutput.HookEventName != "PostToolUse" ||
				!strings.Contains(codex.HookSpecificOutput.AdditionalContext, text) {
				t.Fatalf("hook tool-done: exit %d %q %s", code, out, stderr)
			}
			continue
		}
		code, out, stderr := hook(`{"hook_event_name":"Stop","stop_hook_active":false}`, "turn-end", "--agent", me)
		var stop struct{ Decision, Reason string }
		if code != exit.OK || json.Unmarshal([]byte(out), &stop) != nil || stop.Decision != "block" || !strings.Contains(stop.Reason, text) {
			t.Fatalf("hook turn-end: exit %d %q %s", code, out, stderr)
		}
	}
	if code, out, stderr := hook(`{"hook_event_name":"Stop","stop_hook_active":true}`, "turn-end", "--agent", me); code != exit.OK || out != "" {
		t.Fatalf("hook turn-end with nothing waiting: exit %d %q %s", code, out, stderr)
	}
	agent.status(t, wire.StatusIdle, "")
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
