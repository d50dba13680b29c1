package web

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/wire"
)

// Questions to the operator: a direct message an agent sent the person who runs the mesh (the
// principal `cotal send` speaks as) waits in NEEDS YOU until the operator answers that agent with
// a direct message of their own. The state is folded from the DM history at start and from the
// tap after, by time, so the order the two arrive in does not matter. The time is the tap's
// arrival for a live message and, for history, the sender's timestamp no later than now: a
// sender's clock ahead of ours never makes its question unanswerable.

// Question is an agent's latest unanswered direct message to the operator.
type Question struct {
	// From is the asking agent's dot-form, from the subject.
	From string `json:"from"`
	// Who is the asking agent as a person reads it (who.Is).
	Who  string             `json:"who"`
	Msg  *wire.CotalMessage `json:"msg"`
	HTML string             `json:"html"`
	// at is when it was asked, as fold saw it.
	at wire.EpochMillis
}

// NeedsYou is GET /api/needs-you: the agents waiting on a person, the questions addressed to the
// operator (oldest first), and the spawned agents their manager gave up on.
type NeedsYou struct {
	Operator  string        `json:"operator,omitempty"`
	Waiting   []Peer        `json:"waiting"`
	Questions []Question    `json:"questions"`
	Escalated []manager.Row `json:"escalated"`
}

// questions folds direct messages into the open questions to one operator.
type questions struct {
	operator string // dot-form; empty: no operator, no questions

	mu       sync.Mutex
	open     map[string]Question
	answered map[string]wire.EpochMillis // per agent, the operator's latest direct message to it
}

func newQuestions(operator wire.Principal) *questions {
	q := &questions{open: map[string]Question{}, answered: map[string]wire.EpochMillis{}}
	if !operator.IsZero() {
		q.operator = operator.String()
	}
	return q
}

// fold applies one event seen at ts, reporting whether the open questions changed.
func (q *questions) fold(ev Event, ts wire.EpochMillis) bool {
	if q.operator == "" || ev.Mode != wire.DeliveryDM {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case ev.To == q.operator && ev.SenderID != q.operator:
		if ts <= q.answered[ev.SenderID] || ts < q.open[ev.SenderID].at {
			return false
		}
		q.open[ev.SenderID] = Question{From: ev.SenderID, Who: ev.Who, Msg: ev.Msg, HTML: ev.HTML, at: ts}
		return true
	case ev.SenderID == q.operator:
		if ts > q.answered[ev.To] {
			q.answered[ev.To] = ts
		}
		if open, ok := q.open[ev.To]; ok && open.at <= ts {
			delete(q.open, ev.To)
			return true
		}
	}
	return false
}

// list returns the open questions, oldest first.
func (q *questions) list() []Question {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]Question, 0, len(q.open))
	for _, qu := range q.open {
		out = append(out, qu)
	}
	slices.SortFunc(out, func(a, b Question) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.From, b.From)) })
	return out
}

// questionHistory is how many of the latest direct messages the start folds.
const questionHistory = MaxLimit

// loadQuestions folds the direct-message history into the open questions and announces them.
func (s *Server) loadQuestions(ctx context.Context) {
	if s.questions.operator == "" {
		return
	}
	evs, err := lastEvents(ctx, s.js, s.space.DMStream(), s.space.KindAll(wire.KindInst), questionHistory)
	if err != nil {
		s.cfg.Log.Warn("read the direct messages for questions to the operator", "err", err)
	}
	now := wire.EpochMillis(time.Now().UnixMilli())
	for _, ev := range evs {
		s.questions.fold(ev, min(ev.Msg.TS, now))
	}
	s.hub.publish("questions", s.questions.list())
}

func (s *Server) needsYou(w http.ResponseWriter, _ *http.Request) {
	out := NeedsYou{Operator: s.questions.operator, Waiting: []Peer{}, Questions: s.questions.list(), Escalated: s.escalated.list()}
	for _, p := range peers(s.roster) {
		if p.Online && p.Presence != nil && p.Presence.Status == wire.StatusWaiting {
			out.Waiting = append(out.Waiting, p)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// Escalated spawns: an agent whose manager stopped restarting it (its restart budget spent) or
// whose spawn failed stays in its manager's rows until it is spawned again. The dashboard asks
// the managers (Config.Agents) every Config.AgentsEvery and keeps those rows for NEEDS YOU.

// escalations are the rows of the agents the managers gave up on, as last read.
type escalations struct {
	mu   sync.Mutex
	rows []manager.Row
}

// set keeps the given-up rows of all, reporting whether they changed.
func (e *escalations) set(all []manager.Row) bool {
	var rows []manager.Row
	for _, r := range all {
		if st := manager.State(r.Status); st == manager.StateEscalated || st == manager.StateFailed {
			rows = append(rows, r)
		}
	}
	slices.SortFunc(rows, func(a, b manager.Row) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.LifecycleUID, b.LifecycleUID))
	})
	e.mu.Lock()
	defer e.mu.Unlock()
	same := slices.EqualFunc(rows, e.rows, func(a, b manager.Row) bool {
		return a.LifecycleUID == b.LifecycleUID && a.Status == b.Status
	})
	e.rows = rows
	return !same
}

func (e *escalations) list() []manager.Row {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]manager.Row{}, e.rows...)
}

// DefaultAgentsEvery is how often the dashboard asks the managers for their agents.
const DefaultAgentsEvery = 5 * time.Second

// watchAgents asks the managers for their agents until the server closes, announcing the
// escalations whenever they change. A failed ask keeps the last rows.
func (s *Server) watchAgents(life context.Context) {
	if s.cfg.Agents == nil {
		return
	}
	every := cmp.Or(s.cfg.AgentsEvery, DefaultAgentsEvery)
	tick := time.NewTicker(every)
	defer tick.Stop()
	var lastErr string // a failure is logged when it changes, not at every poll
	for {
		ctx, cancel := context.WithTimeout(life, every)
		rows, err := s.cfg.Agents(ctx)
		cancel()
		if err != nil {
			if err.Error() != lastErr {
				s.cfg.Log.Warn("ask the managers for their agents", "err", err)
			}
			lastErr = err.Error()
		} else if lastErr = ""; s.escalated.set(rows) {
			s.hub.publish("escalations", s.escalated.list())
		}
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
	}
}
