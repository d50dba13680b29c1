package cotal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/wire"
)

// presenceWriteTimeout bounds one presence write.
const presenceWriteTimeout = 5 * time.Second

// card returns the card the client advertises.
func (c *Client) card() wire.AgentCard {
	card := wire.AgentCard{}
	if c.opts.card != nil {
		card = *c.opts.card
	}
	card.ID, card.Owner, card.Actor = c.me.String(), c.me.Owner(), c.me.Actor()
	if c.opts.name != "" {
		card.Name = c.opts.name
	}
	if card.Name == "" {
		card.Name = c.me.Actor()
	}
	if card.Kind == "" {
		card.Kind = wire.KindAgent
	}
	if card.Role == "" && c.grant != nil {
		card.Role = c.grant.Role
	}
	card.ProtocolVersion = wire.ProtocolVersion
	return card
}

// startPresence writes the first presence row (a credential that may not write its own presence
// fails here, at Connect) and starts the heartbeat.
func (c *Client) startPresence(ctx context.Context) error {
	now := wire.MillisOf(time.Now())
	c.presence = wire.Presence{Card: c.card(), Status: wire.StatusIdle, TS: now, StatusSince: now, Attention: wire.AttentionOpen}
	if c.grant != nil {
		c.presence.LifecycleUID = c.grant.Lifecycle
	}
	if err := c.presence.Validate(); err != nil {
		return fmt.Errorf("presence: %w", err)
	}
	if err := c.writePresence(ctx); err != nil {
		return err
	}
	c.goFn(func() {
		t := time.NewTicker(c.opts.heartbeat)
		defer t.Stop()
		for {
			select {
			case <-c.ctx.Done():
				return
			case <-t.C:
				if err := c.writePresence(c.ctx); err != nil && c.ctx.Err() == nil {
					c.log.Warn("presence heartbeat failed", "err", err)
					c.report(err)
				}
			}
		}
	})
	return nil
}

// writePresence writes the client's presence row, stamped now, under its own key only. Writes
// are serialised, and none follows the final offline row.
func (c *Client) writePresence(ctx context.Context) error {
	c.presenceMu.Lock()
	defer c.presenceMu.Unlock()
	if c.presenceDone {
		return nil
	}
	c.mu.Lock()
	c.presence.TS = wire.MillisOf(time.Now())
	p := c.presence
	c.mu.Unlock()
	return c.putPresence(ctx, &p)
}

func (c *Client) putPresence(ctx context.Context, p *wire.Presence) error {
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode presence: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, presenceWriteTimeout)
	defer cancel()
	subject := c.space.PresenceBucket().Subject(wire.PresenceKey(c.me))
	if _, err := c.js.Publish(ctx, subject, body); err != nil {
		return c.publishError("write presence", subject, err)
	}
	return nil
}

// writeOffline writes the one final offline row a graceful close may write (SPEC §6); no
// heartbeat or status write comes after it.
func (c *Client) writeOffline(ctx context.Context) error {
	c.presenceMu.Lock()
	defer c.presenceMu.Unlock()
	c.presenceDone = true
	c.mu.Lock()
	p := c.presence
	c.mu.Unlock()
	p.Status, p.TS, p.StatusSince, p.Activity, p.ActivitySince = wire.StatusOffline, wire.MillisOf(time.Now()), 0, "", 0
	return c.putPresence(ctx, &p)
}

// update changes the presence row and writes it at once.
func (c *Client) update(ctx context.Context, edit func(p *wire.Presence) error) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if !c.opts.presence {
		c.mu.Unlock()
		return errors.New("presence is off for this client (WithPresence(false))")
	}
	next := c.presence
	next.ChannelModes = cloneModes(c.presence.ChannelModes)
	if err := edit(&next); err != nil {
		c.mu.Unlock()
		return err
	}
	if err := next.Validate(); err != nil {
		c.mu.Unlock()
		return err
	}
	c.presence = next
	c.mu.Unlock()
	return c.writePresence(ctx)
}

