package mcptools

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/hooksock"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/termsafe"
	"github.com/gocotal/cotal/wire"
)

// Harness hooks (`cotal hook`): a harness calls a command at its turn boundaries, and the command
// asks the agent's `cotal mcp` over a unix socket of the user's own, so the agent's status follows
// what the harness does (working while a prompt runs, waiting on a permission prompt, idle when
// the turn stops) and the messages that arrived between turns are handed in at the next one.

// hookWait is how long one wait hook waits for an arrival that should wake the agent; the
// harness asks again.
const hookWait = 8 * time.Second

// ServeHooks answers the agent's hooks on the socket at path until ctx ends or the listener is
// closed. A socket another live `cotal mcp` answers on is left to it (an error); a stale one is
// replaced.
func (t *Tools) ServeHooks(ctx context.Context, path string) (io.Closer, error) {
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("another cotal mcp of %s answers hooks at %s", t.c.Principal(), path)
	}
	_ = os.Remove(path) // a stale socket of an earlier run
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go t.serveHook(ctx, conn)
		}
	}()
	return ln, nil
}

// serveHook answers one request on conn.
func (t *Tools) serveHook(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(hooksock.Deadline))
	line, err := bufio.NewReader(io.LimitReader(conn, hooksock.MaxRequest)).ReadBytes('\n')
	var reply hooksock.Reply
	var req hooksock.Request
	switch {
	case err != nil && !errors.Is(err, io.EOF):
		reply.Error = "read: " + err.Error()
	case json.Unmarshal(line, &req) != nil:
		reply.Error = "the request is not JSON"
	default:
		hctx, cancel := context.WithTimeout(ctx, hooksock.Deadline)
		reply.Context, err = t.hook(hctx, req)
		cancel()
		if err != nil {
			reply.Error = err.Error()
		}
	}
	// Unescaped HTML: a body full of < and > must not grow sixfold past what the client reads.
	enc := json.NewEncoder(conn)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(reply) // the harness went away; what it did not read stays shown
}

// notification is the part of a harness's notification hook input the agent shows its peers.
type notification struct {
	Message string `json:"message"`
}

// toolUse is the part of a harness's tool hook input the agent shows its peers.
type toolUse struct {
	ToolName string `json:"tool_name"`
}

// hook applies one event to the agent's presence and inbox.
func (t *Tools) hook(ctx context.Context, req hooksock.Request) (string, error) {
	switch req.Event {
	case manager.HookSessionStart:
		t.inbox.SetAttention(wire.AttentionOpen)
		if err := t.c.SetAttention(ctx, wire.AttentionOpen); err != nil {
			return "", err
		}
		return t.handIn(), t.setStatus(ctx, wire.StatusIdle, "")
	case manager.HookPrompt:
		return t.handIn(), t.setStatus(ctx, wire.StatusWorking, "")
	case manager.HookTool:
		var tu toolUse
		_ = json.Unmarshal(req.Payload, &tu) // an input it cannot read still means working
		activity := ""
		if tu.ToolName != "" {
			activity = "running " + termsafe.Sanitize(tu.ToolName)
		}
		return "", t.setStatus(ctx, wire.StatusWorking, activity)
	case manager.HookNotification:
		var n notification
		_ = json.Unmarshal(req.Payload, &n)
		what := termsafe.Sanitize(n.Message)
		if what == "" {
			what = "waiting for its person"
		}
		return "", t.setStatus(ctx, wire.StatusWaiting, termsafe.Cut(what, 200))
	case manager.HookToolDone:
		if t.inbox.Urgent() == 0 {
			return "", nil // chatter waits for the turn's end
		}
		return t.handIn(), nil
	case manager.HookTurnEnd:
		if t.inbox.Waiting() > 0 {
			return t.handIn(), nil // the harness goes on with them: still working
		}
		fallthrough
	case manager.HookStop:
		if err := t.setStatus(ctx, wire.StatusIdle, ""); err != nil {
			return "", err
		}
		if t.push != nil {
			t.push.nudge(false) // what waited for the turn to end wakes the session now, if anything new did
		}
		return "", nil
	case manager.HookSessionEnd:
		return "", t.setStatus(ctx, wire.StatusIdle, "")
	case manager.HookWait:
		return t.await(ctx), nil
	case manager.HookIdleWait:
		return t.awaitIdle(ctx), nil
	case manager.HookTurn:
		var turn manager.PendingTurn
		if err := json.Unmarshal(req.Payload, &turn); err != nil {
			return "", fmt.Errorf("the turn: %w", err)
		}
		d, conclaves, err := t.turnDelivery(turn)
		if err != nil {
			return "", err
		}
		// The conclaves come first: the agent woken by the turn speaks in them.
		err = t.conclaves.Sync(ctx, t.c, conclaves)
		_ = t.inbox.Offer(ctx, d) // it is the manager's to keep: nothing to acknowledge
		return "", err
	case manager.HookConclaves:
		var in manager.SeatConclaves
		if err := json.Unmarshal(req.Payload, &in); err != nil {
			return "", fmt.Errorf("the conclaves: %w", err)
		}
		return "", t.conclaves.Sync(ctx, t.c, in.Channels)
	}
	return "", fmt.Errorf("unknown hook event %q: one of %s", req.Event, strings.Join(manager.HookEvents, ", "))
}

