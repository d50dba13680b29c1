package web

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// The graph's data: who reads which channel (the membership feed, SPEC §8, which the delivery
// daemon writes and nothing decides by) and recent activity across channels and direct messages.

// Member is one principal's row of GET /api/membership: the channel patterns its connections
// subscribe now (live) and the channels it is a durable member of, as observed at ObservedAt.
type Member struct {
	ID         string           `json:"id"`
	Live       []string         `json:"live"`
	Durable    []string         `json:"durable"`
	ObservedAt wire.EpochMillis `json:"observedAt"`
}

// Feed states, for the graph's pill.
const (
	FeedLive        = "live"         // the daemon observed the feed lately
	FeedStale       = "stale"        // the feed's heartbeat is old: the daemon may be down
	FeedTrafficOnly = "traffic-only" // no feed at all (no daemon, an open mesh): edges come from traffic
)

// feedStaleAfter is how old the feed's heartbeat may grow before the graph calls it stale: four of
// the daemon's reconcile intervals.
const feedStaleAfter = time.Minute

// Membership is GET /api/membership.
type Membership struct {
	// AsOf is when the daemon last reconciled the feed; absent without a feed.
	AsOf    wire.EpochMillis `json:"asOf,omitempty"`
	State   string           `json:"state"`
	Members []Member         `json:"members"`
}

// readMembership reads the whole feed: every principal's row and the heartbeat.
func readMembership(ctx context.Context, js jetstream.JetStream, space wire.Space) (*Membership, error) {
	ctx, cancel := context.WithTimeout(ctx, readDeadline)
	defer cancel()
	out := &Membership{State: FeedTrafficOnly, Members: []Member{}}
	kv, err := js.KeyValue(ctx, string(meshwire.MembershipBucket(space)))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer w.Stop() //nolint:errcheck // the read is over either way
	for {
		var e jetstream.KeyValueEntry
		select {
		case e = <-w.Updates():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e == nil {
			break // the initial values are all in
		}
		if e.Key() == meshwire.MembershipFeedKey {
			var hb meshwire.MembershipFeedRow
			if json.Unmarshal(e.Value(), &hb) == nil {
				out.AsOf = hb.ObservedAt
			}
			continue
		}
		var row meshwire.MembershipRow
		if _, err := wire.ParsePrincipal(e.Key()); err != nil || json.Unmarshal(e.Value(), &row) != nil {
			continue // a row no principal names, or one that does not decode: shown as nothing
		}
		out.Members = append(out.Members, Member{ID: e.Key(), Live: nonNil(row.Live), Durable: nonNil(row.Durable), ObservedAt: row.ObservedAt})
	}
	slices.SortFunc(out.Members, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	switch {
	case out.AsOf == 0 && len(out.Members) == 0:
	case time.Since(out.AsOf.Time()) > feedStaleAfter:
		out.State = FeedStale
	default:
		out.State = FeedLive
	}
	return out, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Server) membership(w http.ResponseWriter, r *http.Request) {
	m, err := readMembership(r.Context(), s.js, s.space)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "membership-read-failed", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, m)
}

// membershipEvent is the feed's membership event: the whole feed, or why it could not be read.
func (s *Server) membershipEvent(ctx context.Context) (string, any) {
	m, err := readMembership(ctx, s.js, s.space)
	if err != nil {
		return "membership-read-failed", map[string]string{"reason": err.Error()}
	}
	return "membership", m
}

// membershipDebounce bounds how often a changing feed is sent to the browsers.
const membershipDebounce = time.Second

// watchMembership publishes the feed whenever its bucket changes, at most every
// membershipDebounce, until the server closes. Without a bucket to watch it returns: the graph
// then draws from traffic.
func (s *Server) watchMembership() {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-s.done; cancel() }()
	kv, err := s.js.KeyValue(ctx, string(meshwire.MembershipBucket(s.space)))
	if err != nil {
		return
	}
	w, err := kv.WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		s.cfg.Log.Warn("watch the membership feed", "err", err)
		return
	}
	defer w.Stop() //nolint:errcheck // closing down
	var pending <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-w.Updates():
			if !ok {
				return
			}
			if pending == nil {
				pending = time.After(membershipDebounce)
			}
		case <-pending:
			pending = nil
			s.hub.publish(s.membershipEvent(ctx))
		}
	}
}

// Activity is GET /api/activity: the latest messages across channels and direct messages, oldest
// first. A source that failed or did not answer within the deadline is named in Missing, with its
// reason, and the answer is Partial; it is never an error.
type Activity struct {
	Entries    []ActivityEntry   `json:"entries"`
	Partial    bool              `json:"partial"`
	Read       int               `json:"read"`
	Of         int               `json:"of"`
	Missing    []string          `json:"missing"`
	Reasons    map[string]string `json:"reasons"`
	DeadlineMS int64             `json:"deadlineMs"`
}

// ActivityEntry is one message of the activity: chat (with its channel) or unicast (a direct
// message or a task, as Kind says, with its recipient or role); the sender, channel and recipient
// come from the subject.
type ActivityEntry struct {
	Mode     string             `json:"mode"`
	Kind     wire.DeliveryKind  `json:"kind"`
	SenderID string             `json:"senderId"`
	Channel  string             `json:"channel,omitempty"`
	To       string             `json:"to,omitempty"`
	Msg      *wire.CotalMessage `json:"msg"`
	HTML     string             `json:"html"`
}

// The activity's sources.
const (
	sourceChat = "chat"
	sourceDMs  = "direct messages"
)

func (s *Server) activity(w http.ResponseWriter, r *http.Request) {
	limit, err := limitOf(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad-limit", err.Error())
		return
	}
	type result struct {
		source string
		evs    []Event
		err    error
	}
	sources := []struct{ name, stream, filter string }{
		{sourceChat, s.space.ChatStream(), s.space.KindAll(wire.KindChat)},
		{sourceDMs, s.space.DMStream(), s.space.KindAll(wire.KindInst)},
	}
	results := make([]result, len(sources))
	var wg sync.WaitGroup
	for i, src := range sources {
		wg.Go(func() {
			evs, err := lastEvents(r.Context(), s.js, src.stream, src.filter, limit)
			results[i] = result{src.name, evs, err}
		})
	}
	wg.Wait()
	out := Activity{Entries: []ActivityEntry{}, Of: len(sources), Missing: []string{}, Reasons: map[string]string{}, DeadlineMS: readDeadline.Milliseconds()}
	for _, res := range results {
		if res.err != nil {
			out.Missing = append(out.Missing, res.source)
			out.Reasons[res.source] = res.err.Error()
		} else {
			out.Read++
		}
		for _, ev := range res.evs {
			e := ActivityEntry{Mode: "unicast", Kind: ev.Mode, SenderID: ev.SenderID, To: ev.To, Msg: ev.Msg, HTML: ev.HTML}
			if ev.Mode == wire.DeliveryChannel {
				e.Mode, e.Channel = "chat", ev.Channel
			}
			out.Entries = append(out.Entries, e)
		}
	}
	out.Partial = len(out.Missing) > 0
	slices.SortStableFunc(out.Entries, func(a, b ActivityEntry) int { return cmp.Compare(a.Msg.TS, b.Msg.TS) })
	if len(out.Entries) > limit {
		out.Entries = out.Entries[len(out.Entries)-limit:]
	}
	writeJSON(w, http.StatusOK, out)
}
