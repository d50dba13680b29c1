package runhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/journal"
	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/termsafe"
	"github.com/gocotal/cotal/lang"
)

// ErrNoRun reports a run with no record on the host's endpoint.
var ErrNoRun = errors.New("runhost: no such run")

// View is a run as the mesh records it: its record's two halves and its journal, a row per
// record (the manager contract's run-status).
type View struct {
	RunID    string          `json:"runId"`
	Endpoint string          `json:"endpoint"`
	Spec     json.RawMessage `json:"spec"`
	Status   json.RawMessage `json:"status,omitempty"`
	Journal  []JournalRow    `json:"journal"`
}

// JournalRow is one record of a run's journal as an operator reads it: an activation (who took
// the run, at which epoch, after replaying how many records) or a step write (its key, state and
// outcome; the question of a checkpoint still open; the answer a settled one took).
type JournalRow struct {
	N          int64  `json:"n"`
	Kind       string `json:"kind"`
	Holder     string `json:"holder,omitempty"`
	Epoch      *int64 `json:"epoch,omitempty"`
	ReplayedTo *int64 `json:"replayedTo,omitempty"`
	Step       string `json:"step,omitempty"`
	State      string `json:"state,omitempty"`
	Outcome    string `json:"outcome,omitempty"`
	Asks       string `json:"asks,omitempty"`
	// Addressee is the agent an open ask addresses, who may answer it.
	Addressee string     `json:"addressee,omitempty"`
	Answer    *RowAnswer `json:"answer,omitempty"`
}

// RowAnswer is the answer a settled checkpoint took.
type RowAnswer struct {
	AnswerID string          `json:"answerId"`
	Value    json.RawMessage `json:"value,omitempty"`
	By       string          `json:"by,omitempty"`
	At       float64         `json:"at,omitempty"`
}

// Row is one run of a run listing (the manager contract's run-ps row).
type Row struct {
	RunID       string            `json:"runId"`
	Endpoint    string            `json:"endpoint"`
	State       meshwire.RunState `json:"state,omitempty"`
	Holder      string            `json:"holder,omitempty"`
	Epoch       *int64            `json:"epoch,omitempty"`
	JournalHigh *int64            `json:"journalHigh,omitempty"`
	ForkedFrom  *meshwire.RunFork `json:"forkedFrom,omitempty"`
}

// operator connects a run operator for runID (its replay of that run alone when runID is set, the
// records' point reads always) and calls fn with it.
func (h *Host) operator(ctx context.Context, runID, takeover string, fn func(nc *nats.Conn) error) error {
	return h.Operator().with(ctx, runID, takeover, fn)
}

