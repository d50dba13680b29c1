package lang

import (
	"encoding/json"
	"fmt"
)

// The step journal (spec §10): entries written pending before an effect is dispatched and
// settled after, keyed by where the effect is in the program.

// Entry is one journal entry (spec §10.1). Unknown fields are ignored on read.
type Entry struct {
	V            int             `json:"v"`
	Seq          int             `json:"seq"`
	Run          string          `json:"run"`
	Scope        string          `json:"scope"`
	Kind         string          `json:"kind"`
	Name         string          `json:"name"`
	Occurrence   int             `json:"occurrence"`
	InputHash    string          `json:"inputHash"`
	RequestID    string          `json:"requestId,omitempty"`
	Attempt      *int            `json:"attempt,omitempty"`
	State        string          `json:"state"`
	StartedAt    int64           `json:"startedAt"`
	External     json.RawMessage `json:"external,omitempty"`
	Status       string          `json:"status,omitempty"`
	EndedAt      *int64          `json:"endedAt,omitempty"`
	Result       json.RawMessage `json:"result,omitempty"`
	Error        *EntryError     `json:"error,omitempty"`
	Observations json.RawMessage `json:"observations,omitempty"`
	Cancel       *Cancel         `json:"cancel,omitempty"`
	BranchDigest string          `json:"branchDigest,omitempty"`
	Branches     []string        `json:"branches,omitempty"`
	Closed       *bool           `json:"closed,omitempty"`
}

// EntryError is a failed or refused step's error.
type EntryError struct {
	Code    string          `json:"code"`
	Kind    string          `json:"kind"`
	Message string          `json:"message"`
	Stack   string          `json:"stack,omitempty"`
	Detail  json.RawMessage `json:"detail,omitempty"`
}

// Cancel is a cancelling scope's intent: its losers, and whether the cancellation was issued.
type Cancel struct {
	Losers []string `json:"losers"`
	Issued bool     `json:"issued"`
}

// The entry states and statuses.
const (
	StatePending   = "pending"
	StateSettled   = "settled"
	StatusOK       = "ok"
	StatusFailed   = "failed"
	StatusCanceled = "cancelled"
	StatusRefused  = "refused"
)

// Key returns the entry's step key (spec §10.2).
func (e *Entry) Key() string { return StepKey(e.Scope, e.Kind, e.Name, e.Occurrence) }

// journal is a run's journal in memory: every write, and the latest per key.
type journal struct {
	runID string
	// store, when set, makes each write durable; an error refuses the append (L5010).
	store  func(Entry) error
	writes []Entry
	latest map[string]int // the index in writes of each key's last write
	order  []string       // keys in the order they were first written
	seq    int
}

func newJournal(runID string) *journal { return &journal{runID: runID, latest: map[string]int{}} }

// load seeds a journal with recorded entries: they must be this run's (L5011), and every value
// they carry must have a canonical form (L5024).
func (j *journal) load(entries []Entry) error {
	for i := range entries {
		e := entries[i]
		if e.Run != j.runID {
			return &Fault{Code: "L5011", Message: fmt.Sprintf("entry %d belongs to run %q, not %q", i, e.Run, j.runID)}
		}
		for field, raw := range map[string]json.RawMessage{"result": e.Result, "external": e.External} {
			if len(raw) == 0 {
				continue
			}
			if err := canonicalJSON(raw); err != nil {
				return &Fault{Code: "L5024", Message: fmt.Sprintf("entry %s: its %s has no canonical form: %v", e.Key(), field, err)}
			}
		}
		if e.Error != nil && len(e.Error.Detail) > 0 {
			if err := canonicalJSON(e.Error.Detail); err != nil {
				return &Fault{Code: "L5024", Message: fmt.Sprintf("entry %s: its error.detail has no canonical form: %v", e.Key(), err)}
			}
		}
		j.append(e)
		if e.Seq >= j.seq {
			j.seq = e.Seq + 1
		}
	}
	return nil
}

// CheckJournal checks recorded entries as a resume loads them, before anything runs: each must
// be run runID's (L5011) and every value it carries must have a canonical form (L5024). A host
// refuses a tampered or foreign journal with it before it takes the run.
func CheckJournal(runID string, entries []Entry) error {
	return newJournal(runID).load(entries)
}

// canonicalJSON checks that a recorded JSON value has a canonical form: JSON carries no function
// or undefined, but it does carry an own __proto__ field and a number too large to be finite.
func canonicalJSON(raw json.RawMessage) error {
	v, err := fromJSON(raw, true)
	if err == nil {
		_, err = Canonical(v)
	}
	return err
}

func (j *journal) append(e Entry) {
	k := e.Key()
	if _, ok := j.latest[k]; !ok {
		j.order = append(j.order, k)
	}
	j.latest[k] = len(j.writes)
	j.writes = append(j.writes, e)
}

// lookup returns the latest write of key, or nil.
func (j *journal) lookup(key string) *Entry {
	i, ok := j.latest[key]
	if !ok {
		return nil
	}
	e := j.writes[i]
	return &e
}

// write appends e durably: to the store first, when there is one, then to the journal. A store
// that refuses is a durability failure no program catches (L5010).
func (j *journal) write(e Entry) error {
	if j.store != nil {
		if err := j.store(e); err != nil {
			return &Fault{Code: "L5010", Step: e.Key(), Message: fmt.Sprintf("the journal append of step %s was refused: %v", e.Key(), err)}
		}
	}
	j.append(e)
	return nil
}

// begin writes an entry pending and returns it.
func (j *journal) begin(e Entry) (Entry, error) {
	e.V, e.Run, e.State = 1, j.runID, StatePending
	if prev := j.lookup(e.Key()); prev != nil {
		e.Seq = prev.Seq
	} else {
		e.Seq = j.seq
	}
	if err := j.write(e); err != nil {
		return e, err
	}
	if e.Seq == j.seq {
		j.seq++
	}
	return e, nil
}

// settle writes an entry's settled form.
func (j *journal) settle(e Entry) error {
	e.State = StateSettled
	return j.write(e)
}

// Entries returns the journal folded by key: each step's last write, in the order steps began.
func (j *journal) Entries() []Entry {
	out := make([]Entry, 0, len(j.order))
	for _, k := range j.order {
		out = append(out, j.writes[j.latest[k]])
	}
	return out
}
