package meshwire

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/gocotal/cotal/wire"
)

// RunState is a run status record's state.
type RunState string

// The run states.
const (
	RunRunning   RunState = "running"
	RunReleased  RunState = "released"
	RunCompleted RunState = "completed"
	RunFailed    RunState = "failed"
)

// runStates are the states a status record may hold.
var runStates = []RunState{RunRunning, RunReleased, RunCompleted, RunFailed}

// runStatusVersion is the only status record version.
const runStatusVersion = 1

// RunStatus is a run's status record: its state, the holder of its lease at an epoch and fencing
// token, how far its journal reached, and when it was written (Unix milliseconds).
type RunStatus struct {
	V                    int      `json:"v"`
	ObservedSpecRevision uint64   `json:"observedSpecRevision"`
	State                RunState `json:"state"`
	Holder               string   `json:"holder"`
	Epoch                int64    `json:"epoch"`
	FencingToken         int64    `json:"fencingToken"`
	JournalHigh          int64    `json:"journalHigh"`
	At                   int64    `json:"at"`
}

// ParseRunStatus decodes a run status record, refusing an unknown version, field or state,
// trailing data, and a running record without a holder or with a fencing token below 1.
func ParseRunStatus(data []byte) (RunStatus, error) {
	var r RunStatus
	if err := decodeClosed(data, "run status", &r); err != nil {
		return RunStatus{}, err
	}
	switch {
	case r.V != runStatusVersion:
		return RunStatus{}, wire.Invalidf("v", fmt.Sprint(r.V), "must be %d", runStatusVersion)
	case !slices.Contains(runStates, r.State):
		return RunStatus{}, wire.Invalidf("state", string(r.State), "must be one of %q", runStates)
	case r.Epoch < 0:
		return RunStatus{}, wire.Invalid("epoch", fmt.Sprint(r.Epoch), "must not be negative")
	case r.State == RunRunning && r.Holder == "":
		return RunStatus{}, wire.Invalid("holder", "", "is required while the run is running")
	case r.State == RunRunning && r.FencingToken < 1:
		return RunStatus{}, wire.Invalid("fencingToken", fmt.Sprint(r.FencingToken), "must be at least 1 while the run is running")
	}
	return r, nil
}

// RunCaller returns the caller lifecycle a run's own actions ride, owned by owner: derived from
// the run id alone (the actor "wf_" and the first 12 hex characters of its SHA-256, the uid the
// next 26), so every host that resumes the run calls as the same triple.
func RunCaller(owner, runID string) (wire.Lifecycle, error) {
	if err := ValidateRunID(runID); err != nil {
		return wire.Lifecycle{}, err
	}
	sum := sha256.Sum256([]byte(runID))
	h := hex.EncodeToString(sum[:])
	p, err := wire.NewPrincipal(owner, "wf_"+h[:12])
	if err != nil {
		return wire.Lifecycle{}, err
	}
	return wire.Lifecycle{Principal: p, UID: wire.LifecycleUID(h[12:38])}, nil
}
