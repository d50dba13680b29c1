package mcptools_test

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/hooksock"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/mcptools"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/runhost"
	"github.com/gocotal/cotal/wire"
)

// serveHooks serves a's hooks on a socket of the test's own, closed at its end, and returns the
// socket's path.
func serveHooks(t *testing.T, a *agent) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hook.sock")
	closer, err := a.tools.ServeHooks(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	return path
}

// status waits until a's presence shows want, its activity containing activity.
func (a *agent) status(t *testing.T, want wire.PresenceStatus, activity string) {
	t.Helper()
	meshtest.Eventually(t, wait, a.c.Principal().String()+" "+string(want), func() bool {
		for _, p := range a.roster.Peers() {
			if p.Key == a.c.Principal().String() && p.Presence != nil && p.Presence.Status == want && strings.Contains(p.Presence.Activity, activity) {
				return true
			}
		}
		return false
	})
}

// TestHooks: the harness's turn boundaries drive the agent. A prompt makes it working and hands in
// what arrived (so cotal_inbox no longer has it, the DM acknowledged); a tool names itself; a
// notification makes it waiting on its person; a stop makes it idle; under focus the held
// chatter is not handed in but stays for cotal_inbox; an unknown event is refused by name.
func TestHooks(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	tools := newAgent(t, m, ledger.Request{Name: "claude", Subscribe: []string{"general"}, AllowPublish: []string{"general"}}, nil, "general")
	path := serveHooks(t, tools)
	ask := func(event string, payload any) *hooksock.Reply {
		t.Helper()
		raw, _ := json.Marshal(payload)
		reply, err := hooksock.Ask(ctx, path, hooksock.Request{Event: event, Payload: raw})
		if err != nil {
			t.Fatalf("hook %s: %v", event, err)
		}
		return reply
	}
	status := func(want wire.PresenceStatus, activity string) { t.Helper(); tools.status(t, want, activity) }
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
	if _, err := hooksock.Ask(ctx, path, hooksock.Request{Event: "frobnicate"}); err == nil || !strings.Contains(err.Error(), "frobnicate") {
		t.Errorf("an unknown event: %v", err)
	}
}

// TestHooksMidTurn: the push a harness with hooks but no channel gets (Codex). After a tool, a DM
// that came while the agent worked is handed in, chatter is not (it waits for the turn's end); at
// the turn's end what waits is handed in and the agent stays working, the harness going on with
// it; a turn's end with nothing waiting makes the agent idle.
func TestHooksMidTurn(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	tools := newAgent(t, m, ledger.Request{Name: "codex", Subscribe: []string{"general"}, AllowPublish: []string{"general"}}, nil, "general")
	path := serveHooks(t, tools)
	ask := func(event string) string {
		t.Helper()
		reply, err := hooksock.Ask(ctx, path, hooksock.Request{Event: event})
		if err != nil {
			t.Fatalf("hook %s: %v", event, err)
		}
		return reply.Context
	}
	status := func(want wire.PresenceStatus) { t.Helper(); tools.status(t, want, "") }
	bob := connect(t, m, ledger.Request{Name: "bob", Subscribe: []string{"general"}, AllowPublish: []string{"general"}}, (&peer{}).handle, "general")

	ask(manager.HookSessionStart)
	ask(manager.HookPrompt)
	status(wire.StatusWorking)
	if _, err := bob.Post(ctx, "general", []wire.Part{wire.TextPart("lunch anyone?")}); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, wait, "the chatter in the inbox", func() bool { return tools.inbox.Unread() == 1 })
	if got := ask(manager.HookToolDone); got != "" {
		t.Errorf("chatter interrupted the turn: %q", got)
	}
	if _, err := bob.DirectMessage(ctx, tools.c.Principal(), []wire.Part{wire.TextPart("stop, the build is red")}); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, wait, "the DM in the inbox", func() bool { return tools.inbox.Unread() == 2 })
	got := ask(manager.HookToolDone)
	if !strings.Contains(got, "the build is red") || !strings.Contains(got, "lunch anyone?") {
		t.Fatalf("after the tool, handed in %q", got)
	}
	if strings.Index(got, "the build is red") > strings.Index(got, "lunch anyone?") {
		t.Errorf("the DM was not handed in first: %q", got)
	}
	if tools.inbox.Unread() != 0 {
		t.Errorf("%d left in the inbox after the hand-in", tools.inbox.Unread())
	}

	// The turn would end with chatter waiting: it goes on with it, still working.
	if _, err := bob.Post(ctx, "general", []wire.Part{wire.TextPart("who owns the deploy?")}); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, wait, "the chatter in the inbox", func() bool { return tools.inbox.Unread() == 1 })
	if got := ask(manager.HookTurnEnd); !strings.Contains(got, "who owns the deploy?") {
		t.Fatalf("the turn's end handed in %q", got)
	}
	status(wire.StatusWorking)
	// Nothing waits: the turn ends and the agent is idle.
	if got := ask(manager.HookTurnEnd); got != "" {
		t.Errorf("an empty turn's end handed in %q", got)
	}
	status(wire.StatusIdle)
}

