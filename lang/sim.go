package lang

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// The simulator: a handler that answers effects from a script, on one virtual clock advanced in
// the order effects are asked. Under it a race is decided by that order and declaration order,
// not by the durations written: that is the simulator, not the rule.

// Script is what the simulator answers. Each table maps a step name (the effect's kind for an
// unnamed step) to one value for every occurrence, or to a JSON array of one value per
// occurrence in order. The clock durations default to turn 5m, ask 1m, checkpoint 1m, wait 1m.
type Script struct {
	Turns       map[string]json.RawMessage `json:"turns,omitempty"`
	Asks        map[string]json.RawMessage `json:"asks,omitempty"`
	Checkpoints map[string]json.RawMessage `json:"checkpoints,omitempty"`
	Events      map[string]json.RawMessage `json:"events,omitempty"`
	Clock       SimClock                   `json:"clock,omitzero"`
	Faults      []SimFault                 `json:"faults,omitempty"`
}

// SimFault fails the effect at one step, as a host reports a failure (the handler's vocabulary:
// L4002 agent down, L4003 turn deadline elapsed, and the rest). At is the step's full key
// ("/parallel:x#0/b:a/turn:build#0") or its last segment ("turn:build#0"); Code defaults to
// L4002 and Message to one naming the step.
type SimFault struct {
	At      string `json:"at"`
	Kind    string `json:"kind"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// SimClock is the simulator's clock: where it starts, and what each effect costs.
type SimClock struct {
	Start      int64  `json:"start,omitempty"`
	Turn       string `json:"turn,omitempty"`
	Ask        string `json:"ask,omitempty"`
	Checkpoint string `json:"checkpoint,omitempty"`
	Wait       string `json:"wait,omitempty"`
}

// Sim is the simulator handler. Create it with NewSim.
type Sim struct {
	mu     sync.Mutex
	script Script
	now    int64
	costs  map[string]int64
	used   map[string]int // per table and name: the occurrences answered
	spawns map[string]int // per persona: the agents minted
}

// NewSim returns a simulator for script, checking its durations.
func NewSim(script Script) (*Sim, error) {
	s := &Sim{script: script, now: script.Clock.Start, costs: map[string]int64{}, used: map[string]int{}, spawns: map[string]int{}}
	for kind, d := range map[string]string{"turn": cmp.Or(script.Clock.Turn, "5m"), "ask": cmp.Or(script.Clock.Ask, "1m"),
		"checkpoint": cmp.Or(script.Clock.Checkpoint, "1m"), "wait": cmp.Or(script.Clock.Wait, "1m")} {
		ms, err := ParseDuration(d)
		if err != nil {
			return nil, fmt.Errorf("the script's clock.%s: %w", kind, err)
		}
		s.costs[kind] = ms
	}
	for i, f := range script.Faults {
		switch {
		case f.At == "":
			return nil, fmt.Errorf("the script's faults[%d] names no step (at)", i)
		case f.Kind == "":
			return nil, fmt.Errorf("the script's faults[%d] (at %s) has no kind", i, f.At)
		case f.Code != "" && !isCode(f.Code):
			return nil, fmt.Errorf("the script's faults[%d] (at %s): code %q is not a catalog code (Lnnnn)", i, f.At, f.Code)
		}
	}
	return s, nil
}

// fault is the scripted failure of req's step, if the script has one.
func (s *Sim) fault(req *Request) error {
	short := req.Key[strings.LastIndexByte(req.Key, '/')+1:]
	for _, f := range s.script.Faults {
		if f.At != req.Key && f.At != short {
			continue
		}
		e := &EffectError{Code: cmp.Or(f.Code, "L4002"), Kind: f.Kind, Message: f.Message}
		if e.Message == "" {
			e.Message = "simulated " + f.Kind + " at " + req.Key
		}
		return e
	}
	return nil
}

// Now implements Handler: the virtual clock.
func (s *Sim) Now() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

func (s *Sim) advance(ms int64) {
	s.mu.Lock()
	s.now += ms
	s.mu.Unlock()
}

// Unused returns the script's entries no effect asked for, as table.name.
func (s *Sim) Unused() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, t := range []struct {
		name  string
		table map[string]json.RawMessage
	}{{"turns", s.script.Turns}, {"asks", s.script.Asks}, {"checkpoints", s.script.Checkpoints}, {"events", s.script.Events}} {
		var names []string
		for n := range t.table {
			if s.used[t.name+":"+n] == 0 {
				names = append(names, t.name+"."+n)
			}
		}
		slices.Sort(names)
		out = append(out, names...)
	}
	return out
}

// scripted returns the next scripted answer of table for req's step, or L6001.
func (s *Sim) scripted(table string, entries map[string]json.RawMessage, req *Request) (Value, error) {
	name := req.Name
	if name == "" {
		name = req.Kind
	}
	raw, ok := entries[name]
	if !ok {
		return nil, &EffectError{Code: "L6001", Kind: "handler-fault",
			Message: fmt.Sprintf("Unscripted effect in simulation: the script has no %s entry for %q (step %s): add { %q: { %q: ... } }", table, name, req.Key, table, name)}
	}
	v, err := fromJSON(raw, false)
	if err != nil {
		return nil, &EffectError{Code: "L6001", Kind: "handler-fault", Message: fmt.Sprintf("the script's %s.%s: %v", table, name, err)}
	}
	s.mu.Lock()
	n := s.used[table+":"+name]
	s.used[table+":"+name] = n + 1
	s.mu.Unlock()
	if list, ok := v.(*Array); ok {
		if n >= len(list.Elems) {
			return nil, &EffectError{Code: "L6001", Kind: "handler-fault",
				Message: fmt.Sprintf("Unscripted effect in simulation: the script's %s.%s gives %d results; this is occurrence %d (step %s)", table, name, len(list.Elems), n, req.Key)}
		}
		return list.Elems[n], nil
	}
	return v, nil
}

// setNow moves the virtual clock to t: the scheduler lands an answer there.
func (s *Sim) setNow(t int64) {
	s.mu.Lock()
	s.now = t
	s.mu.Unlock()
}

// OpenConclave opens a simulated conclave: the channel its option names, or one named after the
// step; no one joins anything.
func (s *Sim) OpenConclave(_ context.Context, req *Request) (string, error) {
	if c := req.Option("channel"); c != nil && c != Undefined {
		return channelName("conclave", c)
	}
	return "sim-conclave-" + req.Key, nil
}

// CloseConclave closes a simulated conclave: there is nothing to release.
func (s *Sim) CloseConclave(context.Context, *Request, string) error { return nil }

// Perform implements Handler: the answer, after the time the effect takes.
func (s *Sim) Perform(_ context.Context, req *Request) (*Outcome, error) {
	cost, land := s.answer(req)
	s.advance(cost)
	return land()
}

// answer answers an effect at once: what it costs in virtual time, and its outcome as it lands
// (a turn's or a checkpoint's at is the time it lands).
func (s *Sim) answer(req *Request) (int64, func() (*Outcome, error)) {
	done := func(o *Outcome, err error) func() (*Outcome, error) {
		return func() (*Outcome, error) { return o, err }
	}
	if err := s.fault(req); err != nil {
		return 0, done(nil, err)
	}
	switch req.Kind {
	case "spawn":
		persona, _ := arg(req.Args, 0).(string)
		if r, ok := arg(req.Args, 0).(*Record); ok {
			persona, _ = optionOf(r, "persona").(string)
		}
		s.mu.Lock()
		s.spawns[persona]++
		n := s.spawns[persona]
		s.mu.Unlock()
		agent := "sim." + persona
		if n > 1 {
			agent += "-" + strconv.Itoa(n)
		}
		h := projection("agent", agent, "persona", persona)
		for _, k := range []string{"worktree", "role"} {
			if v := req.Option(k); v != Undefined && v != nil {
				h.Set(k, v)
			}
		}
		return 0, done(&Outcome{Result: h, External: projection("simAgent", agent)}, nil)
	case "turn":
		v, err := s.scripted("turns", s.script.Turns, req)
		if err != nil {
			return 0, done(nil, err)
		}
		r, ok := v.(*Record)
		if !ok {
			return 0, done(nil, &EffectError{Code: "L6001", Kind: "handler-fault", Message: "the script's turn " + req.Name + " is not a record"})
		}
		return s.costs["turn"], func() (*Outcome, error) {
			r.Set("at", float64(s.Now()))
			return &Outcome{Result: r, External: projection("simGoal", req.Key)}, nil
		}
	case "ask":
		return s.ask(req)
	case "checkpoint":
		v, err := s.scripted("checkpoints", s.script.Checkpoints, req)
		if err != nil {
			return 0, done(nil, err)
		}
		r, _ := v.(*Record)
		out := NewRecord()
		if status, _ := optionOf(r, "status").(string); status == "expired" {
			out.Set("outcome", "expired")
		} else {
			out.Set("outcome", "resolved")
			for _, k := range []string{"value", "by", "artifact"} {
				if x := optionOf(r, k); x != nil {
					out.Set(k, x)
				}
			}
		}
		return s.costs["checkpoint"], func() (*Outcome, error) {
			out.Set("at", float64(s.Now()))
			return &Outcome{Result: out, External: projection("simCheckpoint", req.Key)}, nil
		}
	case "sleep":
		ms, _ := ParseDuration(fmt.Sprint(arg(req.Args, 0)))
		return ms, done(&Outcome{Result: nil}, nil)
	case "wait":
		v, err := s.scripted("events", s.script.Events, req)
		if err != nil {
			return 0, done(nil, err)
		}
		cost := s.costs["wait"]
		if t, ok := req.Option("timeout").(string); ok && v == nil {
			cost, _ = ParseDuration(t)
		}
		return cost, done(&Outcome{Result: v}, nil)
	case "notify", "monitor":
		return 0, done(&Outcome{Result: nil}, nil)
	}
	return 0, done(nil, &EffectError{Code: "L6001", Kind: "handler-fault", Message: "the simulator does not perform " + req.Kind})
}

// ask answers an ask from the script, checking each reply against the schema shorthand.
func (s *Sim) ask(req *Request) (int64, func() (*Outcome, error)) {
	done := func(o *Outcome, err error) func() (*Outcome, error) {
		return func() (*Outcome, error) { return o, err }
	}
	schema, err := ReadAskSchema(req)
	if err != nil {
		return 0, done(nil, err)
	}
	for i := 1; ; i++ {
		cost := int64(i) * s.costs["ask"]
		v, err := s.scripted("asks", s.script.Asks, req)
		if err != nil {
			return cost - s.costs["ask"], done(nil, err)
		}
		if schema.Conforms(v) {
			return cost, done(&Outcome{Result: v, External: projection("simGoal", req.Key)}, nil)
		}
		if i >= schema.Attempts {
			return cost, done(nil, schema.Exhausted(req.Key, i))
		}
	}
}

// isCode reports whether code is shaped as a catalog code: L and four digits.
func isCode(code string) bool {
	if len(code) != 5 || code[0] != 'L' {
		return false
	}
	for _, c := range code[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
