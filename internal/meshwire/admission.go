package meshwire

import (
	"fmt"
	"slices"

	"github.com/gocotal/cotal/wire"
)

// Run admission (SPEC §14.8): the write-once record of the authority a hosted run was admitted
// under, beside the separate create-only marker that revokes it. A run's host acts on channels
// through its mediator, whose credential reads the whole chat stream; the admission's ceiling is
// what confines a run to what its caller may read and post, and the host checks it before every
// channel effect. The driver holds no row on the store.

// revocationKeyPrefix starts a revocation marker's key.
const revocationKeyPrefix = "revoked.v1."

// RevocationKey returns "revoked.v1.<endpoint>.<runId>", the marker that revokes one run.
func RevocationKey(endpoint wire.EndpointName, runID string) string {
	return revocationKeyPrefix + endpoint.Token() + "." + wire.Token(runID)
}

// The modes of a subject permission's allow.
const (
	AllowAll      = "all"
	AllowNone     = "none"
	AllowPatterns = "patterns"
)

// SubjectAllow is what a permission allows: every subject, none, or the subjects its patterns
// match.
type SubjectAllow struct {
	Mode     string   `json:"mode"`
	Patterns []string `json:"patterns,omitempty"`
}

// SubjectPermission is one direction of a ceiling: what it allows, less what it denies (deny
// wins).
type SubjectPermission struct {
	Allow SubjectAllow `json:"allow"`
	Deny  []string     `json:"deny"`
}

// Ceiling is the channel authority a run was admitted under: the chat subjects it may publish
// on and the ones it may read, as its caller's credential allowed them.
type Ceiling struct {
	Publish   SubjectPermission `json:"publish"`
	Subscribe SubjectPermission `json:"subscribe"`
}

// CeilingAll is the ceiling of a run the operator's own instrument started: every channel.
func CeilingAll() Ceiling {
	all := SubjectPermission{Allow: SubjectAllow{Mode: AllowAll}, Deny: []string{}}
	return Ceiling{Publish: all, Subscribe: all}
}

// patterns is a permission that allows the subjects ps match, or none when ps is empty.
func patterns(ps []string) SubjectPermission {
	if len(ps) == 0 {
		return SubjectPermission{Allow: SubjectAllow{Mode: AllowNone}, Deny: []string{}}
	}
	return SubjectPermission{Allow: SubjectAllow{Mode: AllowPatterns, Patterns: ps}, Deny: []string{}}
}

// GrantCeiling is the ceiling of a caller whose credential may post to the channels publish
// lists (as itself) and read the channels subscribe lists (channel patterns).
func GrantCeiling(s wire.Space, caller wire.Principal, publish, subscribe []string) (Ceiling, error) {
	var pub, sub []string
	for _, ch := range publish {
		p, err := s.ChatPattern(caller.Owner(), caller.Actor(), ch)
		if err != nil {
			return Ceiling{}, err
		}
		pub = append(pub, p)
	}
	for _, ch := range subscribe {
		p, err := s.ChatFilter(ch)
		if err != nil {
			return Ceiling{}, err
		}
		sub = append(sub, p)
	}
	return Ceiling{Publish: patterns(pub), Subscribe: patterns(sub)}, nil
}

// covers reports whether the permission allows every subject pattern matches.
func (p SubjectPermission) covers(pattern string) bool {
	if slices.ContainsFunc(p.Deny, func(d string) bool { return PatternsOverlap(d, pattern) }) {
		return false
	}
	switch p.Allow.Mode {
	case AllowAll:
		return true
	case AllowPatterns:
		return slices.ContainsFunc(p.Allow.Patterns, func(a string) bool { return PatternCovers(a, pattern) })
	}
	return false
}

func (p SubjectPermission) validate(field string) error {
	switch p.Allow.Mode {
	case AllowAll, AllowNone:
		if p.Allow.Patterns != nil {
			return wire.Invalid(field+".allow.patterns", "", "only the patterns mode lists patterns")
		}
	case AllowPatterns:
		if len(p.Allow.Patterns) == 0 {
			return wire.Invalid(field+".allow.patterns", "", "the patterns mode lists at least one pattern")
		}
	default:
		return wire.Invalidf(field+".allow.mode", p.Allow.Mode, "must be %s, %s or %s", AllowAll, AllowNone, AllowPatterns)
	}
	if p.Deny == nil {
		return wire.Invalid(field+".deny", "", "is required (an empty list denies nothing)")
	}
	return nil
}

// Caller is the caller a run was admitted for (an endpoint caller: owner, actor, lifecycle uid
// and, for an issued credential, its generation).
type Caller struct {
	Owner      string `json:"owner"`
	Actor      string `json:"actor"`
	UID        string `json:"uid"`
	Generation string `json:"generation,omitempty"`
}

// The provenance kinds of an admission.
const (
	ProvenanceIssued   = "issued"
	ProvenanceOperator = "operator"
)

// Provenance is where a run's authority came from: an issued credential (its reference and the
// revision it was resolved at), or the operator, who names itself and why (a run the operator's
// instrument started, or one a manager admitted from its caller's credential).
type Provenance struct {
	Kind             string     `json:"kind"`
	Ref              *IssuedRef `json:"ref,omitempty"`
	ResolvedRevision int64      `json:"resolvedRevision,omitempty"`
	By               string     `json:"by,omitempty"`
	Reason           string     `json:"reason,omitempty"`
}