func cloneModes(m map[string]wire.ChannelMode) map[string]wire.ChannelMode {
	if m == nil {
		return nil
	}
	out := make(map[string]wire.ChannelMode, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// SetStatus sets the status and activity. A live client never heartbeats offline: Close writes
// that.
func (c *Client) SetStatus(ctx context.Context, status wire.PresenceStatus, activity string) error {
	if status == wire.StatusOffline {
		return &wire.ValidationError{Field: "status", Value: string(status), Rule: "a live client never reports offline; Close does"}
	}
	return c.update(ctx, func(p *wire.Presence) error {
		now := wire.MillisOf(time.Now())
		if p.Status != status || p.Activity != activity {
			p.StatusSince = now
		}
		if p.Activity != activity {
			p.ActivitySince = now
		}
		p.Status, p.Activity = status, activity
		return nil
	})
}

// SetAttention sets the attention mode.
func (c *Client) SetAttention(ctx context.Context, mode wire.AttentionMode) error {
	return c.update(ctx, func(p *wire.Presence) error { p.Attention = mode; return nil })
}

// SetChannelMode sets a channel's attention override; an empty mode clears it.
func (c *Client) SetChannelMode(ctx context.Context, channel string, mode wire.ChannelMode) error {
	return c.update(ctx, func(p *wire.Presence) error {
		if mode == "" {
			delete(p.ChannelModes, channel)
			return nil
		}
		if p.ChannelModes == nil {
			p.ChannelModes = map[string]wire.ChannelMode{}
		}
		p.ChannelModes[channel] = mode
		return nil
	})
}

// SetCondition relays a condition the harness reported; nil clears it.
func (c *Client) SetCondition(ctx context.Context, cond *wire.PresenceCondition) error {
	return c.update(ctx, func(p *wire.Presence) error { p.Condition = cond; return nil })
}

// MarkActive records work progress (activeAt) in the next heartbeat.
func (c *Client) MarkActive() {
	c.mu.Lock()
	c.presence.ActiveAt = wire.MillisOf(time.Now())
	c.mu.Unlock()
}

// Peer is one row of the roster.
type Peer struct {
	// Key is the presence key, the peer's principal dot-form.
	Key string
	// Presence is the last row seen; nil once deleted.
	Presence *wire.Presence
	// Online is false for a row marked offline, stale past the liveness window, or deleted.
	Online bool
}

// Roster is a live view of the space's presence. It is safe for concurrent use; Stop ends it.
//
// When the broker ends the roster's watch (its consumer or the presence stream went away), the
// roster reports ErrRosterRestarted on its client's Errors and starts a new watch, with backoff,
// until one starts. The new watch delivers every current row again: the roster reports on Changes
// only the rows that differ from what it had, and a row it had that is gone now as deleted, so no
// peer is lost or reported twice.
type Roster struct {
	c       *Client
	mu      sync.Mutex
	rows    map[string]*wire.Presence // nil value: deleted
	last    map[string]rosterEntry    // the last entry applied per key
	now     func() time.Time
	ready   chan struct{}
	done    chan struct{} // closed when the roster ends
	changes chan Peer
	quit    chan struct{} // closed by Stop
	stop    sync.Once
}

// rosterEntry is what a watch delivered for a key: a row, or a delete.
type rosterEntry struct {
	put   bool
	value []byte
}

// A watch the broker ended is started again after rosterBackoffMin, and a failed start is tried
// again after twice the previous wait, at most rosterBackoffMax.
const (
	rosterBackoffMin = 250 * time.Millisecond
	rosterBackoffMax = 10 * time.Second
)

// Roster starts watching the space's presence and returns once the current rows are loaded. A
// row whose key is not its card.id, or that fails validation, is dropped and reported on Errors
// (SPEC §6).
func (c *Client) Roster(ctx context.Context) (*Roster, error) {
	w, err := c.watchPresence(ctx)
	if err != nil {
		return nil, err
	}
	r := &Roster{
		c: c, rows: map[string]*wire.Presence{}, last: map[string]rosterEntry{}, now: time.Now,
		ready: make(chan struct{}), done: make(chan struct{}), changes: make(chan Peer, 256), quit: make(chan struct{}),
	}
	c.goFn(func() { r.run(w) })
	select {
	case <-r.ready:
		return r, nil
	case <-r.done:
		return nil, fmt.Errorf("load presence: %w", ErrClosed)
	case <-ctx.Done():
		r.Stop()
		return nil, fmt.Errorf("load presence: %w", ctx.Err())
	}
}

// watchPresence starts a watch of every row of the space's presence bucket.
func (c *Client) watchPresence(ctx context.Context) (jetstream.KeyWatcher, error) {
	kv, err := c.js.KeyValue(ctx, string(c.space.PresenceBucket()))
	if err != nil {
		return nil, fmt.Errorf("open presence: %w", err)
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch presence: %w", err)
	}
	return w, nil
}

// run follows the watch w, and each watch started after the broker ended the one before, until
// the roster ends.
func (r *Roster) run(w jetstream.KeyWatcher) {
	defer close(r.done)
	readyOnce := sync.OnceFunc(func() { close(r.ready) })
	for first := true; w != nil; first = false {
		if !r.follow(w, first, readyOnce) {
			return
		}
		r.c.log.Warn("the broker ended the presence watch; watching again")
		r.c.report(fmt.Errorf("%w: the broker ended the presence watch", ErrRosterRestarted))
		w = r.rewatch()
	}
}

// follow applies w's entries until the watch ends: it returns true when the broker ended it, and
// false when the roster ended. A watch after the first one resynchronises the roster: once it has
// delivered the current rows, a row the roster had that it did not deliver is gone.
func (r *Roster) follow(w jetstream.KeyWatcher, first bool, ready func()) bool {
	var current map[string]bool // the keys a restarted watch delivered while loading
	if !first {
		current = map[string]bool{}
	}
	for {
		select {
		case <-r.quit:
			r.c.goFn(func() { _ = w.Stop() }) // best effort; the consumer also expires when idle
			return false
		case <-r.c.ctx.Done():
			r.ended()
			return false
		case e, ok := <-w.Updates():
			switch {
			case !ok && (r.c.ctx.Err() != nil || r.c.nc.IsClosed()):
				r.ended()
				return false
			case !ok:
				return true
			case e == nil: // the current rows are all delivered
				if current != nil {
					r.prune(current)
					current = nil
				}
				ready()
			default:
				if current != nil {
					current[e.Key()] = true
				}
				r.apply(e)
			}
		}
	}
}

// ended reports the end of a roster whose client closed, unless the roster was stopped first.
func (r *Roster) ended() {
	select {
	case <-r.quit:
	default:
		r.c.report(fmt.Errorf("%w: the client closed", ErrRosterEnded))
	}
}

// rewatch starts a new watch, waiting rosterBackoffMin first and doubling the wait after each
// failed start; it returns nil if the roster ends first.
func (r *Roster) rewatch() jetstream.KeyWatcher {
	wait := rosterBackoffMin
	for {
		t := time.NewTimer(wait)
		select {
		case <-r.quit:
			t.Stop()
			return nil
		case <-r.c.ctx.Done():
			t.Stop()
			r.ended()
			return nil
		case <-t.C:
		}
		w, err := r.c.watchPresence(r.c.ctx)
		if err == nil {
			r.c.log.Info("presence watch started again")
			return w
		}
		wait = min(2*wait, rosterBackoffMax)
		r.c.log.Warn("start the presence watch again", "err", err, "retry in", wait)
	}
}

// apply applies one entry: a row, or a delete. An entry that repeats the last one applied for
// its key (a restarted watch delivers every current row again) changes nothing.
func (r *Roster) apply(e jetstream.KeyValueEntry) {
	key := e.Key()
	if key == wire.TTLCanaryKey {
		return
	}
	entry := rosterEntry{put: e.Operation() == jetstream.KeyValuePut}
	if entry.put {
		entry.value = e.Value()
	}
	r.mu.Lock()
	prev, seen := r.last[key]
	r.last[key] = entry
	r.mu.Unlock()
	if seen && prev.put == entry.put && bytes.Equal(prev.value, entry.value) {
		return
	}
	var row *wire.Presence
	if entry.put {
		p, err := wire.DecodePresence(key, entry.value)
		if err != nil {
			r.c.log.Warn("presence row dropped", "key", key, "err", err)
			r.c.report(fmt.Errorf("presence row %q dropped: %w", key, err))
			return
		}
		row = p
	}
	r.set(key, row)
}

// prune deletes every row the roster has whose key is not in current.
func (r *Roster) prune(current map[string]bool) {
	r.mu.Lock()
	var gone []string
	for key, row := range r.rows {
		if row != nil && !current[key] {
			gone = append(gone, key)
			r.last[key] = rosterEntry{}
		}
	}
	r.mu.Unlock()
	for _, key := range gone {
		r.set(key, nil)
	}
}

// set stores key's row (nil: deleted) and reports the change on Changes.
func (r *Roster) set(key string, row *wire.Presence) {
	r.mu.Lock()
	r.rows[key] = row
	peer := r.peer(key, row)
	r.mu.Unlock()
	select {
	case r.changes <- peer:
	default:
	}
}

// peer builds a Peer; caller holds r.mu.
func (r *Roster) peer(key string, p *wire.Presence) Peer {
	online := p != nil && p.Status != wire.StatusOffline && !p.Stale(r.now())
	return Peer{Key: key, Presence: p, Online: online}
}

// Peers returns every peer seen, online ones first, each group by name.
func (r *Roster) Peers() []Peer {
	r.mu.Lock()
	out := make([]Peer, 0, len(r.rows))
	for k, p := range r.rows {
		out = append(out, r.peer(k, p))
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Online != out[j].Online {
			return out[i].Online
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// Find returns the peers a name addresses: by principal dot-form, by actor, or by card name
// without regard to case. More than one result is an ambiguous name.
func (r *Roster) Find(name string) []Peer {
	var out []Peer
	for _, p := range r.Peers() {
		if p.Presence == nil {
			continue
		}
		card := p.Presence.Card
		if p.Key == name || card.Actor == name || strings.EqualFold(card.Name, name) {
			out = append(out, p)
		}
	}
	return out
}

// Resolve returns the principal a name addresses: an owner.actor dot-form as it is, otherwise the
// one present peer Find returns for it. No such peer, or several, is an error saying so.
func (r *Roster) Resolve(name string) (wire.Principal, error) {
	if strings.Contains(name, ".") {
		return wire.ParsePrincipal(name)
	}
	found := r.Find(name)
	switch len(found) {
	case 0:
		return wire.Principal{}, fmt.Errorf("no peer named %q is present; use owner.actor or check the roster", name)
	case 1:
		return wire.ParsePrincipal(found[0].Key)
	}
	return wire.Principal{}, fmt.Errorf("%d peers are named %q; use owner.actor", len(found), name)
}

// Done is closed once the roster no longer updates: after Stop, or once its client's connection
// has closed (reported on Errors as ErrRosterEnded). A watch the broker ends does not end the
// roster, which watches again (see Roster).
func (r *Roster) Done() <-chan struct{} { return r.done }

// Changes delivers each row as it changes. The channel is buffered; a reader that falls behind
// misses changes but can always read Peers.
func (r *Roster) Changes() <-chan Peer { return r.changes }

// Stop ends the roster without waiting: removing the watch's consumer is a request a credential
// may lack the grant for, and it must not hold the caller up. The client's Close waits for it.
// Stopping a roster is not reported on Errors.
func (r *Roster) Stop() {
	r.stop.Do(func() { close(r.quit) })
}
