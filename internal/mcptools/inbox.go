// Package mcptools serves an agent's mesh membership as MCP tools (`cotal mcp`): the tool set an
// LLM coding agent uses to see its peers, read what arrived, talk on the mesh and, with the spawn
// capability, start and stop agents through the space's manager, all under the one credential
// the server holds. Identity is never a tool argument.
package mcptools

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/seen"
	"github.com/gocotal/cotal/wire"
)

// errNotShown asks the client to redeliver a durable message the model has not seen yet.
var errNotShown = errors.New("not yet shown to the model")

// Inbox buffers what arrives between tool calls, up to a bound, as the attention state machine
// (attention.go) decides. A durable message (a DM or an anycast task) is acknowledged when a tool
// result shows it, and not before: one never shown is delivered again after the ack wait, to this
// process or the agent's next, and one shown is never shown again. A live channel message has
// nothing to acknowledge; one that does not fit is counted as dropped.
type Inbox struct {
	limit int
	mu    sync.Mutex
	// onArrival, when set, is called (without the lock) with each arrival that wakes the agent;
	// guarded by mu, since arrivals may come before it is set.
	onArrival func(d *cotal.Delivery)
	att       attention
	items     []item
	pending   map[string]bool // durable ids buffered, not yet shown
	shown     *seen.Set       // durable ids shown: a redelivery of one is acknowledged, not shown
	dropped   int
	// woken counts the arrivals that woke the agent or wake it once its turn ends, ever: a wake
	// with nothing new since the last is not repeated at a turn's end.
	woken uint64
}

// item is one buffered delivery; held ones are for recall or pulling only, shown last. wakes
// marks one that woke the agent, or wakes it once its turn ends; urgent, one that woke it when it
// came, working or not (a DM, a task, a mention); told, one a read named as too large to show,
// which wakes no more.
type item struct {
	d      *cotal.Delivery
	held   bool
	wakes  bool
	urgent bool
	told   bool
}

// NewInbox returns an inbox that holds up to limit messages, attention open.
func NewInbox(limit int) *Inbox {
	return &Inbox{limit: limit, pending: map[string]bool{}, shown: seen.New(maxShown),
		att: attention{mode: wire.AttentionOpen, channels: map[string]wire.ChannelMode{}}}
}

// setOnArrival sets what is called with each arrival that wakes the agent.
func (b *Inbox) setOnArrival(fn func(d *cotal.Delivery)) {
	b.mu.Lock()
	b.onArrival = fn
	b.mu.Unlock()
}

// SetSelf names the agent to its mentions: a mention carries a lowercased name, and an agent's
// name is its actor unless its card says otherwise (`cotal mcp` never does).
func (b *Inbox) SetSelf(p wire.Principal) {
	b.mu.Lock()
	b.att.names = []string{strings.ToLower(p.Actor())}
	b.mu.Unlock()
}

// SetAttention applies the agent's attention to what arrives from now on.
func (b *Inbox) SetAttention(mode wire.AttentionMode) {
	b.mu.Lock()
	b.att.mode = mode
	b.mu.Unlock()
}

// SetChannelMode applies a channel's mode (none: normal) to what arrives from now on.
func (b *Inbox) SetChannelMode(channel string, mode wire.ChannelMode) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if mode == "" {
		delete(b.att.channels, channel)
		return
	}
	b.att.channels[channel] = mode
}

// SetWorking says whether the agent is working: ambient chatter then waits for it to be idle.
func (b *Inbox) SetWorking(working bool) {
	b.mu.Lock()
	b.att.working = working
	b.mu.Unlock()
}

// Working reports whether the agent last said it is working.
func (b *Inbox) Working() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.att.working
}

func durable(d *cotal.Delivery) bool {
	return d.Kind != wire.DeliveryChannel && d.Message.ID != ""
}

// Offer is the client's handler: it buffers d as attention decides and decides its
// acknowledgement.
func (b *Inbox) Offer(_ context.Context, d *cotal.Delivery) error {
	b.mu.Lock()
	id := d.Message.ID
	if durable(d) {
		switch {
		case b.shown.Has(id):
			b.mu.Unlock()
			return nil // shown: acknowledge this redelivery
		case b.pending[id]:
			// Redelivered after the ack wait, still unshown: the newest delivery is the one to
			// acknowledge.
			if i := slices.IndexFunc(b.items, func(it item) bool { return it.d.Message.ID == id }); i >= 0 {
				b.items[i].d = d
			}
			b.mu.Unlock()
			return cotal.ErrDefer
		}
	}
	a := b.att.decide(d)
	if a.drop {
		b.mu.Unlock()
		return nil // a muted channel's: gone for good
	}
	if len(b.items) >= b.limit && !b.evictHeld() {
		b.dropped++
		b.mu.Unlock()
		if durable(d) {
			return errNotShown // it comes back once there is room
		}
		return nil
	}
	b.items = append(b.items, item{d: d, held: a.held, wakes: a.wake || a.later, urgent: a.wake})
	if a.wake || a.later {
		b.woken++
	}
	if durable(d) {
		b.pending[id] = true
	}
	arrived := b.onArrival
	b.mu.Unlock()
	if a.wake && arrived != nil {
		arrived(d)
	}
	if durable(d) {
		return cotal.ErrDefer // acknowledged when shown (read)
	}
	return nil
}

