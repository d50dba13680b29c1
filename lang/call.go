package lang

import (
	"context"
	"fmt"

	"github.com/gocotal/cotal/lang/internal/syntax"
)

// interp is one walk of a program: a run, or a resume of one.
type interp struct {
	ctx     context.Context
	runID   string
	source  string
	pins    Pins
	handler Handler
	journal *journal
	globals map[string]Value
	steps   int
	// effects counts the distinct effect keys of the run, recorded and live (L4009).
	effects int
	logs    []logLine
	// walk makes the run a dry walk over a read-only journal (migrate, fork): a step it has not
	// settled ends the walk; reached records the recorded steps the walk looked up.
	walk    bool
	reached map[string]bool
	// depth is the nesting of function calls, bounded by maxDepth.
	depth int
	// shouldStop and resultBound are RunOptions'.
	shouldStop  func() string
	resultBound int
	sched       *sched
}

// maxDepth bounds the nesting of calls: past it the host's stack is exhausted, which no program
// may catch (spec §9.2).
const maxDepth = 10_000

// logLine is one log line: the values logged, as JSON, and the scope path it was written from.
type logLine struct {
	scope  string
	values []Value
}

// frame is a namespace of step keys: the run's root, or one branch of a scope. Its clock is the
// branch's run clock (spec §8.1), its draws the PRNG's counter for its scope path (§8.2).
type frame struct {
	parent *frame
	path   string
	counts map[string]int
	clock  int64
	draws  int
	// branch marks a concurrent branch; branchEnv is the environment its function's body
	// starts from, the boundary of what it may write (L2032).
	branch    bool
	branchEnv *env
	// co is the coroutine the frame runs in: its branch's, or its parent's.
	co *coro
	// cancelled marks a cancelled branch: it performs no new effect; ctx ends for what its live
	// effects do.
	cancelled bool
	ctx       context.Context
	end       context.CancelFunc
	// site is the call expression of the function being called by name, which race reads its
	// arms' source from (the branch digest).
	site *syntax.Call
}

func newFrame(parent *frame, path string, clock int64, branch bool) *frame {
	f := &frame{parent: parent, path: path, counts: map[string]int{}, clock: clock, branch: branch}
	if parent != nil {
		f.co = parent.co
	}
	return f
}

// isCancelled reports whether the frame or a frame it runs under was cancelled.
func (f *frame) isCancelled() bool {
	for g := f; g != nil; g = g.parent {
		if g.cancelled {
			return true
		}
	}
	return false
}

// context is the context the frame's live effects run under.
func (f *frame) context(in *interp) context.Context {
	for g := f; g != nil; g = g.parent {
		if g.ctx != nil {
			return g.ctx
		}
	}
	return in.ctx
}

// under reports whether f is g or runs under it.
func (f *frame) under(g *frame) bool {
	for h := f; h != nil; h = h.parent {
		if h == g {
			return true
		}
	}
	return false
}

// occurrence allocates the next occurrence of (kind, name) in the frame.
func (f *frame) occurrence(kind, name string) int {
	k := kind + "\x00" + name
	n := f.counts[k]
	f.counts[k] = n + 1
	return n
}

func (in *interp) call(e *env, f *frame, x *syntax.Call) (Value, error) {
	if x.New {
		return nil, runtimeFault("L1019", "new is not in the language")
	}
	if m, ok := unparen(x.Callee).(*syntax.Member); ok {
		obj, key, err := in.memberParts(e, f, m)
		if err != nil {
			return nil, err
		}
		if m.Optional && (obj == nil || obj == Undefined) {
			return nil, errShortCircuit
		}
		args, err := in.args(e, f, x.Args)
		if err != nil {
			return nil, err
		}
		if fn := methodOf(obj, key); fn != nil {
			return fn(in, f, obj, args)
		}
		callee, err := member(obj, key)
		if err != nil {
			return nil, err
		}
		if x.Optional && (callee == nil || callee == Undefined) {
			return nil, errShortCircuit
		}
		return in.callValue(f, callee, args)
	}
	callee, err := in.eval(e, f, x.Callee)
	if err != nil {
		return nil, err
	}
	if x.Optional && (callee == nil || callee == Undefined) {
		return nil, errShortCircuit
	}
	args, err := in.args(e, f, x.Args)
	if err != nil {
		return nil, err
	}
	f.site = x
	return in.callValue(f, callee, args)
}

func (in *interp) args(e *env, f *frame, list []syntax.Expr) ([]Value, error) {
	var out []Value
	for _, a := range list {
		if s, ok := a.(*syntax.Spread); ok {
			v, err := in.eval(e, f, s.X)
			if err != nil {
				return nil, err
			}
			items, err := iterate(v)
			if err != nil {
				return nil, err
			}
			out = append(out, items...)
			continue
		}
		v, err := in.eval(e, f, a)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// callValue calls a function value.
func (in *interp) callValue(f *frame, fn Value, args []Value) (Value, error) {
	switch fn := fn.(type) {
	case *Closure:
		return in.callClosure(f, fn, args)
	case *Builtin:
		return fn.call(in, f, args)
	}
	return nil, runtimeFault("L4011", "%s is not a function", describe(fn))
}

// callClosure runs a closure in frame f: its parameters bound left to right, then its body.
func (in *interp) callClosure(f *frame, c *Closure, args []Value) (Value, error) {
	if err := in.step(); err != nil {
		return nil, err
	}
	in.depth++
	defer func() { in.depth-- }()
	if in.depth > maxDepth {
		return nil, &Fault{Message: fmt.Sprintf("the host's stack is exhausted: calls nested deeper than %d", maxDepth)}
	}
	outer := c.env
	if c.fn.Name != "" && c.fn.Kind == syntax.PropInit && !c.fn.Arrow {
		outer = newEnv(outer) // a named function binds its own name inside
		outer.vars[c.fn.Name] = &slot{kind: "function", initialized: true, v: c}
	}
	e := newEnv(outer)
	if f.branch && f.branchEnv == nil {
		f.branchEnv = e
	}
	for _, p := range c.fn.Params {
		for _, id := range patternNames(p) {
			e.vars[id.Name] = &slot{kind: "param"}
		}
	}
	for i, p := range c.fn.Params {
		var v Value = Undefined
		if i < len(args) {
			v = args[i]
		}
		if err := in.bind(e, f, p, v, "param"); err != nil {
			return nil, err
		}
	}
	if c.fn.Rest != nil {
		rest := &Array{owner: f}
		if len(args) > len(c.fn.Params) {
			rest.Elems = append(rest.Elems, args[len(c.fn.Params):]...)
		}
		if err := in.bind(e, f, c.fn.Rest, rest, "param"); err != nil {
			return nil, err
		}
	}
	if c.fn.Body == nil {
		return in.eval(e, f, c.fn.Expr)
	}
	err := in.block(newEnv(e), f, c.fn.Body.Body)
	switch r := err.(type) {
	case nil:
		return Undefined, nil
	case *returned:
		return r.v, nil
	}
	if err == errBreak || err == errContinue {
		return nil, runtimeFault("L1029", "break or continue outside a loop")
	}
	return nil, err
}

// callback calls a builtin's callback with its arguments, in the caller's frame.
func (in *interp) callback(f *frame, fn Value, args ...Value) (Value, error) {
	return in.callValue(f, fn, args)
}