// setStatus writes the status to presence and tells the inbox whether the agent works.
func (t *Tools) setStatus(ctx context.Context, st wire.PresenceStatus, activity string) error {
	t.inbox.SetWorking(st == wire.StatusWorking)
	return t.c.SetStatus(ctx, st, activity)
}

// handIn takes what waits in the inbox, but what is held for recall, up to hooksock.Window, as context
// for the model; what it takes is shown, so its durable messages are acknowledged.
func (t *Tools) handIn() string {
	size := func(d *cotal.Delivery) int { return len(inboxLine(d, false)) }
	got := t.inbox.Take(hooksock.Window, size)
	var b strings.Builder
	var peers []*cotal.Delivery
	for _, d := range got.Messages {
		if t.isTurn(d) {
			// The manager's own word, not a peer's: handed in as what it is.
			b.WriteString("From your manager: " + d.Message.Parts[0].Text + "\n")
			continue
		}
		peers = append(peers, d)
	}
	if len(peers) > 0 {
		b.WriteString("Messages from the Cotal mesh since your last turn. " + peerDataNote + "\n")
		for _, d := range peers {
			b.WriteString(inboxLine(d, false))
		}
	}
	if got.More > 0 || len(got.TooLarge) > 0 {
		b.WriteString("More messages from the Cotal mesh are waiting, too large to hand in here: call cotal_inbox.\n")
	}
	return b.String()
}

// await waits up to hookWait for what should wake the agent (a DM or task, a mention, chatter
// once the agent is idle) and hands it in; "" when nothing came. It is a harness's push where the
// harness can start a turn itself but has no channel for a server to wake it (OpenCode's plugin).
func (t *Tools) await(ctx context.Context) string {
	if !t.waitFor(ctx, func() bool { return t.inbox.Waiting() > 0 }) {
		return ""
	}
	return t.handIn()
}

// waitFor waits up to hookWait for ready, asked now and at each arrival that wakes the agent,
// and reports whether it held.
func (t *Tools) waitFor(ctx context.Context, ready func() bool) bool {
	timer := time.NewTimer(hookWait)
	defer timer.Stop()
	for !ready() {
		select {
		case <-t.arrived:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// WakeLine is what an idle-wait answers, for its asker to type into the agent's terminal: the
// turn it starts has the messages handed in by its prompt hook.
const WakeLine = "New messages from the Cotal mesh: read them and act on them."

// awaitIdle waits up to hookWait, while the agent is idle, for an arrival that should wake it
// and that no earlier idle-wait answered, and returns WakeLine; "" when none came. It hands
// nothing in: it is the push of a harness that has a terminal its manager can type into and no
// other way in while idle (Codex), the prompt that the typing starts handing the messages in.
func (t *Tools) awaitIdle(ctx context.Context) string {
	woken := func() bool {
		_, ever := t.inbox.Waking()
		if t.inbox.Waiting() == 0 || t.inbox.Working() || ever <= t.nudged.Load() {
			return false
		}
		t.nudged.Store(ever) // this arrival has had its wake
		return true
	}
	if !t.waitFor(ctx, woken) {
		return ""
	}
	return WakeLine
}