// TestHooksIdleWait: the wait a manager makes for an idle agent it can type into. A DM that comes
// while the agent is idle answers it with the wake line and hands nothing in; the same arrival
// never answers twice, and nothing answers while the agent works.
func TestHooksIdleWait(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	tools := newAgent(t, m, ledger.Request{Name: "codex", Subscribe: []string{"general"}, AllowPublish: []string{"general"}}, nil, "general")
	path := serveHooks(t, tools)
	idleWait := func() <-chan string {
		got := make(chan string, 1)
		go func() {
			reply, err := hooksock.Ask(ctx, path, hooksock.Request{Event: manager.HookIdleWait})
			if err != nil {
				t.Error(err)
			}
			got <- reply.Context
		}()
		return got
	}
	bob := connect(t, m, ledger.Request{Name: "bob", Subscribe: []string{"general"}, AllowPublish: []string{"general"}}, (&peer{}).handle, "general")
	dm := func(text string) {
		t.Helper()
		if _, err := bob.DirectMessage(ctx, tools.c.Principal(), []wire.Part{wire.TextPart(text)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := hooksock.Ask(ctx, path, hooksock.Request{Event: manager.HookSessionStart}); err != nil {
		t.Fatal(err)
	}
	first := idleWait()
	dm("are you there?")
	select {
	case line := <-first:
		if line != mcptools.WakeLine {
			t.Fatalf("an idle agent's DM answered %q", line)
		}
	case <-time.After(wait):
		t.Fatal("a DM to an idle agent did not answer the wait")
	}
	if tools.inbox.Unread() != 1 {
		t.Errorf("the wait handed the DM in: %d unread", tools.inbox.Unread())
	}
	// The same arrival again, then the agent at work with a new one: neither answers.
	second := idleWait()
	if reply, err := hooksock.Ask(ctx, path, hooksock.Request{Event: manager.HookPrompt}); err != nil || !strings.Contains(reply.Context, "are you there?") {
		t.Fatalf("the prompt handed in %v %v", reply, err)
	}
	dm("and now?")
	if line := <-second; line != "" {
		t.Errorf("the wait answered %q for a working agent or a told arrival", line)
	}
}

// TestHooksTurn: a turn the agent's manager tells it of wakes it as a DM does: an idle-wait
// answers with the wake line, and the next prompt hands in the run's request, as the manager's
// word rather than a peer's, with what to do and the value it asks for; the same turn told twice
// is one message.
func TestHooksTurn(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	tools := newAgent(t, m, ledger.Request{Name: "codex"}, nil)
	path := serveHooks(t, tools)
	if _, err := hooksock.Ask(ctx, path, hooksock.Request{Event: manager.HookSessionStart}); err != nil {
		t.Fatal(err)
	}
	woken := make(chan string, 1)
	go func() {
		reply, err := hooksock.Ask(ctx, path, hooksock.Request{Event: manager.HookIdleWait})
		if err != nil {
			t.Error(err)
		}
		woken <- reply.Context
	}()
	payload, _ := json.Marshal(runhost.TurnPayload{Run: "run-1", Step: "/ask:estimate#0", Ask: &runhost.TurnAsk{Schema: json.RawMessage(`{"days":"number"}`), Attempt: 1, Attempts: 2}})
	turn, _ := json.Marshal(manager.PendingTurn{GoalID: "g-1", Payload: string(payload), AcceptedAt: 1, DeadlineAt: time.Now().Add(time.Hour).UnixMilli()})
	for range 2 {
		if _, err := hooksock.Ask(ctx, path, hooksock.Request{Event: manager.HookTurn, Payload: turn}); err != nil {
			t.Fatal(err)
		}
	}
	if line := <-woken; line != mcptools.WakeLine {
		t.Fatalf("a turn did not wake the idle agent: %q", line)
	}
	reply, err := hooksock.Ask(ctx, path, hooksock.Request{Event: manager.HookPrompt})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"From your manager: Workflow run run-1 asks you for a turn: step /ask:estimate#0", `{"days":"number"}`, "cotal_yield", "attempt 1 of 2"} {
		if !strings.Contains(reply.Context, want) {
			t.Errorf("the turn handed in lacks %q:\n%s", want, reply.Context)
		}
	}
	if n := strings.Count(reply.Context, "asks you for a turn"); n != 1 {
		t.Errorf("the turn told twice was handed in %d times", n)
	}
	if _, err := hooksock.Ask(ctx, path, hooksock.Request{Event: manager.HookTurn, Payload: []byte(`not json`)}); err == nil {
		t.Error("a turn whose telling is unreadable was taken")
	}
	// A turn the manager's turn command was asked for carries the asker's words, not a run's.
	plain, _ := json.Marshal(manager.PendingTurn{GoalID: "g-3", Payload: "review the diff", AcceptedAt: 2, DeadlineAt: time.Now().Add(time.Hour).UnixMilli()})
	if _, err := hooksock.Ask(ctx, path, hooksock.Request{Event: manager.HookTurn, Payload: plain}); err != nil {
		t.Fatal(err)
	}
	reply, err = hooksock.Ask(ctx, path, hooksock.Request{Event: manager.HookPrompt})
	if err != nil || !strings.Contains(reply.Context, "From your manager: A turn is asked of you") || !strings.Contains(reply.Context, "review the diff") {
		t.Errorf("a plain turn handed in %q (%v)", reply.Context, err)
	}
}

// TestHooksConclaves: the conclaves the agent's manager tells it of are joined, and left once
// it is told it is no longer in them; a channel the agent joined on its own stays joined, and
// a turn's payload joins the conclaves it carries. A conclave its grant does not let it read is
// refused by the broker, and reported.
func TestHooksConclaves(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	tools := newAgent(t, m, ledger.Request{Name: "codex", Subscribe: []string{"general"}, AllowSubscribe: []string{"general", "conclave.*"},
		AllowPublish: []string{"general", "conclave.r1", "conclave.r2"}}, nil, "general")
	path := serveHooks(t, tools)
	tell := func(channels ...string) error {
		payload, _ := json.Marshal(manager.SeatConclaves{Channels: channels})
		_, err := hooksock.Ask(ctx, path, hooksock.Request{Event: manager.HookConclaves, Payload: payload})
		return err
	}
	joined := func(want ...string) {
		t.Helper()
		if got := tools.c.Channels(); !slices.Equal(got, want) {
			t.Errorf("joined %q, want %q", got, want)
		}
	}
	if err := tell("conclave.r1", "general"); err != nil {
		t.Fatal(err)
	}
	joined("conclave.r1", "general")
	if err := tell(); err != nil {
		t.Fatal(err)
	}
	joined("general")
	payload, _ := json.Marshal(runhost.TurnPayload{Run: "run-1", Step: "/turn:talk#0", Conclaves: []string{"conclave.r2"}})
	turn, _ := json.Marshal(manager.PendingTurn{GoalID: "g-1", Payload: string(payload), AcceptedAt: 1, DeadlineAt: time.Now().Add(time.Hour).UnixMilli()})
	if _, err := hooksock.Ask(ctx, path, hooksock.Request{Event: manager.HookTurn, Payload: turn}); err != nil {
		t.Fatal(err)
	}
	joined("conclave.r2", "general")
	if err := tell("conclave.r2", "secret"); err == nil || !strings.Contains(err.Error(), "secret") {
		t.Errorf("a conclave beyond the grant: %v", err)
	}
	joined("conclave.r2", "general")
}
