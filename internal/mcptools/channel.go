package mcptools

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/wire"
)

// Claude Code's channels: an MCP server that declares the experimental capability may push
// notifications into the session, and one that arrives while the session is idle starts a turn.
// `cotal mcp --claude-channel` uses it to wake the agent when the attention machine says so. A
// wake is a nudge, never the message itself: it names what waits and who sent it, and the model
// reads the messages with cotal_inbox or has them handed in by the prompt hook, the only places
// a durable message is acknowledged. A nudge has no receipt, so one whose messages are still
// unread is sent again on a backoff.
const (
	// ClaudeChannelCapability is the experimental server capability Claude Code looks for.
	ClaudeChannelCapability = "claude/channel"
	// ClaudeChannelMethod is the notification that pushes an event into the session.
	ClaudeChannelMethod = "notifications/claude/channel"
)

// channelParams are a channel notification's parameters: the text the model sees, and
// attributes Claude Code renders on the event's tag (string keys of [a-z_], string values).
type channelParams struct {
	Content string            `json:"content"`
	Meta    map[string]string `json:"meta,omitempty"`
}

// nudgeBackoff spaces the repeats of a nudge whose messages are still unread; after the last the
// messages wait for the next turn or wake.
var nudgeBackoff = []time.Duration{30 * time.Second, 2 * time.Minute, 8 * time.Minute}

// pusher sends channel nudges on the session's connection.
type pusher struct {
	inbox *Inbox
	// backoff spaces the repeats (nudgeBackoff, shortened by tests).
	backoff []time.Duration
	// wake carries a nudge's request: true for a new arrival.
	wake chan bool

	mu sync.Mutex
	// next is the connection last connected; conn is it once its client has initialized (nothing
	// is pushed before the handshake ends), nil before.
	next, conn mcp.Connection
}

func newPusher(inbox *Inbox) *pusher {
	return &pusher{inbox: inbox, backoff: nudgeBackoff, wake: make(chan bool, 1)}
}

// nudge asks for a nudge: for a new arrival (fresh) at once, otherwise (a turn's end, a client
// ready) only if something woke the agent since the last one. It never blocks: a request already
// queued covers this one, as the wake count tells a fresh arrival apart anyway.
func (p *pusher) nudge(fresh bool) {
	select {
	case p.wake <- fresh:
	default:
	}
}

// transport wraps t so the pusher writes on the connection the server runs on.
func (p *pusher) transport(t mcp.Transport) mcp.Transport { return pushTransport{t, p} }

// pushTransport is a transport whose connection the pusher shares, once initialized.
type pushTransport struct {
	mcp.Transport
	p *pusher
}

// Connect connects the wrapped transport and keeps its connection for the pusher.
func (t pushTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err == nil {
		t.p.mu.Lock()
		t.p.next, t.p.conn = conn, nil
		t.p.mu.Unlock()
	}
	return conn, err
}

// ready marks the last connection ready for nudges once its client has sent anything after the
// initialize request (the initialized notification, or any request of a protocol without the
// handshake), and nudges at once if messages wait.
func (p *pusher) ready(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "initialize" {
			p.mu.Lock()
			first := p.conn == nil && p.next != nil
			p.conn = p.next
			p.mu.Unlock()
			if n, _ := p.inbox.Waking(); first && n > 0 {
				p.nudge(false)
			}
		}
		return next(ctx, method, req)
	}
}

// run sends nudges until ctx ends: at once for a new arrival, and for a turn's end
// when something woke the agent since the last nudge; then again on the backoff while what woke
// it waits unread.
func (p *pusher) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	repeat := len(p.backoff)
	var sent uint64 // the inbox's wake count at the last nudge
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case fresh := <-p.wake:
			if _, ever := p.inbox.Waking(); !fresh && ever == sent {
				continue // nothing new since the last nudge: its repeats cover it
			}
			sent = p.send(ctx)
			repeat = 0
		case <-timer.C:
			if n, _ := p.inbox.Waking(); n == 0 {
				repeat = len(p.backoff)
				continue
			}
			sent = p.send(ctx)
			repeat++
		}
		if repeat < len(p.backoff) {
			timer.Reset(p.backoff[repeat])
		}
	}
}

// send writes one nudge, naming the latest arrival still waiting, and returns the inbox's wake
// count it covered.
func (p *pusher) send(ctx context.Context) uint64 {
	p.mu.Lock()
	conn := p.conn
	p.mu.Unlock()
	n, ever := p.inbox.Waking()
	if conn == nil || n == 0 {
		return ever // nothing to say, or no one initialized to say it to: the inbox keeps it
	}
	d := p.inbox.Latest()                                                       // the arrival to name: the latest still waiting, whatever woke this nudge
	raw, _ := json.Marshal(nudgeParams(d, d != nil && p.inbox.Mentioned(d), n)) // strings always encode
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = conn.Write(wctx, &jsonrpc.Request{Method: ClaudeChannelMethod, Params: raw}) // advisory: a missed nudge is repeated, and the inbox keeps the messages
	return ever
}

// nudgeParams describes what waits: n messages, the latest d among them (mentioning the agent
// when mentioned). Peer text is never in
// it, only the sender's validated identity and where the message came.
func nudgeParams(d *cotal.Delivery, mentioned bool, n int) channelParams {
	meta := map[string]string{"waiting": strconv.Itoa(n)}
	what := "messages are waiting"
	if n == 1 {
		what = "a message is waiting"
	}
	if d != nil {
		meta["from_id"] = d.Sender.String() // from the subject; a display name is the peer's to choose
		switch d.Kind {
		case wire.DeliveryDM:
			meta["kind"] = "dm"
			what = "a direct message from " + d.Sender.String()
		case wire.DeliveryAnycast:
			// The role as the subject carries it: a token, whatever the payload spelled.
			role := wire.Token(d.Message.ToService)
			meta["kind"], meta["to_role"] = "task", role
			what = "a task for role " + role + " from " + d.Sender.String()
		default:
			meta["kind"], meta["channel"] = "message", d.Channel
			what = "a message on #" + d.Channel + " from " + d.Sender.String()
			if mentioned {
				meta["mentioned"] = "true"
				what = "a mention of you on #" + d.Channel + " from " + d.Sender.String()
			}
		}
	}
	return channelParams{
		Content: fmt.Sprintf("Cotal: %s (%d waiting in all). Call cotal_inbox to read them.", what, n),
		Meta:    meta,
	}
}
