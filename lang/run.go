package lang

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// LanguageVersion is the version this engine stamps on the runs it starts (spec §8.4).
const LanguageVersion = "2"

// ServedVersions are the language versions this build runs: version 2, and the records of
// version 1, whose only difference here is what log accepts.
var ServedVersions = []string{"1", "2"}

// The pins' defaults (spec §8.3).
const (
	DefaultYieldEvery    = 1024
	DefaultStepBudget    = 1_000_000
	DefaultEffectCeiling = 10_000
)

// RunOptions configure a run.
type RunOptions struct {
	// RunID is the run's id; required.
	RunID string
	// Handler performs the effects; required.
	Handler Handler
	// Pins are a recorded run's pins: a resume is bound to them (a language version this build
	// does not serve is L5023, another than the record's L5008; a Seed or StartedAt given and
	// different is L5009). Nil resolves fresh pins.
	Pins *Pins
	// Seed and StartedAt override the fresh pins' defaults (the run id, and the handler's clock).
	Seed      string
	StartedAt *int64
	// Journal is a recorded run's entries, to resume from.
	Journal []Entry
	// StepBudget and EffectCeiling override the fresh pins' defaults when positive.
	StepBudget, EffectCeiling int
	// Store, when set, is given every journal write, in order, before the run goes on: a store
	// that refuses one ends the run with L5010, which no program catches.
	Store func(Entry) error
	// ResultBound, when positive, is the most bytes a settled result may canonicalize to; a
	// result over it is refused ahead of the settling append (L5006).
	ResultBound int
	// ShouldStop is asked before every unrecorded effect; a reason ends the run there, releasing
	// it (L5012), so the journal says exactly where it stopped.
	ShouldStop func() string
}

// Result is a run's outcome: its value, its journal (folded by key), its log lines, its pins and
// the steps its walk took. Err is the failure that ended it, if one did: a *Thrown the program
// did not catch, or a *Fault.
type Result struct {
	RunID       string
	Value       Value
	Entries     []Entry
	Logs        [][]Value
	Pins        Pins
	ProgramHash string
	Steps       int
	Err         error
}

// Run validates source and runs it under o's handler, from the top; with o.Journal it resumes:
// recorded effects return their recorded results, and the first unrecorded one is performed.
// An error is returned for what stops a run before it starts (a refused program, bad options,
// pins or journal); what ends it once started is Result.Err.
func Run(ctx context.Context, source string, o RunOptions) (*Result, error) {
	if o.RunID == "" || o.Handler == nil {
		return nil, errors.New("lang: a run needs a run id and a handler")
	}
	prog, report := check(source)
	if !report.Accepted {
		return nil, &RefusedError{Report: report}
	}
	pins, err := resolvePins(o)
	if err != nil {
		return nil, err
	}
	j := newJournal(o.RunID)
	if len(o.Journal) > 0 {
		if o.Pins == nil {
			return nil, &Fault{Code: "L5021", Message: "a resume over a journal needs the run's pins"}
		}
		if err := j.load(o.Journal); err != nil {
			return nil, err
		}
	}
	j.store = o.Store
	in := &interp{ctx: ctx, runID: o.RunID, source: source, pins: pins, handler: o.Handler, journal: j,
		shouldStop: o.ShouldStop, resultBound: o.ResultBound}
	in.globals = in.library()
	for k, v := range in.effectBuiltins() {
		in.globals[k] = v
	}
	root := in.startSched(pins.StartedAt)
	runErr := in.block(newEnv(nil), root, prog.Body)
	res := &Result{RunID: o.RunID, Value: nil, Entries: j.Entries(), Pins: pins, ProgramHash: ProgramHash(source), Steps: in.steps}
	for _, l := range in.logs {
		res.Logs = append(res.Logs, l.values)
	}
	switch runErr.(type) {
	case nil:
	case *returned:
		res.Value = runErr.(*returned).v
	default:
		res.Err = runErr
	}
	return res, nil
}

// RefusedError is a program the validator refused: it does not run.
type RefusedError struct{ Report *Report }