// evictHeld makes room by dropping the oldest held channel message: pulling-only items go before
// anything that woke the agent. It reports whether it made room.
func (b *Inbox) evictHeld() bool {
	i := slices.IndexFunc(b.items, func(it item) bool { return it.held && !durable(it.d) })
	if i < 0 {
		return false
	}
	b.items = slices.Delete(b.items, i, i+1)
	b.dropped++
	return true
}

// Window is what one read of the inbox returned.
type Window struct {
	// Messages are the deliveries shown, in order: direct ones, then live channel messages, then
	// replayed history, then what was held (for recall under focus, or pulling only from a quiet
	// channel); Held marks the last kind.
	Messages []*cotal.Delivery
	Held     []bool
	// More counts the messages that did not fit this read's budget: they stay for the next.
	More int
	// TooLarge names (up to three ids) the messages too large for any read; they stay buffered.
	TooLarge []string
	// Dropped counts the messages that did not fit the inbox since the last read; a durable one
	// among them is redelivered.
	Dropped int
}

// rank orders the window: direct first, then live channel, then history, then held.
func (it item) rank() int {
	switch {
	case it.held:
		return 3
	case it.d.Kind != wire.DeliveryChannel:
		return 0
	case it.d.Historical:
		return 2
	}
	return 1
}

// maxTooLarge bounds the ids a window names as too large.
const maxTooLarge = 3

// Read returns what fits budget, measured by size (a message's share of the reply), in rank order.
// Unless peek, it removes what it returned and acknowledges the durable messages among them,
// remembering them as shown, so a redelivery is acknowledged rather than shown again. What did not
// fit stays, in order, for the next read.
func (b *Inbox) Read(peek bool, budget int, size func(*cotal.Delivery) int) Window {
	return b.read(peek, budget, size, true)
}

// read is Read, leaving out what is held unless held.
func (b *Inbox) read(peek bool, budget int, size func(*cotal.Delivery) int, held bool) Window {
	b.mu.Lock()
	defer b.mu.Unlock()
	order := slices.DeleteFunc(slices.Clone(b.items), func(it item) bool { return it.held && !held })
	slices.SortStableFunc(order, func(x, y item) int { return cmp.Compare(x.rank(), y.rank()) })
	var w Window
	taken, told := map[*cotal.Delivery]bool{}, map[*cotal.Delivery]bool{}
	total, full := 0, false
	for _, it := range order {
		n := size(it.d)
		switch {
		case n > budget:
			if len(w.TooLarge) < maxTooLarge {
				w.TooLarge = append(w.TooLarge, it.d.Message.ID)
			}
			told[it.d] = true
			continue
		case full || total+n > budget:
			full = true // keep the order: nothing later jumps ahead of what did not fit
			w.More++
			continue
		}
		total += n
		w.Messages = append(w.Messages, it.d)
		w.Held = append(w.Held, it.held)
		taken[it.d] = true
	}
	w.Dropped = b.dropped
	if peek {
		return w
	}
	b.items = slices.DeleteFunc(b.items, func(it item) bool { return taken[it.d] })
	for i := range b.items {
		if told[b.items[i].d] {
			b.items[i].told = true // named to the model: it wakes no more
		}
	}
	for _, d := range w.Messages {
		if durable(d) {
			delete(b.pending, d.Message.ID)
			b.shown.Add(d.Message.ID)
			// An acknowledgement that is lost leaves a redelivery, which shown acknowledges.
			_ = d.Ack()
		}
	}
	b.dropped = 0
	return w
}

// maxShown bounds the shown ids remembered: a redelivery only follows an acknowledgement that was
// lost, soon after it.
const maxShown = 4096

// Take is Read for a harness's turn boundary: what is held (for recall under focus, or pulling
// only from a quiet channel) is never handed in this way, and stays for cotal_inbox.
func (b *Inbox) Take(budget int, size func(*cotal.Delivery) int) Window {
	return b.read(false, budget, size, false)
}

// Waking counts the buffered messages a wake is about: those that woke the agent, or wake it once
// its turn ends, and that no read named as too large to show. It also returns how many such
// arrivals there have been, ever.
func (b *Inbox) Waking() (n int, ever uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, it := range b.items {
		if it.wakes && !it.told {
			n++
		}
	}
	return n, b.woken
}

// Waiting counts the waking messages a turn's hand-in takes: all but what is held for
// cotal_inbox.
func (b *Inbox) Waiting() int { return b.handable(func(it item) bool { return it.wakes }) }

// Urgent counts the waiting messages that reach the agent even while it works: what woke it when
// it came (a DM, a task, a mention), not chatter that waits for its turn to end.
func (b *Inbox) Urgent() int { return b.handable(func(it item) bool { return it.urgent }) }

// handable counts the buffered messages that are of kind and that a hand-in takes.
func (b *Inbox) handable(of func(item) bool) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, it := range b.items {
		if of(it) && !it.told && !it.held {
			n++
		}
	}
	return n
}

// Latest returns the latest buffered arrival that wakes the agent, nil for none.
func (b *Inbox) Latest() *cotal.Delivery {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := len(b.items) - 1; i >= 0; i-- {
		if it := b.items[i]; it.wakes && !it.told {
			return it.d
		}
	}
	return nil
}

// Mentioned reports whether d mentions the agent.
func (b *Inbox) Mentioned(d *cotal.Delivery) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.att.mentioned(d)
}

// Unread counts the buffered messages.
func (b *Inbox) Unread() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.items)
}
