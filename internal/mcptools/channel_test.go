package mcptools_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/hooksock"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/mcptools"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// channelEvent is one channel notification as Claude Code receives it.
type channelEvent struct {
	Content string            `json:"content"`
	Meta    map[string]string `json:"meta"`
}

// channelSpy is the client's end of a transport that takes Claude Code's channel notifications
// off the stream, as Claude Code does, and hands the rest to the SDK client.
type channelSpy struct {
	mcp.Transport
	events chan channelEvent
}

func (s channelSpy) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := s.Transport.Connect(ctx)
	return spyConn{conn, s.events}, err
}

type spyConn struct {
	mcp.Connection
	events chan channelEvent
}

func (c spyConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		req, ok := msg.(*jsonrpc.Request)
		if err != nil || !ok || req.Method != mcptools.ClaudeChannelMethod {
			return msg, err
		}
		var ev channelEvent
		if json.Unmarshal(req.Params, &ev) == nil {
			c.events <- ev
		}
	}
}

// TestClaudeChannel: with the channel on, the server declares Claude Code's capability and
// pushes a nudge when an arrival should wake the agent: a DM at once, naming its sender and never
// carrying its text; the nudge repeats while the DM waits unread and stops once cotal_inbox read
// it; ambient chatter during a turn waits for the turn's end and wakes the session then, named,
// and a second turn end with nothing new does not nudge again, nor does chatter under dnd. Without
// the channel nothing is declared.
func TestClaudeChannel(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	req := ledger.Request{Name: "claude", Subscribe: []string{"general"}, AllowPublish: []string{"general"}}
	a := newAgent(t, m, req, []mcptools.Option{mcptools.WithClaudeChannel()}, "general")
	a.tools.SetNudgeBackoff(300*time.Millisecond, 300*time.Millisecond)
	events := make(chan channelEvent, 16)
	cs := a.session(t, nil, func(tr mcp.Transport) mcp.Transport { return channelSpy{tr, events} })
	if _, ok := cs.InitializeResult().Capabilities.Experimental[mcptools.ClaudeChannelCapability]; !ok {
		t.Fatalf("the server did not declare %s: %+v", mcptools.ClaudeChannelCapability, cs.InitializeResult().Capabilities)
	}
	next := func(what string) channelEvent {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-time.After(wait):
			t.Fatalf("no nudge for %s", what)
			return channelEvent{}
		}
	}
	quiet := func(what string, d time.Duration) {
		t.Helper()
		select {
		case ev := <-events:
			t.Fatalf("%s: a nudge came: %+v", what, ev)
		case <-time.After(d):
		}
	}
	bob := connect(t, m, ledger.Request{Name: "bob", Subscribe: []string{"general"}, AllowPublish: []string{"general"}}, (&peer{}).handle, "general")

	if _, err := bob.DirectMessage(ctx, a.c.Principal(), []wire.Part{wire.TextPart("secret plan: ship friday")}); err != nil {
		t.Fatal(err)
	}
	ev := next("a DM")
	if ev.Meta["kind"] != "dm" || ev.Meta["from_id"] != bob.Principal().String() || ev.Meta["waiting"] != "1" || ev.Meta["from"] != "" ||
		!strings.Contains(ev.Content, "cotal_inbox") || strings.Contains(ev.Content, "secret plan") {
		t.Fatalf("the DM's nudge = %+v", ev)
	}
	if again := next("the unread DM, again"); again.Meta["from_id"] != bob.Principal().String() {
		t.Fatalf("the repeat = %+v", again)
	}
	if got := call(t, cs, "cotal_inbox", nil, false); !strings.Contains(got, "secret plan") {
		t.Fatalf("the inbox lost the DM: %s", got)
	}
	for len(events) > 0 { // a repeat may have crossed the read
		<-events
	}
	quiet("the DM was read", time.Second)

	path := filepath.Join(t.TempDir(), "hook.sock")
	closer, err := a.tools.ServeHooks(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	hook := func(event string) {
		t.Helper()
		if _, err := hooksock.Ask(ctx, path, hooksock.Request{Event: event}); err != nil {
			t.Fatalf("hook %s: %v", event, err)
		}
	}
	hook(manager.HookPrompt) // a turn begins: ambient waits for its end
	if _, err := bob.Post(ctx, "general", []wire.Part{wire.TextPart("lunch?")}); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, wait, "the post in the inbox", func() bool { return a.inbox.Waiting() == 1 })
	quiet("ambient during a turn", 500*time.Millisecond)
	hook(manager.HookStop)
	if ev := next("ambient at the turn's end"); ev.Meta["waiting"] != "1" || ev.Meta["kind"] != "message" || ev.Meta["channel"] != "general" {
		t.Fatalf("the turn-end nudge = %+v", ev)
	}
	hook(manager.HookStop)                                            // nothing new since: no second nudge
	quiet("a second turn end with nothing new", 150*time.Millisecond) // shorter than the repeat's 300 ms
	call(t, cs, "cotal_inbox", nil, false)

	if _, err := bob.Post(ctx, "general", []wire.Part{wire.TextPart("@claude look")}, cotal.Mentions("claude")); err != nil {
		t.Fatal(err)
	}
	if ev := next("a mention"); ev.Meta["mentioned"] != "true" || ev.Meta["channel"] != "general" {
		t.Fatalf("the mention's nudge = %+v", ev)
	}

	// Under dnd, chatter during a turn does not wake the session when it ends.
	call(t, cs, "cotal_inbox", nil, false)
	call(t, cs, "cotal_status", map[string]any{"attention": "dnd"}, false)
	hook(manager.HookPrompt)
	if _, err := bob.Post(ctx, "general", []wire.Part{wire.TextPart("coffee?")}); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, wait, "the post in the inbox", func() bool { return a.inbox.Unread() == 1 })
	hook(manager.HookStop)
	quiet("ambient under dnd at the turn's end", 500*time.Millisecond)

	plain, _ := sessionAs(t, m, ledger.Request{Name: "codex", Subscribe: []string{"general"}, AllowPublish: []string{"general"}}, "general")
	if _, ok := plain.InitializeResult().Capabilities.Experimental[mcptools.ClaudeChannelCapability]; ok {
		t.Error("a server without the channel declared it")
	}
}
