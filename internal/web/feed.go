package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/who"
	"github.com/gocotal/cotal/wire"
)

// The live feed (GET /feed): server-sent events. On connect, the roster, the membership feed (or
// membership-read-failed with its reason), the open questions to the operator and the escalated
// spawns; then a message event for every message the tap sees, roster and membership events
// (debounced) and questions and escalations events as they change, and a comment ping so proxies
// and browsers keep the stream open.

// Event is one message as the feed and the history routes carry it: the mode, sender, channel
// and recipient from the subject (never from the payload), the message and its body rendered safe.
type Event struct {
	Mode     wire.DeliveryKind `json:"mode"`
	SenderID string            `json:"senderId"`
	// Who is the sender as a person reads it: its display name, stripped of control and bidi
	// characters, beside its principal (who.Is). The page shows this, never msg.from.name alone.
	Who     string `json:"who"`
	Channel string `json:"channel,omitempty"`
	// To is a direct message's recipient (its dot-form) or an anycast's role.
	To   string             `json:"to,omitempty"`
	Msg  *wire.CotalMessage `json:"msg"`
	HTML string             `json:"html"`
}

// Peer is one roster row: the presence key, whether it is online, and its presence row.
type Peer struct {
	Key      string         `json:"key"`
	Online   bool           `json:"online"`
	Presence *wire.Presence `json:"presence"`
	// Who is the peer as a person reads it: its card's name beside its key (who.Is).
	Who string `json:"who"`
}

// Feed timings.
const (
	rosterDebounce = 150 * time.Millisecond
	pingEvery      = 20 * time.Second
	// subscriberBuffer is how many events one slow browser may fall behind before it is cut
	// off (it reconnects and starts from the roster again).
	subscriberBuffer = 256
)

// sse is one event on the wire.
type sse struct {
	name string
	data []byte
}

// hub fans events out to the feeds' subscribers.
type hub struct {
	mu   sync.Mutex
	subs map[chan sse]struct{}
}

func newHub() *hub { return &hub{subs: map[chan sse]struct{}{}} }

func (h *hub) subscribe() chan sse {
	ch := make(chan sse, subscriberBuffer)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch
}

func (h *hub) unsubscribe(ch chan sse) {
	h.mu.Lock()
	if _, ok := h.subs[ch]; ok {
		delete(h.subs, ch)
		close(ch)
	}
	h.mu.Unlock()
}

// publish sends ev to every subscriber; one that cannot take it is dropped (its stream ends).
func (h *hub) publish(name string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		return // every value published here encodes
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- sse{name: name, data: data}:
		default:
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// peers returns the roster's rows.
func peers(r *cotal.Roster) []Peer {
	out := []Peer{}
	for _, p := range r.Peers() {
		name := ""
		if p.Presence != nil {
			name = p.Presence.Card.Name
		}
		out = append(out, Peer{Key: p.Key, Online: p.Online, Presence: p.Presence, Who: who.Is(name, p.Key)})
	}
	return out
}

// feed serves GET /feed.
func (s *Server) feed(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming-unsupported")
		return
	}
	ch := s.hub.subscribe()
	defer s.hub.unsubscribe(ch)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	roster, _ := json.Marshal(peers(s.roster)) // always encodes
	writeEvent(w, sse{name: "roster", data: roster})
	name, v := s.membershipEvent(r.Context())
	membership, _ := json.Marshal(v) // always encodes
	writeEvent(w, sse{name: name, data: membership})
	questions, _ := json.Marshal(s.questions.list()) // always encodes
	writeEvent(w, sse{name: "questions", data: questions})
	escalated, _ := json.Marshal(s.escalated.list()) // always encodes
	writeEvent(w, sse{name: "escalations", data: escalated})
	fl.Flush()
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-ping.C:
			fmt.Fprint(w, ": ping\n\n")
		case ev, ok := <-ch:
			if !ok {
				return // fell behind: the browser reconnects
			}
			writeEvent(w, ev)
		}
		fl.Flush()
	}
}

// writeEvent writes one event; its data is one line of JSON.
func writeEvent(w http.ResponseWriter, ev sse) {
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.name, ev.data)
}

// watchRoster publishes the roster on every change, at most every rosterDebounce.
func (s *Server) watchRoster() {
	var pending <-chan time.Time
	for {
		select {
		case <-s.done:
			return
		case <-s.roster.Changes():
			if pending == nil {
				pending = time.After(rosterDebounce)
			}
		case <-pending:
			pending = nil
			s.hub.publish("roster", peers(s.roster))
		}
	}
}
