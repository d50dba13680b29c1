package lang

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gocotal/cotal/lang/internal/syntax"
)

// Pins are what a run is pinned to besides its source (spec §8.3).
type Pins struct {
	Seed            string `json:"seed"`
	StartedAt       int64  `json:"startedAt"`
	YieldEvery      int    `json:"yieldEvery"`
	StepBudget      int    `json:"stepBudget"`
	EffectCeiling   int    `json:"effectCeiling"`
	LanguageVersion string `json:"languageVersion"`
}

// Handler performs a run's effects: the mesh, or the simulator.
type Handler interface {
	// Now is the handler's clock, in ms: an entry's startedAt and endedAt.
	Now() int64
	// Perform carries out one effect. A failure the program may catch is an *EffectError.
	Perform(ctx context.Context, req *Request) (*Outcome, error)
}

// ConclaveHost is a Handler that hosts conclaves (spec §7.5). OpenConclave creates the
// conclave's channel, or takes the one its channel option names, joins its members (req.Args[0],
// agent handles) and answers the channel; it is asked again when a run taken back re-enters a
// conclave it was inside, and must find what it did. CloseConclave releases the membership once
// the body returns, and once it is cancelled too: a cancelled body's entry still records that
// it did not close (spec §7.5), and the host releases what it can at once rather than hold it
// for the run's end. A Handler that is not a ConclaveHost has each conclave refused as beyond
// it (L5016): the run is held for a host that can.
type ConclaveHost interface {
	OpenConclave(ctx context.Context, req *Request) (channel string, err error)
	CloseConclave(ctx context.Context, req *Request, channel string) error
}

// Request is one effect for a handler: its step, its identity and its arguments (frozen values,
// as the effect's signature gives them; Options is its option bag, or nil).
type Request struct {
	RunID     string
	Key       string
	Kind      string
	Name      string
	RequestID string
	Attempt   int
	// StartedAt is when the step began, by the handler's clock: its pending entry's time, the
	// recorded one on a recovery (a durable timer's deadline counts from it).
	StartedAt int64
	Args      []Value
	Options   *Record
	// escalate marks a checkpoint that mints a second attempt when the first expires.
	escalate bool
}

// Option returns an option of the request's bag, or Undefined.
func (r *Request) Option(name string) Value {
	if r.Options == nil {
		return Undefined
	}
	if v, ok := r.Options.Get(name); ok {
		return v
	}
	return Undefined
}

// Outcome is an effect's result, and what the handler bound for a recovery (external).
type Outcome struct {
	Result   Value
	External Value
}

// CapabilityRefusal is a handler's refusal to attempt a step this host cannot perform (spec
// §10.7): the entry settles refused under Code, and the run is held for a capable host (L5025);
// a resume on one performs the step afresh.
type CapabilityRefusal struct {
	Code    string
	Message string
}

func (r *CapabilityRefusal) Error() string { return r.Code + " " + r.Message }

// EffectError is an effect's failure: the program catches it as a frozen
// { code, kind, message, detail? }.
type EffectError struct {
	Code    string
	Kind    string
	Message string
	Detail  Value
}

func (e *EffectError) Error() string { return e.Code + " " + e.Message }

// record is the failure as a program sees it.
func (e *EffectError) record() *Record {
	r := NewRecord()
	r.Set("code", e.Code)
	r.Set("kind", e.Kind)
	r.Set("message", e.Message)
	if e.Detail != nil && e.Detail != Undefined {
		r.Set("detail", e.Detail)
	}
	freeze(r)
	return r
}

// crossing refuses an effect argument without a canonical form (L3041, L3042), before any
// journal entry is written.
func crossing(effect string, i int, v Value) error {
	if _, err := Canonical(v); err != nil {
		var ce *crossError
		if errors.As(err, &ce) && ce.function {
			return runtimeFault("L3042", "%s, argument %d: %v", effect, i+1, err)
		}
		return runtimeFault("L3041", "%s, argument %d: %v", effect, i+1, err)
	}
	return nil
}

// perform journals and performs one effect in frame f (spec §10.5, §10.7). projection is its
// hashed inputs (§6.4); live performs it through the handler.
func (in *interp) perform(f *frame, kind, name string, projection *Record, req *Request) (Value, error) {
	if strings.ContainsAny(name, "/#:") {
		return nil, runtimeFault("L3025", "the step name %q contains /, # or :, which would forge a step key", name)
	}
	if name != "" && !stepName.MatchString(name) {
		return nil, runtimeFault("L3014", "the step name %q is not a kebab-case token of 1 to 64 characters", name)
	}
	inputHash, err := digest(projection)
	if err != nil {
		return nil, runtimeFault("L3041", "%s: %v", kind, err)
	}
	occ := f.occurrence(kind, name)
	key := StepKey(f.path, kind, name, occ)
	in.effects++
	rec := in.journal.lookup(key)
	if err := in.walked(key, rec); err != nil {
		return nil, err
	}
	switch {
	case rec != nil && rec.InputHash != inputHash:
		return nil, &Fault{Code: "L5001", Step: key, Message: fmt.Sprintf("step %s: the recorded input hash %s is not this program's %s: the program changed what this step asks", key, rec.InputHash, inputHash)}
	case rec != nil && rec.State == StateSettled && rec.Status == StatusOK:
		v, err := fromJSON(rec.Result, true)
		if err != nil {
			return nil, &Fault{Code: "L5024", Message: fmt.Sprintf("step %s: %v", key, err)}
		}
		in.advance(f, rec)
		return v, nil
	case rec != nil && rec.State == StateSettled && rec.Status == StatusFailed:
		in.advance(f, rec)
		return nil, &Thrown{V: entryErrorRecord(rec.Error)}
	case rec != nil && rec.State == StateSettled && rec.Status == StatusCanceled:
		return nil, errCancelled // replay-cancelled: the branch was cut here
	}
	if in.effects > in.pins.EffectCeiling {
		return nil, runtimeFault("L4009", "the run reached its effect ceiling of %d (effectCeiling)", in.pins.EffectCeiling)
	}
	attempt := 0
	reqID := RequestID(in.runID, key, inputHash, attempt)
	if rec != nil && rec.State == StatePending && rec.RequestID != "" {
		reqID = rec.RequestID // a recovery re-submits under the recorded identity
		if rec.Attempt != nil {
			attempt = *rec.Attempt
		}
	}
	if f.isCancelled() {
		return nil, errCancelled // a cancelled branch performs no new effect
	}
	if in.shouldStop != nil {
		if why := in.shouldStop(); why != "" {
			return nil, &Fault{Code: "L5012", Step: key, Message: "the run was released before step " + key + ": " + why}
		}
	}
	var e Entry
	if rec != nil && rec.State == StatePending {
		e = *rec // a recovery: its pending write is durable already, and is not written twice
	} else if e, err = in.journal.begin(Entry{Scope: f.path, Kind: kind, Name: name, Occurrence: occ, InputHash: inputHash,
		RequestID: reqID, Attempt: &attempt, StartedAt: in.handler.Now()}); err != nil {
		return nil, err
	}
	req.RunID, req.Key, req.Kind, req.Name, req.RequestID, req.Attempt = in.runID, key, kind, name, reqID, attempt
	req.StartedAt = e.StartedAt
	out, herr := in.sched.perform(in, f, f.co, req)
	if in.ctx.Err() != nil {
		// The host let the run go while the effect was out: its entry stays pending, and a
		// resume re-binds to it under the recorded request id.
		return nil, &Fault{Code: "L5012", Step: key, Message: fmt.Sprintf("the run was released while step %s was in flight: %v", key, context.Cause(in.ctx))}
	}
	if herr == nil && req.escalate && expired(out.Result) && attempt == 0 {
		out, herr = in.escalate(f, &e, req, inputHash, out)
	}
	end := in.handler.Now()
	e.EndedAt = &end
	if isCancelledErr(herr) {
		e.Status = StatusCanceled
		if err := in.journal.settle(e); err != nil {
			return nil, err
		}
		return nil, errCancelled
	}
	if refusal, ok := errors.AsType[*CapabilityRefusal](herr); ok {
		return nil, in.refused(e, refusal)
	}
	if herr != nil {
		return nil, in.settleFailed(f, e, end, herr)
	}
	if out.External != nil && out.External != Undefined {
		if c, err := Canonical(out.External); err == nil {
			e.External = c
		}
	}
	c, err := Canonical(out.Result)
	if err != nil {
		e.Status = StatusFailed
		e.Error = &EntryError{Code: "L4000", Kind: "handler-fault", Message: "the result has no canonical form: " + err.Error()}
		if err := in.journal.settle(e); err != nil {
			return nil, err
		}
		in.clock(f, end)
		return nil, &Thrown{V: entryErrorRecord(e.Error)}
	}
	if in.resultBound > 0 && len(c) > in.resultBound {
		// Refused ahead of the settling append: the effect stands in the world, the entry stays
		// pending, and the run unwinds as for a refused append.
		return nil, &Fault{Code: "L5006", Step: key, Message: fmt.Sprintf("the result of step %s is %d bytes, over the journal's bound of %d", key, len(c), in.resultBound)}
	}
	e.Status, e.Result = StatusOK, c
	if err := in.journal.settle(e); err != nil {
		return nil, err
	}
	in.clock(f, end)
	v, _ := fromJSON(c, true) // the value as recorded, frozen: live and replay deliver the same
	return v, nil
}