// View reads run runID's records and replays its journal, under a run-operator credential for
// that run alone.
func (h *Host) View(ctx context.Context, runID string) (*View, error) {
	if err := meshwire.ValidateRunID(runID); err != nil {
		return nil, err
	}
	v := &View{RunID: runID, Endpoint: string(h.cfg.Serve.Endpoint)}
	takeover := newTakeoverID()
	err := h.operator(ctx, runID, takeover, func(nc *nats.Conn) error {
		for leaf, dst := range map[string]*json.RawMessage{meshwire.RecordSpecLeaf: &v.Spec, meshwire.RecordStatusLeaf: &v.Status} {
			data, _, err := readRunRecord(ctx, nc, h.cfg.Space, h.cfg.Serve.Endpoint, runID, leaf)
			if err != nil {
				return err
			}
			*dst = data
		}
		if v.Spec == nil {
			return fmt.Errorf("run %s: %w on endpoint %s", runID, ErrNoRun, h.cfg.Serve.Endpoint)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		rep, err := journal.Replay(ctx, js, h.cfg.Space, runID, takeover)
		if err != nil {
			return err
		}
		v.Journal = h.rows(runID, rep.Records)
		return nil
	})
	return v, err
}

// rows renders a journal's records; an open checkpoint or ask this host drives carries its
// question, and an ask the agent it addresses.
func (h *Host) rows(runID string, records []meshwire.JournalRecord) []JournalRow {
	h.mu.Lock()
	r := h.runs[runID]
	h.mu.Unlock()
	open := map[string]openPoint{}
	if r != nil {
		r.mu.Lock()
		maps.Copy(open, r.open)
		r.mu.Unlock()
	}
	var out []JournalRow
	for _, rec := range records {
		row := JournalRow{N: rec.N, Kind: string(rec.Kind)}
		if rec.Kind == meshwire.JournalActivation {
			epoch, replayed := rec.Epoch, rec.ReplayedTo
			row.Holder, row.Epoch, row.ReplayedTo = rec.Holder, &epoch, &replayed
			out = append(out, row)
			continue
		}
		var e lang.Entry
		if err := json.Unmarshal(rec.Entry, &e); err != nil {
			row.Outcome = "unreadable: " + err.Error()
			out = append(out, row)
			continue
		}
		row.Step, row.State, row.Outcome = e.Key(), e.State, outcome(e)
		if (e.Kind == "checkpoint" || e.Kind == "ask") && e.State == lang.StatePending {
			row.Asks, row.Addressee = open[row.Step].prompt, open[row.Step].seat
		}
		if e.Kind == "checkpoint" && e.Status == lang.StatusOK {
			row.Answer = answerOf(e.Result)
		}
		out = append(out, row)
	}
	return out
}

// outcome is a step write's outcome: pending; a checkpoint's resolved or expired; otherwise its
// status, with the failure's code and message.
func outcome(e lang.Entry) string {
	if e.State == lang.StatePending {
		return "pending"
	}
	if e.Kind == "checkpoint" && e.Status == lang.StatusOK {
		var r struct {
			Outcome string `json:"outcome"`
		}
		if json.Unmarshal(e.Result, &r) == nil && r.Outcome != "" {
			return r.Outcome
		}
	}
	if e.Error != nil {
		return e.Status + " (" + e.Error.Code + ": " + shortLine(e.Error.Message) + ")"
	}
	return e.Status
}

// outcomeMessageMax bounds the failure message a row's outcome carries.
const outcomeMessageMax = 200

// shortLine is s on one line, cut to outcomeMessageMax bytes on a rune boundary.
func shortLine(s string) string {
	return termsafe.Cut(strings.Join(strings.Fields(s), " "), outcomeMessageMax)
}

// answerOf is the answer a checkpoint's recorded outcome took; nil for an expiry.
func answerOf(result json.RawMessage) *RowAnswer {
	var r struct {
		Outcome  string          `json:"outcome"`
		AnswerID string          `json:"answerId"`
		Value    json.RawMessage `json:"value"`
		By       string          `json:"by"`
		At       float64         `json:"at"`
	}
	if json.Unmarshal(result, &r) != nil || r.Outcome != "resolved" || r.AnswerID == "" {
		return nil
	}
	return &RowAnswer{AnswerID: r.AnswerID, Value: r.Value, By: r.By, At: r.At}
}

// List reads every run recorded on the host's endpoint, by id.
func (h *Host) List(ctx context.Context) ([]Row, error) {
	rows := map[string]*Row{}
	row := func(runID string) *Row {
		if rows[runID] == nil {
			rows[runID] = &Row{RunID: runID, Endpoint: string(h.cfg.Serve.Endpoint)}
		}
		return rows[runID]
	}
	b := h.recordsBucket()
	prefix := b.Subject(meshwire.RecordKey(meshwire.RecordRun, h.cfg.Serve.Endpoint, ""))
	err := h.operator(ctx, "", newTakeoverID(), func(nc *nats.Conn) error {
		return kvget.Scan(ctx, nc, b.Stream(), b.Subject(meshwire.RecordKey(meshwire.RecordRun, h.cfg.Serve.Endpoint, "*", "*")), func(m *kvget.Stored) error {
			runID, leaf, ok := strings.Cut(strings.TrimPrefix(m.Subject, prefix), ".")
			if !ok || len(m.Data) == 0 {
				return nil
			}
			switch leaf {
			case meshwire.RecordSpecLeaf:
				if spec, err := meshwire.ParseRunSpec(m.Data); err == nil {
					row(runID).ForkedFrom = spec.ForkedFrom
				}
			case meshwire.RecordStatusLeaf:
				if st, err := meshwire.ParseRunStatus(m.Data); err == nil {
					r := row(runID)
					r.State, r.Holder, r.Epoch, r.JournalHigh = st.State, st.Holder, &st.Epoch, &st.JournalHigh
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	out := make([]Row, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].RunID < out[j].RunID })
	return out, nil
}