// IssuedRef names an issued credential (SPEC §13.15).
type IssuedRef struct {
	Space      string `json:"space"`
	Owner      string `json:"owner"`
	Actor      string `json:"actor"`
	UID        string `json:"uid"`
	Generation string `json:"generation"`
}

func (p Provenance) validate() error {
	switch {
	case p.Kind == ProvenanceOperator && p.By != "" && p.Reason != "" && p.Ref == nil && p.ResolvedRevision == 0:
		return nil
	case p.Kind == ProvenanceIssued && p.Ref != nil && p.ResolvedRevision > 0 && p.By == "" && p.Reason == "" &&
		p.Ref.Space != "" && p.Ref.Owner != "" && p.Ref.Actor != "" && p.Ref.UID != "" && p.Ref.Generation != "":
		return nil
	}
	return wire.Invalid("provenance", p.Kind, "must be an issued credential's reference at a revision, or an operator's, naming who and why")
}

// admissionVersion is the version of the admission and revocation records.
const admissionVersion = 1

// Admission is a run's admission record, under admission.v1.<endpoint>.<runId>.
type Admission struct {
	Version    int        `json:"version"`
	Space      string     `json:"space"`
	Endpoint   string     `json:"endpoint"`
	RunID      string     `json:"runId"`
	InstanceID string     `json:"instanceId"`
	Caller     Caller     `json:"caller"`
	Ceiling    Ceiling    `json:"ceiling"`
	Provenance Provenance `json:"provenance"`
	AdmittedAt int64      `json:"admittedAt"`
}

// ParseAdmission reads an admission record: a closed shape, at this version, whole.
func ParseAdmission(data []byte) (Admission, error) {
	var a Admission
	if err := decodeClosed(data, "run admission", &a); err != nil {
		return Admission{}, err
	}
	switch {
	case a.Version != admissionVersion:
		return Admission{}, wire.Invalidf("version", fmt.Sprint(a.Version), "must be %d", admissionVersion)
	case ValidateRunID(a.RunID) != nil:
		return Admission{}, ValidateRunID(a.RunID)
	case a.Space == "" || a.Endpoint == "" || a.InstanceID == "" || a.Caller.Owner == "" || a.Caller.Actor == "":
		return Admission{}, wire.Invalid("admission", "", "names its space, endpoint, instance and caller")
	case a.AdmittedAt <= 0:
		return Admission{}, wire.Invalid("admittedAt", "", "must be a positive time")
	}
	if err := a.Provenance.validate(); err != nil {
		return Admission{}, err
	}
	if err := a.Ceiling.Publish.validate("ceiling.publish"); err != nil {
		return Admission{}, err
	}
	return a, a.Ceiling.Subscribe.validate("ceiling.subscribe")
}

// MayRead reports whether the admission lets its run read channel (a channel, or a channel
// pattern: every channel it covers).
func (a Admission) MayRead(s wire.Space, channel string) (bool, error) {
	p, err := s.ChatFilter(channel)
	if err != nil {
		return false, err
	}
	return a.Ceiling.Subscribe.covers(p), nil
}

// MayReadFrom reports whether the admission lets its run read what sender posts on channel.
func (a Admission) MayReadFrom(s wire.Space, sender wire.Principal, channel string) (bool, error) {
	p, err := s.ChatPattern(sender.Owner(), sender.Actor(), channel)
	if err != nil {
		return false, err
	}
	return a.Ceiling.Subscribe.covers(p), nil
}

// Revocation is a run's revocation marker, under revoked.v1.<endpoint>.<runId>: permanent.
type Revocation struct {
	Version   int    `json:"version"`
	RunID     string `json:"runId"`
	Reason    string `json:"reason"`
	By        string `json:"by"`
	RevokedAt int64  `json:"revokedAt"`
}

// NewRevocation returns run runID's revocation by by, for reason, at at.
func NewRevocation(runID, by, reason string, at int64) (Revocation, error) {
	r := Revocation{Version: admissionVersion, RunID: runID, Reason: reason, By: by, RevokedAt: at}
	return r, r.validate()
}

func (r Revocation) validate() error {
	switch {
	case r.Version != admissionVersion:
		return wire.Invalidf("version", fmt.Sprint(r.Version), "must be %d", admissionVersion)
	case ValidateRunID(r.RunID) != nil:
		return ValidateRunID(r.RunID)
	case r.By == "" || r.Reason == "":
		return wire.Invalid("revocation", "", "names who revoked the run and why")
	case r.RevokedAt <= 0:
		return wire.Invalid("revokedAt", "", "must be a positive time")
	}
	return nil
}

// ParseRevocation reads run runID's revocation marker.
func ParseRevocation(data []byte, runID string) (Revocation, error) {
	var r Revocation
	if err := decodeClosed(data, "run revocation", &r); err != nil {
		return Revocation{}, err
	}
	if err := r.validate(); err != nil {
		return Revocation{}, err
	}
	if r.RunID != runID {
		return Revocation{}, wire.Invalidf("runId", r.RunID, "must be the run's own (%s)", runID)
	}
	return r, nil
}