// refused settles e refused by the host, and holds the run (L5025): a resume on a host that can
// perform the step performs it afresh.
func (in *interp) refused(e Entry, refusal *CapabilityRefusal) error {
	e.Status = StatusRefused
	e.Error = &EntryError{Code: refusal.Code, Kind: "capability", Message: refusal.Message}
	if err := in.journal.settle(e); err != nil {
		return err
	}
	key := e.Key()
	return &Fault{Code: "L5025", Step: key, Message: fmt.Sprintf("step %s was refused by this host (%s %s): the run is held for a host that can perform it", key, refusal.Code, refusal.Message)}
}

// settleFailed settles an effect the handler failed: its EffectError's code, kind, message and
// detail (a detail with no canonical form makes it an L4000 that says so), or an L4000
// handler-fault for any other error; the program catches it.
func (in *interp) settleFailed(f *frame, e Entry, end int64, herr error) error {
	var ee *EffectError
	if !errors.As(herr, &ee) {
		ee = &EffectError{Code: "L4000", Kind: "handler-fault", Message: herr.Error()}
	}
	e.Status = StatusFailed
	e.Error = &EntryError{Code: ee.Code, Kind: ee.Kind, Message: ee.Message}
	if ee.Detail != nil && ee.Detail != Undefined {
		if c, err := Canonical(ee.Detail); err == nil {
			e.Error.Detail = c
		} else {
			e.Error.Code, e.Error.Kind, e.Error.Detail = "L4000", "handler-fault", nil
			e.Error.Message = ee.Message + " (its detail could not be kept: it has no canonical form)"
		}
	}
	if err := in.journal.settle(e); err != nil {
		return err
	}
	in.clock(f, end)
	return &Thrown{V: entryErrorRecord(e.Error)}
}

// expired reports whether a checkpoint's raw outcome is an expiry.
func expired(v Value) bool {
	r, ok := v.(*Record)
	return ok && optionOf(r, "outcome") == "expired"
}

// escalate mints a checkpoint's one further attempt, addressed to its to, under the same entry
// (spec §6.5): re-issued as attempt 1 with its own request id before it is dispatched. The
// result is the last outcome with the attempts chain, one row per mint.
func (in *interp) escalate(f *frame, e *Entry, req *Request, inputHash string, first *Outcome) (*Outcome, error) {
	one := 1
	e.Attempt, e.RequestID = &one, RequestID(in.runID, req.Key, inputHash, 1)
	if err := in.journal.write(*e); err != nil { // still pending, under its second identity
		return nil, err
	}
	chain := &Array{Elems: []Value{projection("attempt", 0.0, "requestId", req.RequestID, "settled", first.Result)}}
	req.RequestID, req.Attempt = e.RequestID, 1
	out, err := in.sched.perform(in, f, f.co, req)
	if err != nil {
		return nil, err
	}
	chain.Elems = append(chain.Elems, projection("attempt", 1.0, "requestId", req.RequestID, "to", req.Option("to"), "settled", out.Result))
	res := NewRecord()
	if r, ok := out.Result.(*Record); ok {
		for _, k := range r.keys {
			res.Set(k, r.fields[k])
		}
	}
	res.Set("attempts", chain)
	return &Outcome{Result: res, External: out.External}, nil
}

// advance moves a frame's clock past a replayed entry.
func (in *interp) advance(f *frame, e *Entry) {
	if e.EndedAt != nil {
		in.clock(f, *e.EndedAt)
	}
}

func (in *interp) clock(f *frame, t int64) {
	if t > f.clock {
		f.clock = t
	}
}

// entryErrorRecord is a recorded failure as a program catches it.
func entryErrorRecord(e *EntryError) *Record {
	ee := &EffectError{Code: e.Code, Kind: e.Kind, Message: e.Message}
	if len(e.Detail) > 0 {
		ee.Detail, _ = fromJSON(e.Detail, true)
	}
	return ee.record()
}

