package mcptools_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/mcptools"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// TestHooks: the harness's turn boundaries drive the agent. A prompt makes it working and hands in
// what arrived (so cotal_inbox no longer has it, the DM acknowledged); a tool names itself; a
// notification makes it waiting on its person; a stop makes it idle; under focus the held
// chatter is not handed in but stays for cotal_inbox; an unknown event is refused by name.
func TestHooks(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	tools := newAgent(t, m, ledger.Request{Name: "claude", Subscribe: []string{"general"}, AllowPublish: []string{"general"}}, nil, "general")
	path := filepath.Join(t.TempDir(), "hook.sock")
	closer, err := tools.tools.ServeHooks(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	ask := func(event string, payload any) *mcptools.HookReply {
		t.Helper()
		raw, _ := json.Marshal(payload)
		reply, err := mcptools.AskHook(ctx, path, mcptools.HookRequest{Event: event, Payload: raw})
		if err != nil {
			t.Fatalf("hook %s: %v", event, err)
		}
		return reply
	}
	status := func(want wire.PresenceStatus, activity string) {
		t.Helper()
		meshtest.Eventually(t, wait, "claude "+string(want), func() bool {
			for _, p := range tools.roster.Peers() {
				if p.Key == tools.c.Principal().String() && p.Presence != nil && p.Presence.Status == want && strings.Contains(p.Presence.Activity, activity) {
					return true
				}
			}
			return false
		})
	}
	bob := connect(t, m, ledger.Request{Name: "bob", Subscribe: []string{"general"}, AllowPublish: []string{"general"}}, (&peer{}).handle, "general")

	ask(manager.HookSessionStart, map[string]string{"hook_event_name": "SessionStart"})
	status(wire.StatusIdle, "")
	if _, err := bob.DirectMessage(ctx, tools.c.Principal(), []wire.Part{wire.TextPart("please review PR 7")}); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, wait, "the DM in the inbox", func() bool { return tools.inbox.Unread() == 1 })
	reply := ask(manager.HookPrompt, map[string]string{"prompt": "carry on"})
	if !strings.Contains(reply.Context, "please review PR 7") || !strings.Contains(reply.Context, "not instructions") {
		t.Fatalf("the prompt handed in %q", reply.Context)
	}
	status(wire.StatusWorking, "")
	if got := tools.inbox.Unread(); got != 0 {
		t.Errorf("the handed-in DM is still in the inbox: %d unread", got)
	}
	ask(manager.HookTool, map[string]string{"tool_name": "Bash"})
	status(wire.StatusWorking, "running Bash")
	ask(manager.HookNotification, map[string]string{"message": "Claude needs your permission to use Bash"})
	status(wire.StatusWaiting, "needs your permission")
	ask(manager.HookStop, nil)
	status(wire.StatusIdle, "")

	tools.inbox.SetAttention(wire.AttentionFocus)
	if _, err := bob.Post(ctx, "general", []wire.Part{wire.TextPart("lunch anyone?")}); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, wait, "the chatter held", func() bool { return tools.inbox.Unread() == 1 })
	if reply := ask(manager.HookPrompt, nil); reply.Context != "" {
		t.Errorf("focus handed in held chatter: %q", reply.Context)
	}
	if tools.inbox.Unread() != 1 {
		t.Error("the held chatter left the inbox")
	}
	if _, err := mcptools.AskHook(ctx, path, mcptools.HookRequest{Event: "frobnicate"}); err == nil || !strings.Contains(err.Error(), "frobnicate") {
		t.Errorf("an unknown event: %v", err)
	}
}
