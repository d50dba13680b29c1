package lang

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Migrate and fork (spec §11.2, §11.3): both rest on a dry walk of a program over a recorded
// journal, read-only, that stops at the first step the journal has not settled.

// Recorded is a run's record as a migration or a fork reads it: its id, pins and entries.
type Recorded struct {
	RunID   string
	Pins    Pins
	Entries []Entry
}

// Migration is a migration's report: whether the edited source may take the run over, the
// recorded steps it still reaches, where its walk stopped, and each recorded step it no longer
// reaches (an orphan) with the verdict the orphan table gives.
type Migration struct {
	// ID is the digest of the report without it, so a walk re-run lands on the same record.
	ID       string   `json:"id"`
	Accepted bool     `json:"accepted"`
	Reached  []string `json:"reached"`
	// Frontier is the first step the walk found unrecorded; "" when it walked to the end.
	Frontier   string      `json:"frontier,omitempty"`
	Orphans    []Orphan    `json:"orphans"`
	Rejections []Rejection `json:"rejections"`
}

// Orphan is a recorded step the edited source no longer reaches.
type Orphan struct {
	Step    string `json:"step"`
	Kind    string `json:"kind"`
	Verdict string `json:"verdict"` // ignored, kept or rejected
	Code    string `json:"code,omitempty"`
	Reason  string `json:"reason"`
}