// options reads an effect's option bag at position i: a record whose keys the effect takes
// (L3011), or nothing.
func options(effect string, args []Value, i int) (*Record, error) {
	v := arg(args, i)
	if v == Undefined {
		return nil, nil
	}
	r, ok := v.(*Record)
	if !ok {
		return nil, runtimeFault("L3011", "%s takes its options as a record: %s", effect, signatures[effect])
	}
	for _, k := range r.keys {
		if !slices.Contains(effects[effect].keys, k) {
			return nil, runtimeFault("L3011", "%s takes no option %q: %s", effect, k, signatures[effect])
		}
	}
	return r, nil
}

func optionOf(r *Record, k string) Value {
	if r == nil {
		return nil
	}
	if v, ok := r.Get(k); ok && v != Undefined {
		return v
	}
	return nil
}

// stepNameOf reads the step name option, required when the effect says so (L3012).
func stepNameOf(effect string, r *Record, required bool) (string, error) {
	v := optionOf(r, "name")
	if v == nil {
		if required {
			return "", runtimeFault("L3012", "%s needs a step name: %s", effect, signatures[effect])
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", runtimeFault("L3014", "the step name of %s must be a string", effect)
	}
	return s, nil
}

// durationOption reads a duration option, null when absent; a malformed one fails at the call.
func durationOption(effect, name string, v Value) (Value, error) {
	if v == nil || v == Undefined {
		return nil, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, libFail(effect, "%s must be a duration string", name)
	}
	if _, err := ParseDuration(s); err != nil {
		return nil, libFail(effect, "%s: %v", name, err)
	}
	return s, nil
}

// agentID reads an agent handle's id.
func agentID(effect string, v Value) (string, error) {
	if r, ok := v.(*Record); ok {
		if id, ok := r.Get("agent"); ok {
			if s, ok := id.(string); ok {
				return s, nil
			}
		}
	}
	return "", libFail(effect, "takes an agent handle (from spawn), not %s", describe(v))
}

func projection(kv ...any) *Record {
	r := NewRecord()
	for i := 0; i < len(kv); i += 2 {
		v := kv[i+1]
		if v == Undefined {
			v = nil
		}
		r.Set(kv[i].(string), v)
	}
	return r
}

// effectBuiltins are the effect primitives and the pure ones.
func (in *interp) effectBuiltins() map[string]Value {
	check := func(effect string, args []Value, from int) error {
		for i := from; i < len(args); i++ {
			if i == effects[effect].bag-1 {
				continue
			}
			if err := crossing(effect, i, args[i]); err != nil {
				return err
			}
		}
		return nil
	}
	b := map[string]Value{}
	b["spawn"] = builtin("spawn", func(in *interp, f *frame, a []Value) (Value, error) {
		opts, err := options("spawn", a, 1)
		if err != nil {
			return nil, err
		}
		persona, model, variant := arg(a, 0), Value(nil), Value(nil)
		if r, ok := persona.(*Record); ok {
			persona, model, variant = optionOf(r, "persona"), optionOf(r, "model"), optionOf(r, "variant")
		}
		p, ok := persona.(string)
		if !ok {
			return nil, libFail("spawn", "takes a persona name, or { persona, model?, variant? }")
		}
		var join []Value
		if j := optionOf(opts, "join"); j != nil {
			xs, ok := j.(*Array)
			if !ok {
				return nil, libFail("spawn", "join takes a list of channels")
			}
			for _, c := range xs.Elems {
				name, err := channelName("spawn", c)
				if err != nil {
					return nil, err
				}
				join = append(join, name)
			}
		}
		if err := crossing("spawn", 0, arg(a, 0)); err != nil {
			return nil, err
		}
		if opts != nil {
			if err := crossing("spawn", 1, opts); err != nil {
				return nil, err
			}
		}
		name, err := stepNameOf("spawn", opts, false)
		if err != nil {
			return nil, err
		}
		if name == "" {
			name = p
		}
		proj := projection("persona", p, "model", model, "variant", variant, "worktree", optionOf(opts, "worktree"),
			"role", optionOf(opts, "role"), "join", &Array{Elems: join})
		if opts != nil {
			if pl, given := opts.Get("placement"); given {
				pair, err := placement(p, pl)
				if err != nil {
					return nil, err
				}
				proj.Set("placement", pair) // only when given: a spawn without one keeps its hash
			}
		}
		return in.perform(f, "spawn", name, proj, &Request{Args: frozenArgs(a), Options: opts})
	})
	maps.Copy(b, simpleEffects(check))
	b["checkpoint"] = builtin("checkpoint", in.checkpoint)
	b["waitUntil"] = builtin("waitUntil", in.waitUntil)
	b["parallel"] = builtin("parallel", func(in *interp, f *frame, a []Value) (Value, error) { return in.branchScope(f, "parallel", a) })
	b["race"] = builtin("race", func(in *interp, f *frame, a []Value) (Value, error) { return in.branchScope(f, "race", a) })
	b["fanOut"] = builtin("fanOut", in.fanOut)
	b["conclave"] = builtin("conclave", in.conclave)
	maps.Copy(b, pureBuiltins())
	return b
}

// placement checks a spawn's placement, the manager instance it is pinned to: a record naming
// both an endpoint and an instanceId, each a non-empty string (L3048). It returns the pair the
// step's input hash takes.
func placement(persona string, v Value) (*Record, error) {
	r, ok := v.(*Record)
	if !ok {
		return nil, runtimeFault("L3048", "spawn(%q) placement must be { endpoint, instanceId }, each a non-empty string; it was given %s", persona, describe(v))
	}
	pair := NewRecord()
	for _, k := range []string{"endpoint", "instanceId"} {
		s, _ := optionOf(r, k).(string)
		if s == "" {
			return nil, runtimeFault("L3048", "spawn(%q) placement has no %s: it must name both an endpoint and an instanceId, each a non-empty string, as placement: { endpoint: \"manager\", instanceId: \"<the instance's id>\" }", persona, k)
		}
		pair.Set(k, s)
	}
	return pair, nil
}

// simpleEffects are the effects whose arguments are checked, projected and performed in one
// shape: turn, ask, sleep, wait, notify and monitor.
func simpleEffects(check func(string, []Value, int) error) map[string]Value {
	b := map[string]Value{}
	simple := func(effect string, bagAt int, requireName bool, proj func(a []Value, opts *Record) (*Record, error)) *Builtin {
		return builtin(effect, func(in *interp, f *frame, a []Value) (Value, error) {
			opts, err := options(effect, a, bagAt)
			if err != nil {
				return nil, err
			}
			if err := check(effect, a, 0); err != nil {
				return nil, err
			}
			name, err := stepNameOf(effect, opts, requireName)
			if err != nil {
				return nil, err
			}
			p, err := proj(a, opts)
			if err != nil {
				return nil, err
			}
			return in.perform(f, effect, name, p, &Request{Args: frozenArgs(a), Options: opts})
		})
	}
	b["turn"] = simple("turn", 1, true, func(a []Value, opts *Record) (*Record, error) {
		id, err := agentID("turn", arg(a, 0))
		if err != nil {
			return nil, err
		}
		d, err := durationOption("turn", "deadline", optionOf(opts, "deadline"))
		return projection("agent", id, "deadline", d), err
	})
	b["ask"] = simple("ask", 1, true, func(a []Value, opts *Record) (*Record, error) {
		id, err := agentID("ask", arg(a, 0))
		if err != nil {
			return nil, err
		}
		d, err := durationOption("ask", "deadline", optionOf(opts, "deadline"))
		return projection("agent", id, "schema", optionOf(opts, "schema"), "deadline", d, "attempts", optionOf(opts, "attempts")), err
	})
	b["sleep"] = simple("sleep", 1, false, func(a []Value, opts *Record) (*Record, error) {
		d, err := durationOption("sleep", "duration", arg(a, 0))
		if err == nil && d == nil {
			err = libFail("sleep", "takes a duration: sleep(\"10m\")")
		}
		return projection("duration", d), err
	})
	b["wait"] = simple("wait", 1, false, func(a []Value, opts *Record) (*Record, error) {
		ev, ok := arg(a, 0).(*Record)
		if !ok {
			return nil, libFail("wait", "takes an event: replied(agent), message(channel), idle(channel, duration) or down(agent)")
		}
		d, err := durationOption("wait", "timeout", optionOf(opts, "timeout"))
		return projection("event", ev, "timeout", d), err
	})
	b["notify"] = simple("notify", 2, false, func(a []Value, opts *Record) (*Record, error) {
		xs, ok := arg(a, 0).(*Array)
		if !ok {
			return nil, libFail("notify", "takes a list of agents")
		}
		var ids []Value
		for _, x := range xs.Elems {
			id, err := agentID("notify", x)
			if err != nil {
				return nil, err
			}
			ids = append(ids, id)
		}
		fact, ok := arg(a, 1).(*Record)
		if !ok {
			return nil, runtimeFault("L3043", "the fact is not a bounded decision record: it must be { decision, outcome, detail? }")
		}
		if err := boundedFact(fact); err != nil {
			return nil, err
		}
		return projection("agents", &Array{Elems: ids}, "fact", fact), nil
	})
	b["monitor"] = simple("monitor", 1, false, func(a []Value, opts *Record) (*Record, error) {
		id, err := agentID("monitor", arg(a, 0))
		return projection("agent", id), err
	})
	return b
}

// pureBuiltins are the pure primitives and the event constructors: they build a value and write
// nothing.
func pureBuiltins() map[string]Value {
	b := map[string]Value{}
	b["channel"] = builtin("channel", func(in *interp, f *frame, a []Value) (Value, error) {
		s, ok := arg(a, 0).(string)
		if !ok || s == "" {
			return nil, libFail("channel", "takes a channel name")
		}
		return frozenRecord("channel", s), nil
	})
	b["run"] = builtin("run", func(in *interp, f *frame, a []Value) (Value, error) {
		return frozenRecord("id", in.runID, "programHash", ProgramHash(in.source), "startedAt", float64(in.pins.StartedAt)), nil
	})
	b["replied"] = builtin("replied", func(in *interp, f *frame, a []Value) (Value, error) {
		id, err := agentID("replied", arg(a, 0))
		return frozenRecord("event", "replied", "agent", id), err
	})
	b["down"] = builtin("down", func(in *interp, f *frame, a []Value) (Value, error) {
		id, err := agentID("down", arg(a, 0))
		return frozenRecord("event", "down", "agent", id), err
	})
	b["message"] = builtin("message", func(in *interp, f *frame, a []Value) (Value, error) {
		ch, err := channelName("message", arg(a, 0))
		if err != nil {
			return nil, err
		}
		ev := frozenRecord("event", "message", "channel", ch)
		if o, ok := arg(a, 1).(*Record); ok {
			ev.frozen = false
			for _, k := range []string{"from", "matches"} {
				if v := optionOf(o, k); v != nil {
					ev.Set(k, v)
				}
			}
			freeze(ev)
		}
		return ev, nil
	})
	b["idle"] = builtin("idle", func(in *interp, f *frame, a []Value) (Value, error) {
		ch, err := channelName("idle", arg(a, 0))
		if err != nil {
			return nil, err
		}
		d, err := durationOption("idle", "duration", arg(a, 1))
		if err == nil && d == nil {
			err = libFail("idle", "takes a duration")
		}
		return frozenRecord("event", "idle", "channel", ch, "duration", d), err
	})
	return b
}

// channelName reads a channel handle's name, or a channel name.
func channelName(effect string, v Value) (string, error) {
	switch c := v.(type) {
	case string:
		return c, nil
	case *Record:
		if n, ok := c.Get("channel"); ok {
			if s, ok := n.(string); ok {
				return s, nil
			}
		}
	}
	return "", libFail(effect, "takes a channel (channel(name)), not %s", describe(v))
}

func frozenRecord(kv ...any) *Record {
	r := projection(kv...)
	freeze(r)
	return r
}

// frozenArgs freezes an effect's arguments, which cross the boundary (spec §4.3).
func frozenArgs(a []Value) []Value {
	for _, v := range a {
		freeze(v)
	}
	return a
}

// boundedFact checks a notify fact at the boundary (spec §6.8, L3043).
func boundedFact(fact *Record) error {
	bad := func(format string, args ...any) error {
		return runtimeFault("L3043", "the notify fact is not a bounded decision record: "+format, args...)
	}
	for _, k := range fact.keys {
		v := fact.fields[k]
		switch k {
		case "decision", "outcome":
			s, ok := v.(string)
			if !ok || !stepName.MatchString(s) {
				return bad("%s must be a step-name token", k)
			}
		case "detail":
			d, ok := v.(*Record)
			if !ok {
				return bad("detail must be a record")
			}
			if d.Len() > 8 {
				return bad("detail has %d keys, at most 8", d.Len())
			}
			for _, dk := range d.keys {
				if len(dk) > 32 || !stepName.MatchString(dk) {
					return bad("the detail key %q is not a kebab-case token of at most 32 characters", dk)
				}
				switch dv := d.fields[dk].(type) {
				case bool:
				case float64:
					if _, err := Canonical(dv); err != nil {
						return bad("the detail %s is not a finite number", dk)
					}
				case string:
					if len([]rune(dv)) > 128 || strings.ContainsAny(dv, "\n\r\u2028\u2029") || strings.IndexFunc(dv, isControl) >= 0 {
						return bad("the detail %s is not a single-line string of at most 128 characters", dk)
					}
				default:
					return bad("the detail %s is not a number, a boolean or a string", dk)
				}
			}
		default:
			return bad("it carries %q; a fact holds decision, outcome and detail only", k)
		}
	}
	if _, ok := fact.Get("decision"); !ok {
		return bad("it has no decision")
	}
	if _, ok := fact.Get("outcome"); !ok {
		return bad("it has no outcome")
	}
	return nil
}

// checkpoint is a durable pause raced against a durable timer (spec §6.5): the handler answers
// the raw outcome, and the disposition is applied from the current source.
func (in *interp) checkpoint(_ *interp, f *frame, a []Value) (Value, error) {
	opts, err := options("checkpoint", a, 2)
	if err != nil {
		return nil, err
	}
	name, ok := arg(a, 0).(string)
	if !ok {
		return nil, runtimeFault("L3012", "checkpoint needs a step name: %s", signatures["checkpoint"])
	}
	prompt, ok := arg(a, 1).(string)
	if !ok {
		return nil, libFail("checkpoint", "takes a prompt string")
	}
	if opts != nil {
		if err := crossing("checkpoint", 2, opts); err != nil {
			return nil, err
		}
	}
	timeout, err := durationOption("checkpoint", "timeout", optionOf(opts, "timeout"))
	if err != nil {
		return nil, err
	}
	onExpiry := "fail"
	if v := optionOf(opts, "onExpiry"); v != nil {
		s, _ := v.(string)
		if s != "fail" && s != "proceed" && s != "escalate" {
			return nil, libFail("checkpoint", "onExpiry is fail, proceed or escalate")
		}
		onExpiry = s
	}
	to := optionOf(opts, "to")
	if to != nil && onExpiry != "escalate" {
		return nil, runtimeFault("L3044", "to goes only with onExpiry: \"escalate\"")
	}
	proj := projection("prompt", prompt, "schema", optionOf(opts, "schema"), "timeout", timeout)
	if onExpiry == "escalate" {
		proj.Set("onExpiry", "escalate")
		proj.Set("to", to)
	}
	raw, err := in.perform(f, "checkpoint", name, proj, &Request{Args: frozenArgs(a), Options: opts, escalate: onExpiry == "escalate"})
	if err != nil {
		return nil, err
	}
	outcome, _ := raw.(*Record)
	status, _ := optionOf(outcome, "outcome").(string)
	if status == "resolved" {
		res := NewRecord()
		res.Set("status", "resolved")
		for _, k := range []string{"value", "by", "at", "artifact"} {
			if v := optionOf(outcome, k); v != nil {
				res.Set(k, v)
			}
		}
		freeze(res)
		return res, nil
	}
	if onExpiry == "fail" {
		return nil, &Thrown{V: (&EffectError{Code: "L4007", Kind: "checkpoint-expired", Message: titledMessage("L4007", "checkpoint "+name+" expired")}).record()}
	}
	return frozenRecord("status", "expired", "at", optionOf(outcome, "at")), nil
}

// titledMessage is a runtime message with its code's title, for the codes a handler reports.
func titledMessage(code, detail string) string {
	if t, ok := runtimeTitles[code]; ok {
		return t + ": " + detail
	}
	return detail
}

// runtimeTitles are the catalog titles of the run-time codes raised here.
var runtimeTitles = map[string]string{
	"L4007": "Checkpoint expired",
	"L4023": "`waitUntil` deadline elapsed",
}

// waitUntil observes a resource outside the mesh until an observation is terminal (spec §6.5).
func (in *interp) waitUntil(_ *interp, f *frame, a []Value) (Value, error) {
	opts, err := options("waitUntil", a, 1)
	if err != nil {
		return nil, err
	}
	probe := arg(a, 0)
	if !isCallable(probe) {
		return nil, runtimeFault("L3045", "the probe of waitUntil must be a function")
	}
	name, err := stepNameOf("waitUntil", opts, true)
	if err != nil {
		return nil, err
	}
	every, deadline := optionOf(opts, "every"), optionOf(opts, "deadline")
	if every == nil || deadline == nil {
		return nil, runtimeFault("L3046", "waitUntil needs both every and deadline: %s", signatures["waitUntil"])
	}
	everyMs, err1 := ParseDuration(fmt.Sprint(every))
	deadlineMs, err2 := ParseDuration(fmt.Sprint(deadline))
	if err1 != nil || err2 != nil {
		return nil, libFail("waitUntil", "every and deadline are durations")
	}
	if everyMs == 0 || everyMs > deadlineMs {
		return nil, runtimeFault("L3047", "the cadence %v is zero or longer than the deadline %v", every, deadline)
	}
	terminal := optionOf(opts, "terminal")
	proj := projection("every", every, "deadline", deadline)
	if strings.ContainsAny(name, "/#:") || !stepName.MatchString(name) {
		return nil, runtimeFault("L3014", "the step name %q is not a kebab-case token of 1 to 64 characters", name)
	}
	inputHash, _ := digest(proj)
	occ := f.occurrence("waitUntil", name)
	key := StepKey(f.path, "waitUntil", name, occ)
	in.effects++
	rec := in.journal.lookup(key)
	if err := in.walked(key, rec); err != nil {
		return nil, err
	}
	if rec != nil && rec.InputHash != inputHash {
		return nil, &Fault{Code: "L5001", Step: key, Message: fmt.Sprintf("step %s: the recorded input hash %s is not this program's %s", key, rec.InputHash, inputHash)}
	}
	if rec != nil && rec.State == StateSettled {
		in.advance(f, rec)
		if rec.Status == StatusOK {
			return fromJSON(rec.Result, true)
		}
		return nil, &Thrown{V: entryErrorRecord(rec.Error)}
	}
	attempt0 := 0
	var e Entry
	if rec != nil { // a recovery: the wait began when its pending entry says, written once
		e = *rec
	} else if e, err = in.journal.begin(Entry{Scope: f.path, Kind: "waitUntil", Name: name, Occurrence: occ, InputHash: inputHash,
		RequestID: RequestID(in.runID, key, inputHash, 0), Attempt: &attempt0, StartedAt: in.handler.Now()}); err != nil {
		return nil, err
	}
	startedAt := e.StartedAt
	var observations []Value
	for i := 0; ; i++ {
		if i > 0 {
			// The cadence: a cadence later, or at the deadline, then observe again or give up.
			now, deadlineAt := in.handler.Now(), startedAt+deadlineMs
			if err := in.sched.pause(in, f, min(everyMs, max(deadlineAt-now, 0))); err != nil {
				return nil, err
			}
			if now+everyMs > deadlineAt {
				return nil, in.waitUntilExpired(f, e, deadline, observations)
			}
		}
		child := newFrame(f, key+"/b:"+strconv.Itoa(i), f.clock, false)
		v, err := in.callValue(child, probe, nil)
		if err != nil {
			return nil, err
		}
		if _, err := Canonical(v); err != nil {
			return nil, runtimeFault("L4024", "the probe of %s answered a value with no canonical form", key)
		}
		at := in.handler.Now()
		observations = append(observations, frozenRecord("at", float64(at), "value", v))
		done := v != nil && v != Undefined
		if terminal != nil {
			t, err := in.callValue(child, terminal, []Value{v})
			if err != nil {
				return nil, err
			}
			b, ok := t.(bool)
			if !ok {
				return nil, runtimeFault("L4024", "the terminal predicate of %s answered %s, not a boolean", key, describe(t))
			}
			done = b
		}
		oc, _ := Canonical(&Array{Elems: observations})
		e.Observations = oc
		if done {
			c, _ := Canonical(v)
			e.Status, e.Result, e.EndedAt = StatusOK, c, &at
			if err := in.journal.settle(e); err != nil {
				return nil, err
			}
			in.clock(f, at)
			res, _ := fromJSON(c, true)
			return res, nil
		}
		if err := in.journal.write(e); err != nil { // still pending, with what it has seen so far
			return nil, err
		}
	}
}

// waitUntilExpired settles a waitUntil whose deadline elapsed: a catchable L4023 carrying what
// it observed.
func (in *interp) waitUntilExpired(f *frame, e Entry, deadline Value, observations []Value) error {
	ee := &EffectError{Code: "L4023", Kind: "wait-until-deadline", Message: titledMessage("L4023", fmt.Sprintf("%s gave up after %v", e.Key(), deadline)),
		Detail: frozenRecord("observations", &Array{Elems: observations})}
	end := in.handler.Now()
	e.EndedAt, e.Status = &end, StatusFailed
	d, _ := Canonical(ee.Detail)
	e.Error = &EntryError{Code: ee.Code, Kind: ee.Kind, Message: ee.Message, Detail: d}
	if err := in.journal.settle(e); err != nil {
		return err
	}
	in.clock(f, end)
	return &Thrown{V: ee.record()}
}

// scopeEntry journals a concurrency scope's own entry around body, which runs its branches and
// returns the scope's value and branch keys. A settled scope is delivered from its entry
// without entering a branch.
func (in *interp) scopeEntry(f *frame, kind, name string, proj *Record, digester func(losers []string) (string, error), body func(path string) (Value, []string, *Cancel, int64, error)) (Value, error) {
	inputHash, err := digest(proj)
	if err != nil {
		return nil, runtimeFault("L3041", "%s: %v", kind, err)
	}
	occ := f.occurrence(kind, name)
	key := StepKey(f.path, kind, name, occ)
	rec := in.journal.lookup(key)
	if in.walk && rec != nil && rec.State == StatePending && rec.InputHash == inputHash {
		// A scope the run was inside: its settled steps are walked up to the one it was waiting on.
		in.reached[key] = true
		_, _, _, _, err := body(key)
		if err == nil {
			err = &frontier{key: key}
		}
		return nil, err
	}
	if err := in.walked(key, rec); err != nil {
		return nil, err
	}
	if rec != nil && rec.InputHash != inputHash {
		return nil, &Fault{Code: "L5001", Step: key, Message: fmt.Sprintf("scope %s: the recorded input hash %s is not this program's %s", key, rec.InputHash, inputHash)}
	}
	if err := checkBranchDigest(key, rec, digester); err != nil {
		return nil, err
	}
	if rec != nil && rec.State == StateSettled && in.walk {
		// A migration walk enters a settled scope, so that steps removed inside it surface.
		return in.walkScope(f, key, rec, body)
	}
	if rec != nil && rec.State == StateSettled && rec.Status != StatusRefused {
		in.advance(f, rec)
		if rec.Status == StatusCanceled {
			return nil, errCancelled
		}
		if rec.Status != StatusOK {
			return nil, &Thrown{V: entryErrorRecord(rec.Error)}
		}
		res, err := fromJSON(rec.Result, true)
		if err != nil {
			return nil, &Fault{Code: "L5024", Message: err.Error()}
		}
		v, _ := res.(*Record).Get("value")
		return v, nil
	}
	e, err := in.journal.begin(Entry{Scope: f.path, Kind: kind, Name: name, Occurrence: occ, InputHash: inputHash, StartedAt: in.handler.Now()})
	if err != nil {
		return nil, err
	}
	v, branches, cancel, clock, berr := body(key)
	if refusal, ok := errors.AsType[*CapabilityRefusal](berr); ok {
		end := in.handler.Now()
		e.EndedAt = &end
		return nil, in.refused(e, refusal)
	}
	if isCancelledErr(berr) {
		// The scope was cut from outside: it settles cancelled, and the cut goes on unwinding.
		e.EndedAt, e.Status = &clock, StatusCanceled
		in.clock(f, clock)
		if err := in.journal.settle(e); err != nil {
			return nil, err
		}
		return nil, berr
	}
	var fault *Fault
	if errors.As(berr, &fault) {
		return nil, berr // a run-level fault settles nothing (spec §7.6)
	}
	e.EndedAt, e.Cancel = &clock, cancel
	if digester != nil && cancel != nil && len(cancel.Losers) < len(branches) {
		// A decided race: an edit inside an arm that lost diverges on resume.
		if e.BranchDigest, err = digester(cancel.Losers); err != nil {
			return nil, &Fault{Message: "the race's branch digest: " + err.Error()}
		}
	}
	in.clock(f, clock)
	if berr != nil {
		e.Status, e.Branches = StatusFailed, branches
		e.Error = scopeFailure(berr)
		if err := in.journal.settle(e); err != nil {
			return nil, err
		}
		if _, ok := errors.AsType[*EffectError](berr); ok {
			// The scope's own effect failed (a conclave not opened or not closed): the program
			// catches it as it would any effect's failure.
			return nil, &Thrown{V: entryErrorRecord(e.Error)}
		}
		return nil, berr
	}
	res := NewRecord()
	bs := &Array{}
	for _, b := range branches {
		bs.Elems = append(bs.Elems, b)
	}
	res.Set("branches", bs)
	res.Set("value", v)
	c, err := Canonical(res)
	if err != nil {
		e.Status, e.Branches = StatusFailed, branches
		e.Error = &EntryError{Code: "L4000", Kind: "scope-fault", Message: "the scope's value has no canonical form: " + err.Error()}
		if err := in.journal.settle(e); err != nil {
			return nil, err
		}
		return nil, &Thrown{V: entryErrorRecord(e.Error)}
	}
	e.Status, e.Result = StatusOK, c
	if err := in.journal.settle(e); err != nil {
		return nil, err
	}
	out, _ := fromJSON(c, true)
	value, _ := out.(*Record).Get("value")
	return value, nil
}

// checkBranchDigest checks a settled race against the current source's losing arms: an edit
// inside an arm the walk never enters diverges (L5001). A record without a digest, or a race
// whose arms are not a record literal, is not checked.
func checkBranchDigest(key string, rec *Entry, digester func([]string) (string, error)) error {
	if rec == nil || rec.State != StateSettled || rec.BranchDigest == "" || digester == nil {
		return nil
	}
	var losers []string
	if rec.Cancel != nil {
		losers = rec.Cancel.Losers
	}
	now, err := digester(losers)
	if err != nil {
		return &Fault{Message: "the race's branch digest: " + err.Error()}
	}
	if now != rec.BranchDigest {
		return &Fault{Code: "L5001", Step: key, Message: fmt.Sprintf("race %s: the recorded branch digest %s is not this program's %s: a losing arm was edited", key, rec.BranchDigest, now)}
	}
	return nil
}

// scopeFailure records a branch's failure on its scope's entry: an effect failure keeps its
// code and kind, a runtime refusal its code with kind runtime, anything else L4000 scope-fault.
func scopeFailure(err error) *EntryError {
	var t *Thrown
	if errors.As(err, &t) {
		if r, ok := t.V.(*Record); ok {
			code, _ := r.Get("code")
			kind, _ := r.Get("kind")
			msg, _ := r.Get("message")
			if c, ok := code.(string); ok && strings.HasPrefix(c, "L") {
				k, _ := kind.(string)
				m, _ := msg.(string)
				return &EntryError{Code: c, Kind: k, Message: m}
			}
		}
		return &EntryError{Code: "L4000", Kind: "scope-fault", Message: "a branch threw " + display(t.V)}
	}
	if e, ok := errors.AsType[*EffectError](err); ok {
		return &EntryError{Code: e.Code, Kind: e.Kind, Message: e.Message}
	}
	return &EntryError{Code: "L4000", Kind: "scope-fault", Message: err.Error()}
}

// branch is one branch of a scope: its key and its function, called with args.
type branch struct {
	key  string
	fn   Value
	args []Value
}

// runBranch runs one branch in its own frame; it returns its value and its clock at settle.
func (in *interp) runBranch(f *frame, scopeKey string, b branch, concurrent bool) (Value, int64, error) {
	child := newFrame(f, scopeKey+"/b:"+b.key, f.clock, concurrent)
	v, err := in.callValue(child, b.fn, b.args)
	return v, child.clock, err
}

// branchScope runs parallel and race: a record (or array) of thunks, run in declaration order in
// frames of their own.
func (in *interp) branchScope(f *frame, kind string, a []Value) (Value, error) {
	site := f.site
	f.site = nil
	opts, err := options(kind, a, 1)
	if err != nil {
		return nil, err
	}
	name, err := stepNameOf(kind, opts, false)
	if err != nil {
		return nil, err
	}
	var branches []branch
	isArray := false
	switch bs := arg(a, 0).(type) {
	case *Record:
		for _, k := range bs.keys {
			branches = append(branches, branch{key: k, fn: bs.fields[k]})
		}
	case *Array:
		isArray = true
		for i, fn := range bs.Elems {
			branches = append(branches, branch{key: strconv.Itoa(i), fn: fn})
		}
	default:
		return nil, libFail(kind, "takes its branches as a record (or an array) of functions")
	}
	for _, b := range branches {
		if strings.ContainsAny(b.key, "/#:") {
			return nil, runtimeFault("L3025", "the branch key %q contains /, # or :", b.key)
		}
		if !isCallable(b.fn) {
			return nil, libFail(kind, "branch %s is not a function: pass a thunk, () => ...", b.key)
		}
	}
	var digester func([]string) (string, error)
	if kind == "race" && site != nil && len(site.Args) > 0 {
		if id, ok := unparen(site.Callee).(*syntax.Ident); ok && id.Name == "race" {
			digester = branchDigester(site.Args[0])
		}
	}
	return in.scopeEntry(f, kind, name, projection("kind", kind, "name", name), digester, func(key string) (Value, []string, *Cancel, int64, error) {
		keys := make([]string, len(branches))
		for i, b := range branches {
			keys[i] = b.key
		}
		arms := in.runArms(f, key, branches, kind == "race")
		clock := arms.clock
		if arms.fatal != nil {
			return nil, keys, nil, clock, arms.fatal
		}
		if kind == "parallel" {
			if arms.failed >= 0 {
				return nil, keys, &Cancel{Losers: arms.others(keys, arms.failed), Issued: true}, clock, arms.res[arms.failed].err
			}
			if arms.cut() {
				return nil, keys, nil, clock, errCancelled
			}
			if isArray {
				out := &Array{}
				for _, r := range arms.res {
					out.Elems = append(out.Elems, r.v)
				}
				return out, keys, nil, clock, nil
			}
			out := NewRecord()
			for i, r := range arms.res {
				out.Set(keys[i], r.v)
			}
			return out, keys, nil, clock, nil
		}
		// race: the least logical settlement time wins; equal times go to declaration order.
		win := arms.winner
		if win < 0 {
			return nil, keys, &Cancel{Losers: keys, Issued: true}, clock, arms.fault()
		}
		cancel := &Cancel{Losers: arms.others(keys, win), Issued: true}
		if arms.res[win].err != nil {
			return nil, keys, cancel, clock, arms.res[win].err
		}
		results := arms.res
		var index Value = keys[win]
		if isArray {
			index = float64(win)
		}
		out := NewRecord()
		out.Set("index", index)
		out.Set("value", results[win].v)
		return out, keys, cancel, clock, nil
	})
}

// fanOut runs fn(item, index) per item, each a branch keyed by key(item), else the item's id.
func (in *interp) fanOut(_ *interp, f *frame, a []Value) (Value, error) {
	opts, err := options("fanOut", a, 2)
	if err != nil {
		return nil, err
	}
	name, err := stepNameOf("fanOut", opts, true)
	if err != nil {
		return nil, err
	}
	items, ok := arg(a, 0).(*Array)
	if !ok {
		return nil, libFail("fanOut", "takes a list of items")
	}
	fn := arg(a, 1)
	if !isCallable(fn) {
		return nil, libFail("fanOut", "takes a function to run per item")
	}
	keyFn := optionOf(opts, "key")
	var branches []branch
	seen := map[string]bool{}
	for i, item := range items.Elems {
		var k Value
		if keyFn != nil {
			if k, err = in.callValue(f, keyFn, []Value{item}); err != nil {
				return nil, err
			}
		} else if r, ok := item.(*Record); ok {
			k, _ = r.Get("id")
		}
		ks, ok := k.(string)
		if !ok {
			if n, isNum := k.(float64); isNum && keyFn != nil {
				ks, ok = strconv.FormatFloat(n, 'f', -1, 64), true
			}
		}
		if !ok {
			return nil, runtimeFault("L3021", "item %d of the fanOut has no stable key: give it a string id, or pass key", i)
		}
		if seen[ks] {
			return nil, runtimeFault("L3024", "the fanOut branch key %q is not unique", ks)
		}
		if strings.ContainsAny(ks, "/#:") {
			return nil, runtimeFault("L3025", "the branch key %q contains /, # or :", ks)
		}
		seen[ks] = true
		branches = append(branches, branch{key: ks, fn: fn, args: []Value{item, float64(i)}})
	}
	return in.scopeEntry(f, "fanOut", name, projection("kind", "fanOut", "name", name), nil, func(key string) (Value, []string, *Cancel, int64, error) {
		keys := make([]string, len(branches))
		for i, b := range branches {
			keys[i] = b.key
		}
		arms := in.runArms(f, key, branches, false)
		if arms.fatal != nil {
			return nil, keys, nil, arms.clock, arms.fatal
		}
		if arms.failed >= 0 {
			return nil, keys, &Cancel{Losers: arms.others(keys, arms.failed), Issued: true}, arms.clock, arms.res[arms.failed].err
		}
		if arms.cut() {
			return nil, keys, nil, arms.clock, errCancelled
		}
		out := &Array{}
		for _, r := range arms.res {
			out.Elems = append(out.Elems, r.v)
		}
		clock := arms.clock
		return out, keys, nil, clock, nil
	})
}

// conclave runs fn(channelHandle) as the single branch "in" of a scoped sub-team.
func (in *interp) conclave(_ *interp, f *frame, a []Value) (Value, error) {
	opts, err := options("conclave", a, 2)
	if err != nil {
		return nil, err
	}
	name, err := stepNameOf("conclave", opts, true)
	if err != nil {
		return nil, err
	}
	members, ok := arg(a, 0).(*Array)
	if !ok {
		return nil, libFail("conclave", "takes a list of agents")
	}
	var ids []Value
	for _, m := range members.Elems {
		id, err := agentID("conclave", m)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	fn := arg(a, 1)
	if !isCallable(fn) {
		return nil, libFail("conclave", "takes a function to run in the conclave")
	}
	var channel Value
	if c := optionOf(opts, "channel"); c != nil {
		n, err := channelName("conclave", c)
		if err != nil {
			return nil, err
		}
		channel = n
	}
	subject := projection("members", &Array{Elems: ids}, "channel", channel)
	proj := projection("kind", "conclave", "name", name, "subject", subject)
	closed := true
	return in.scopeEntryClosed(f, name, proj, &closed, func(key string) (Value, []string, *Cancel, int64, error) {
		req := &Request{RunID: in.runID, Key: key, Kind: "conclave", Name: name, Args: frozenArgs(a[:1]), Options: opts}
		ch, err := in.openConclave(req)
		if err != nil {
			return nil, nil, nil, f.clock, err
		}
		v, c, err := in.runBranch(f, key, branch{key: "in", fn: fn, args: []Value{frozenRecord("channel", ch)}}, false)
		if isCancelledErr(err) {
			// A cancelled body did not close the conclave: its entry says so, and the host
			// releases the membership as it recovers what a cut branch held.
			closed = false
			if host, ok := in.handler.(ConclaveHost); ok && !in.walk {
				_ = host.CloseConclave(in.ctx, req, ch) // best effort: the entry keeps that it was not closed
			}
			return v, []string{"in"}, nil, c, err
		}
		if host, ok := in.handler.(ConclaveHost); ok && !in.walk {
			if cerr := host.CloseConclave(in.ctx, req, ch); cerr != nil && err == nil {
				err = &EffectError{Code: "L4000", Kind: "handler-fault", Message: "the conclave's membership was not released: " + cerr.Error()}
			}
		}
		return v, []string{"in"}, nil, c, err
	})
}

// openConclave opens a conclave through the handler, and answers its channel. A dry walk opens
// nothing; a handler that hosts no conclaves refuses it (L5016).
func (in *interp) openConclave(req *Request) (string, error) {
	if in.walk {
		return "walk-conclave-" + req.Key, nil
	}
	host, ok := in.handler.(ConclaveHost)
	if !ok {
		return "", &CapabilityRefusal{Code: "L5016", Message: "conclave is not durable on this host: it hosts no conclaves"}
	}
	ch, err := host.OpenConclave(in.ctx, req)
	if err != nil {
		if _, refused := errors.AsType[*CapabilityRefusal](err); refused {
			return "", err
		}
		if _, failed := errors.AsType[*EffectError](err); failed {
			return "", err // the host's own failure keeps its code (L4002 when a member is down)
		}
		return "", &EffectError{Code: "L4000", Kind: "handler-fault", Message: "the conclave could not be opened: " + err.Error()}
	}
	return ch, nil
}

// scopeEntryClosed is scopeEntry for a conclave, whose entry records whether its membership was
// released (unless the host refused it: it opened nothing).
func (in *interp) scopeEntryClosed(f *frame, name string, proj *Record, closed *bool, body func(string) (Value, []string, *Cancel, int64, error)) (Value, error) {
	before := len(in.journal.writes)
	v, err := in.scopeEntry(f, "conclave", name, proj, nil, body)
	for i := before; i < len(in.journal.writes); i++ {
		w := &in.journal.writes[i]
		if w.Kind == "conclave" && w.Name == name && w.State == StateSettled && w.Status != StatusRefused && w.Scope == f.path {
			w.Closed = closed
		}
	}
	return v, err
}

// walked notes a recorded step a dry walk looked up, and ends the walk at one it has not
// settled.
func (in *interp) walked(key string, rec *Entry) error {
	if !in.walk {
		return nil
	}
	if rec == nil || rec.State != StateSettled || rec.Status == StatusRefused {
		return &frontier{key: key}
	}
	in.reached[key] = true
	return nil
}

// walkScope enters a settled scope on a dry walk: its recorded branches must all still be in the
// source (L5022), its branches' steps are walked, and it delivers its recorded outcome.
func (in *interp) walkScope(f *frame, key string, rec *Entry, body func(string) (Value, []string, *Cancel, int64, error)) (Value, error) {
	_, branches, _, _, err := body(key)
	if _, stop := err.(uncatchable); stop {
		return nil, err
	}
	recorded := rec.Branches
	if rec.Status == StatusOK {
		if res, perr := fromJSON(rec.Result, true); perr == nil {
			if bs, ok := optionOf(res.(*Record), "branches").(*Array); ok {
				recorded = nil
				for _, b := range bs.Elems {
					s, _ := b.(string)
					recorded = append(recorded, s)
				}
			}
		}
	}
	for _, b := range recorded {
		if !slices.Contains(branches, b) {
			return nil, &Fault{Code: "L5022", Step: key, Message: fmt.Sprintf("scope %s recorded the branch %q, which the source no longer has", key, b)}
		}
	}
	in.advance(f, rec)
	if rec.Status == StatusCanceled {
		return nil, errCancelled
	}
	if rec.Status != StatusOK {
		return nil, &Thrown{V: entryErrorRecord(rec.Error)}
	}
	res, _ := fromJSON(rec.Result, true)
	v, _ := res.(*Record).Get("value")
	return v, nil
}