func (e *RefusedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the program is refused:")
	for _, d := range e.Report.Diagnostics {
		fmt.Fprintf(&b, "\n  %s", d)
	}
	return b.String()
}

func resolvePins(o RunOptions) (Pins, error) {
	if o.Pins != nil {
		p := *o.Pins
		switch {
		case !slices.Contains(ServedVersions, p.LanguageVersion):
			return p, &Fault{Code: "L5023", Message: fmt.Sprintf("no engine in this build serves language version %q; it serves %s", p.LanguageVersion, strings.Join(ServedVersions, ", "))}
		case o.Seed != "" && o.Seed != p.Seed:
			return p, &Fault{Code: "L5009", Message: fmt.Sprintf("the seed %q is not the recorded %q", o.Seed, p.Seed)}
		case o.StartedAt != nil && *o.StartedAt != p.StartedAt:
			return p, &Fault{Code: "L5009", Message: fmt.Sprintf("startedAt %d is not the recorded %d", *o.StartedAt, p.StartedAt)}
		case p.StepBudget <= 0 || p.EffectCeiling <= 0:
			return p, &Fault{Code: "L5009", Message: "the recorded pins carry no step budget or effect ceiling"}
		}
		return p, nil
	}
	p := Pins{Seed: o.Seed, YieldEvery: DefaultYieldEvery, StepBudget: DefaultStepBudget, EffectCeiling: DefaultEffectCeiling, LanguageVersion: LanguageVersion}
	if p.Seed == "" {
		p.Seed = o.RunID
	}
	if o.StartedAt != nil {
		p.StartedAt = *o.StartedAt
	} else {
		p.StartedAt = o.Handler.Now()
	}
	if o.StepBudget > 0 {
		p.StepBudget = o.StepBudget
	}
	if o.EffectCeiling > 0 {
		p.EffectCeiling = o.EffectCeiling
	}
	return p, nil
}

// RecordedRun is a recorded run, in the shape of the reference's recorded-run fixtures.
type RecordedRun struct {
	LanguageVersion string            `json:"languageVersion"`
	Source          string            `json:"source"`
	RunID           string            `json:"runId"`
	Seed            string            `json:"seed"`
	StartedAt       int64             `json:"startedAt"`
	Pins            Pins              `json:"pins"`
	Entries         []Entry           `json:"entries"`
	Logs            []json.RawMessage `json:"logs"`
	Value           json.RawMessage   `json:"value"`
	// Error is the failure that ended the run, when one did.
	Error *RunError `json:"error,omitempty"`
}

// RunError is a run's ending failure in a record.
type RunError struct {
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
}

// RunErrorOf is a run's ending failure as a record carries it.
func RunErrorOf(err error) *RunError {
	switch e := err.(type) {
	case *Thrown:
		return &RunError{Code: e.Code(), Message: e.Error()}
	case *Fault:
		return &RunError{Code: e.Code, Message: e.Message}
	}
	return &RunError{Message: err.Error()}
}

// JSON renders a value as JavaScript's JSON.stringify would, for a trace or a record: a
// function or undefined in a record is left out, and in an array or at the top is null.
func JSON(v Value) json.RawMessage { return toJSON(v) }

// ParseJSON decodes one JSON value into a language value, frozen as a value that crosses an
// effect boundary is: what a handler hands back from JSON it read.
func ParseJSON(raw json.RawMessage) (Value, error) { return fromJSON(raw, true) }

// startSched gives the interpreter its scheduler, and returns the root frame, whose coroutine
// holds the baton.
func (in *interp) startSched(startedAt int64) *frame {
	in.sched = &sched{}
	// Only the simulator itself takes virtual time: a handler that wraps it performs through
	// its own Perform, as a live one does.
	switch t := in.handler.(type) {
	case *Sim:
		in.sched.timed = t
	case *recording:
		in.sched.timed = t
	}
	root := newFrame(nil, "", startedAt, false)
	root.co = newCoro()
	in.sched.holder = root.co
	return root
}