// Rejection is why a migration is refused.
type Rejection struct {
	Step    string `json:"step,omitempty"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// MigrateOptions are a migration's explicit overrides: spawned agents the operator adopts or
// releases, and resolved checkpoints they discard, by step key.
type MigrateOptions struct {
	Adopt, Release, Discard []string
}

// The orphan verdicts.
const (
	VerdictIgnored  = "ignored"
	VerdictKept     = "kept"
	VerdictRejected = "rejected"
)

// walk runs source over rec's journal as a dry walk and returns the journal, the keys it reached
// and what ended it: nil when it walked to the end, a *frontier, or another error.
func walk(ctx context.Context, source string, rec Recorded) (*journal, map[string]bool, error, error) {
	prog, report := check(source)
	if !report.Accepted {
		return nil, nil, nil, &RefusedError{Report: report}
	}
	j := newJournal(rec.RunID)
	if err := j.load(rec.Entries); err != nil {
		return nil, nil, nil, err
	}
	in := &interp{ctx: ctx, runID: rec.RunID, source: source, pins: rec.Pins, handler: walkHandler{}, journal: j,
		walk: true, reached: map[string]bool{}}
	in.globals = in.library()
	for k, v := range in.effectBuiltins() {
		in.globals[k] = v
	}
	end := in.block(newEnv(nil), in.startSched(rec.Pins.StartedAt), prog.Body)
	if _, ok := end.(*returned); ok {
		end = nil
	}
	return j, in.reached, end, nil
}

// walkHandler performs nothing: a dry walk stops before any live step.
type walkHandler struct{}

func (walkHandler) Now() int64 { return 0 }

func (walkHandler) Perform(context.Context, *Request) (*Outcome, error) {
	return nil, errors.New("a dry walk performs no effect")
}

// Migrate decides whether source may take over the recorded run (spec §11.2): every recorded
// step it reaches must still ask what it asked (else L5001), every scope it enters must still
// have its recorded branches (L5022), and each recorded step it no longer reaches is judged by
// the orphan table: sleep, wait, monitor, ask and the scopes are ignored; a turn is kept (the
// agent spoke); a spawn is rejected (L5003) unless adopted or released; a resolved checkpoint is
// rejected (L5004) unless discarded; a notify is rejected (L5013), since nothing here shows its
// notice was delivered; an open conclave is rejected (L5014); any other kind L5015.
func Migrate(ctx context.Context, source string, rec Recorded, o MigrateOptions) (*Migration, error) {
	j, reached, end, err := walk(ctx, source, rec)
	if err != nil {
		return nil, err
	}
	m := &Migration{Orphans: []Orphan{}, Rejections: []Rejection{}, Reached: []string{}}
	var fr *frontier
	var fault *Fault
	switch {
	case errors.As(end, &fr):
		m.Frontier = fr.key
	case errors.As(end, &fault):
		m.Rejections = append(m.Rejections, Rejection{Code: fault.Code, Message: fault.Message, Step: fault.Step})
	case end != nil:
		m.Rejections = append(m.Rejections, Rejection{Code: codeOf(end), Message: "the edited program fails on the recorded history: " + end.Error()})
	}
	if len(m.Rejections) > 0 {
		// What the walk never reached past a rejection says nothing: it is not judged.
		return m.finish()
	}
	for _, e := range j.Entries() {
		key := e.Key()
		if reached[key] {
			m.Reached = append(m.Reached, key)
			continue
		}
		if underLoser(key, j) {
			continue // decided history: a race's losing arm
		}
		o := orphan(e, o)
		m.Orphans = append(m.Orphans, o)
		if o.Verdict == VerdictRejected {
			m.Rejections = append(m.Rejections, Rejection{Step: key, Code: o.Code, Message: o.Reason})
		}
	}
	return m.finish()
}

// finish decides the migration and files its id.
func (m *Migration) finish() (*Migration, error) {
	m.Accepted = len(m.Rejections) == 0
	id, err := digest(reportValue(m))
	if err != nil {
		return nil, err
	}
	m.ID = id
	return m, nil
}

func codeOf(err error) string {
	var t *Thrown
	if errors.As(err, &t) && t.Code() != "" {
		return t.Code()
	}
	return "L5001"
}

// underLoser reports whether key lies under a losing branch of a settled race.
func underLoser(key string, j *journal) bool {
	for _, e := range j.Entries() {
		if e.Kind != "race" || e.Cancel == nil {
			continue
		}
		for _, l := range e.Cancel.Losers {
			if strings.HasPrefix(key, e.Key()+"/b:"+l+"/") {
				return true
			}
		}
	}
	return false
}

// orphan judges one recorded step the edited source no longer reaches.
func orphan(e Entry, o MigrateOptions) Orphan {
	key := e.Key()
	or := Orphan{Step: key, Kind: e.Kind, Verdict: VerdictIgnored}
	switch e.Kind {
	case "sleep", "wait", "monitor", "ask", "waitUntil", "parallel", "race", "fanOut":
		or.Reason = "nothing outlives it"
	case "turn":
		or.Verdict, or.Reason = VerdictKept, "the agent already spoke; the record stays, and the source no longer accounts for it"
	case "notify":
		or.Verdict, or.Code, or.Reason = VerdictRejected, "L5013", "Orphaned undelivered notice on migrate: nothing shows its notice reached the addressee's next turn"
	case "conclave":
		if e.Closed != nil && *e.Closed {
			or.Reason = "its membership was released"
		} else {
			or.Verdict, or.Code, or.Reason = VerdictRejected, "L5014", "Orphaned open conclave on migrate: its membership was never released"
		}
	case "spawn":
		switch {
		case slices.Contains(o.Adopt, key):
			or.Verdict, or.Reason = VerdictKept, "its agent is adopted"
		case slices.Contains(o.Release, key):
			or.Reason = "its agent is released"
		default:
			or.Verdict, or.Code, or.Reason = VerdictRejected, "L5003", "Orphaned spawn on migrate: its agent lives; adopt or release it"
		}
	case "checkpoint":
		resolved := e.Status == StatusOK && strings.Contains(string(e.Result), `"outcome":"resolved"`)
		switch {
		case !resolved:
			or.Reason = "it was never resolved"
		case slices.Contains(o.Discard, key):
			or.Reason = "its resolution is discarded"
		default:
			or.Verdict, or.Code, or.Reason = VerdictRejected, "L5004", "Orphaned resolved checkpoint on migrate: a person decided it; discard it explicitly"
		}
	default:
		or.Verdict, or.Code, or.Reason = VerdictRejected, "L5015", "No orphan policy for this entry kind on migrate"
	}
	return or
}

// reportValue is a migration report as a value, for its digest.
func reportValue(m *Migration) Value {
	r := NewRecord()
	r.Set("accepted", m.Accepted)
	strs := func(xs []string) *Array {
		a := &Array{}
		for _, x := range xs {
			a.Elems = append(a.Elems, x)
		}
		return a
	}
	r.Set("reached", strs(m.Reached))
	r.Set("frontier", m.Frontier)
	os := &Array{}
	for _, o := range m.Orphans {
		os.Elems = append(os.Elems, projection("step", o.Step, "kind", o.Kind, "verdict", o.Verdict, "code", o.Code))
	}
	r.Set("orphans", os)
	rs := &Array{}
	for _, x := range m.Rejections {
		rs.Elems = append(rs.Elems, projection("step", x.Step, "code", x.Code))
	}
	r.Set("rejections", rs)
	return r
}

// Fork starts a new run from a recorded one (spec §11.3): the child's journal is the parent's
// prefix up to, and excluding, the step cut, under the parent's pins unchanged. The cut must be
// in the journal (L5017), reached by the parent program's own path (L5018), and not inside a
// race's losing arm, whose outcome was already decided (L5020). It returns the child's entries,
// written for childRunID.
func Fork(ctx context.Context, source string, parent Recorded, cut, childRunID string) ([]Entry, error) {
	j, reached, end, err := walk(ctx, source, parent)
	if err != nil {
		return nil, err
	}
	c := j.lookup(cut)
	if c == nil {
		return nil, &Fault{Code: "L5017", Message: fmt.Sprintf("the fork's cut %s is not a step of run %s's journal", cut, parent.RunID)}
	}
	if underLoser(cut, j) {
		return nil, &Fault{Code: "L5020", Message: fmt.Sprintf("the cut %s lies in a race's losing arm, whose outcome was already decided", cut)}
	}
	var fr *frontier
	if !reached[cut] && !(errors.As(end, &fr) && fr.key == cut) {
		return nil, &Fault{Code: "L5018", Message: fmt.Sprintf("the parent program's own path never reaches %s", cut)}
	}
	var out []Entry
	for _, e := range j.Entries() {
		key := e.Key()
		if e.Seq >= c.Seq || strings.HasPrefix(cut, key+"/b:") {
			continue // at or after the cut, or a scope around it, which the child re-enters
		}
		e.Run = childRunID
		out = append(out, e)
	}
	return out, nil
}
