// Package mcptools serves an agent's mesh membership as MCP tools (`cotal mcp`): the tool set an
// LLM coding agent uses to see its peers, read what arrived, talk on the mesh and, with the spawn
// capability, start and stop agents through the space's manager, all under the one credential
// the server holds. Identity is never a tool argument.
package mcptools

import (
	"context"
	"errors"
	"sync"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/wire"
)

// errNotShown asks the client to redeliver a durable message the model has not seen yet.
var errNotShown = errors.New("not yet shown to the model")

// Inbox buffers what arrives between tool calls, up to a bound. A durable message (a DM or an
// anycast task) is acknowledged only once a tool result has shown it: until then every delivery
// of it is refused, so the broker redelivers it, after a restart too. A live channel message has
// nothing to acknowledge; one that does not fit is counted as dropped.
type Inbox struct {
	limit int
	// onArrival, when set, is called (without the lock) after a message is buffered.
	onArrival func()

	mu      sync.Mutex
	items   []*cotal.Delivery
	pending map[string]bool // durable ids buffered, not yet shown
	shown   map[string]bool // durable ids shown, waiting for a redelivery to acknowledge
	dropped int
}

// NewInbox returns an inbox that holds up to limit messages.
func NewInbox(limit int) *Inbox {
	return &Inbox{limit: limit, pending: map[string]bool{}, shown: map[string]bool{}}
}

func durable(d *cotal.Delivery) bool {
	return d.Kind != wire.DeliveryChannel && d.Message.ID != ""
}

// Offer is the client's handler: it buffers d and decides its acknowledgement.
func (b *Inbox) Offer(_ context.Context, d *cotal.Delivery) error {
	b.mu.Lock()
	id := d.Message.ID
	if durable(d) {
		switch {
		case b.shown[id]:
			delete(b.shown, id)
			b.mu.Unlock()
			return nil // shown: acknowledge this redelivery
		case b.pending[id]:
			b.mu.Unlock()
			return errNotShown
		}
	}
	if len(b.items) >= b.limit {
		b.dropped++
		b.mu.Unlock()
		if durable(d) {
			return errNotShown // it comes back once there is room
		}
		return nil
	}
	b.items = append(b.items, d)
	if durable(d) {
		b.pending[id] = true
	}
	b.mu.Unlock()
	if b.onArrival != nil {
		b.onArrival()
	}
	if durable(d) {
		return errNotShown
	}
	return nil
}

// Drained is what a read of the inbox returned.
type Drained struct {
	Messages []*cotal.Delivery
	// Dropped counts the messages that did not fit since the last drain; a durable one among them
	// is redelivered.
	Dropped int
}

// Drain returns the buffered messages. Unless peek, it empties the buffer and marks the durable
// messages shown, so their next redelivery is acknowledged.
func (b *Inbox) Drain(peek bool) Drained {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := Drained{Messages: append([]*cotal.Delivery(nil), b.items...), Dropped: b.dropped}
	if peek {
		return out
	}
	for _, d := range b.items {
		if durable(d) {
			delete(b.pending, d.Message.ID)
			b.shown[d.Message.ID] = true
		}
	}
	b.items, b.dropped = nil, 0
	return out
}

// Unread counts the buffered messages.
func (b *Inbox) Unread() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.items)
}
