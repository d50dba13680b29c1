package meshwire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/gocotal/cotal/wire"
)

// ValidateRunID checks a run id: an id token, 1 to 64 characters of [A-Za-z0-9_-].
func ValidateRunID(id string) error { return wire.ValidateIDToken("runId", id) }

// ValidateTakeoverID checks a takeover id, which names one replay's durable: an id token without
// '_', so that wfj_<runId>_<takeoverId> names one run and takeover only (run a, takeover b_c and
// run a_b, takeover c would otherwise share a durable, and a credential for one would reach the
// other's).
func ValidateTakeoverID(id string) error {
	if wire.ValidateIDToken("takeoverId", id) != nil || strings.Contains(id, "_") {
		return wire.Invalid("takeoverId", id, "must be 1 to 64 characters of [A-Za-z0-9-]")
	}
	return nil
}

// WFJReplayDurable returns "wfj_<runId>_<takeoverId>", the durable one takeover replays a run's
// journal through. The ids are checked by the caller.
func WFJReplayDurable(runID, takeoverID string) string { return "wfj_" + runID + "_" + takeoverID }

// JournalKind is a journal record's kind.
type JournalKind string

// The journal record kinds.
const (
	JournalActivation JournalKind = "activation"
	JournalStep       JournalKind = "step"
)

// journalRecordVersion is the only record version.
const journalRecordVersion = 1

// JournalRecord is one record of a run's journal, as ParseJournalRecord reads it: a read-side
// type (encoding it would write every field, which the closed shapes refuse). Activation fields
// are set on activations and Entry on steps.
type JournalRecord struct {
	V    int         `json:"v"`
	Kind JournalKind `json:"kind"`
	Run  string      `json:"run"`
	N    int64       `json:"n"`
	// Holder, FencingToken, Epoch and ReplayedTo describe an activation: who took the run,
	// under which fencing token and epoch, after replaying how many records.
	Holder       string `json:"holder,omitempty"`
	FencingToken int64  `json:"fencingToken,omitempty"`
	Epoch        int64  `json:"epoch"`
	ReplayedTo   int64  `json:"replayedTo"`
	At           int64  `json:"at"`
	// Entry is a step's language journal entry, carried verbatim.
	Entry json.RawMessage `json:"entry,omitempty"`
}

var journalFields = map[JournalKind][]string{
	JournalActivation: {"v", "kind", "run", "n", "holder", "fencingToken", "epoch", "replayedTo", "at"},
	JournalStep:       {"v", "kind", "run", "n", "at", "entry"},
}

// ParseJournalRecord decodes one journal record, refusing an unknown version, kind or field, a
// missing field, and an activation without a holder or a fencing token of at least 1.
func ParseJournalRecord(data []byte) (JournalRecord, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return JournalRecord{}, fmt.Errorf("journal record: %w", err)
	}
	var kind JournalKind
	if err := json.Unmarshal(fields["kind"], &kind); err != nil {
		return JournalRecord{}, wire.Invalid("kind", string(fields["kind"]), "must be a string")
	}
	want, ok := journalFields[kind]
	if !ok {
		return JournalRecord{}, wire.Invalid("kind", string(kind), `must be "activation" or "step"`)
	}
	for name := range fields {
		if !slices.Contains(want, name) {
			return JournalRecord{}, wire.Invalid(name, "", "is not a field of a journal "+string(kind))
		}
	}
	for _, name := range want {
		if _, ok := fields[name]; !ok {
			return JournalRecord{}, wire.Invalid(name, "", "is required in a journal "+string(kind))
		}
	}
	var r JournalRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return JournalRecord{}, fmt.Errorf("journal record: %w", err)
	}
	switch {
	case r.V != journalRecordVersion:
		return JournalRecord{}, wire.Invalidf("v", fmt.Sprint(r.V), "must be %d", journalRecordVersion)
	case r.Run == "":
		return JournalRecord{}, wire.Invalid("run", "", "is required")
	case r.N < 0:
		return JournalRecord{}, wire.Invalid("n", fmt.Sprint(r.N), "must not be negative")
	case kind == JournalActivation && r.Epoch < 0:
		return JournalRecord{}, wire.Invalid("epoch", fmt.Sprint(r.Epoch), "must not be negative")
	case kind == JournalActivation && (r.ReplayedTo < 0 || r.ReplayedTo > r.N):
		return JournalRecord{}, wire.Invalid("replayedTo", fmt.Sprint(r.ReplayedTo), "must be within 0 and the record's ordinal")
	case kind == JournalActivation && r.Holder == "":
		return JournalRecord{}, wire.Invalid("holder", "", "is required in an activation")
	case kind == JournalActivation && r.FencingToken < 1:
		return JournalRecord{}, wire.Invalid("fencingToken", fmt.Sprint(r.FencingToken), "must be at least 1")
	}
	return r, nil
}

// wfjStreamPrefix followed by the space token names the workflow-run journal stream.
const wfjStreamPrefix = "WFJ_"

// WFJStream returns "WFJ_<space>", the workflow-run journals (cotal.<space>.wfj.*).
func WFJStream(s wire.Space) string { return wfjStreamPrefix + s.Token() }

// WFJSubject returns "cotal.<space>.wfj.<runId>", the journal subject of one workflow run.
func WFJSubject(s wire.Space, runID string) string { return s.Subject(KindWfj, wire.Token(runID)) }

// WFJFilter returns "cotal.<space>.wfj.*", the subjects of the WFJ stream.
func WFJFilter(s wire.Space) string { return s.Subject(KindWfj, "*") }
