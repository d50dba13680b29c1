package wire

import (
	"encoding/json"
	"fmt"
)

// ResponderState is a liveness responder's verdict on its own plane.
type ResponderState string

// The responder verdicts.
const (
	// ResponderBound: the plane's daemon holds its lease and serves.
	ResponderBound ResponderState = "bound"
	// ResponderUnbound: nobody serves the plane (no lease, a lease not ready, or no responder).
	ResponderUnbound ResponderState = "unbound"
	// ResponderStale: the lease names another incarnation than the one answering.
	ResponderStale ResponderState = "stale"
	// ResponderUnknown: the verdict could not be established (a failing check, a timeout, a
	// refused or malformed probe).
	ResponderUnknown ResponderState = "unknown"
)

var responderStates = []ResponderState{ResponderBound, ResponderUnbound, ResponderStale, ResponderUnknown}

// LivenessAnswer is a responder's reply to a liveness probe: one verdict, never the lease row.
type LivenessAnswer struct {
	Plane     Plane          `json:"plane"`
	Responder ResponderState `json:"responder"`
	// Instance is an opaque token of the answering incarnation, when it has one.
	Instance string `json:"instance,omitempty"`
}

// ParseLivenessAnswer parses a reply to a probe of plane, strictly: the plane must match, the
// verdict must be one of the four, and an instance, when present, must be a non-empty string.
// Anything else is a *ValidationError (the prober grades it unknown).
func ParseLivenessAnswer(plane Plane, data []byte) (*LivenessAnswer, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		return nil, Invalid("liveness answer", shorten(string(data)), "must be a JSON object")
	}
	var a LivenessAnswer
	if err := json.Unmarshal(raw["plane"], &a.Plane); err != nil || a.Plane != plane {
		return nil, Invalidf("plane", string(a.Plane), "must be %q, the plane probed", plane)
	}
	if err := json.Unmarshal(raw["responder"], &a.Responder); err != nil {
		return nil, Invalid("responder", "", "must be a string")
	}
	if err := oneOf("responder", a.Responder, responderStates); err != nil {
		return nil, err
	}
	if inst, ok := raw["instance"]; ok {
		if err := json.Unmarshal(inst, &a.Instance); err != nil || a.Instance == "" {
			return nil, Invalid("instance", "", "must be a non-empty string when present")
		}
	}
	return &a, nil
}

// ProbeOutcome is how a liveness probe ended, before grading.
type ProbeOutcome string

// The probe outcomes. Only NoResponders proves that nobody serves the plane; a timeout, a refusal
// or a malformed reply proves nothing and grades unknown.
const (
	ProbeReplied      ProbeOutcome = "replied"
	ProbeNoResponders ProbeOutcome = "noResponders"
	ProbeTimeout      ProbeOutcome = "timeout"
	ProbeRefused      ProbeOutcome = "refused"
	ProbeMalformed    ProbeOutcome = "malformed"
)

// GradeProbe turns a probe's outcome into a verdict: a reply carries the responder's own, no
// responders is unbound, anything else unknown.
func GradeProbe(outcome ProbeOutcome, answer *LivenessAnswer) ResponderState {
	switch outcome {
	case ProbeReplied:
		if answer != nil {
			return answer.Responder
		}
	case ProbeNoResponders:
		return ResponderUnbound
	}
	return ResponderUnknown
}

// String renders the answer for logs.
func (a LivenessAnswer) String() string {
	return fmt.Sprintf("%s: %s", a.Plane, a.Responder)
}
