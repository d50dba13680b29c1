package lang

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gocotal/cotal/lang/internal/syntax"
)

// The interpreter: a tree walker over the checked program. Effects are performed through the
// run's handler as the walk reaches them (effects.go); everything else is pure.

// env is one lexical scope's bindings.
type env struct {
	parent *env
	vars   map[string]*slot
}

// slot is one binding.
type slot struct {
	v           Value
	kind        string // const, let, function, param, catch
	initialized bool
}

func newEnv(parent *env) *env { return &env{parent: parent, vars: map[string]*slot{}} }

func (e *env) lookup(name string) *slot {
	for s := e; s != nil; s = s.parent {
		if v := s.vars[name]; v != nil {
			return v
		}
	}
	return nil
}

// Control flow out of a statement.
var (
	errBreak    = errors.New("break")
	errContinue = errors.New("continue")
)

// returned carries a function's return value out of its body.
type returned struct{ v Value }

func (*returned) Error() string { return "return" }

// Thrown is a value a program threw, or a failure the runtime raised as a frozen record
// { code, kind, message }: what a catch receives.
type Thrown struct{ V Value }

func (t *Thrown) Error() string {
	if r, ok := t.V.(*Record); ok {
		code, _ := r.Get("code")
		msg, _ := r.Get("message")
		return fmt.Sprintf("%v: %v", code, msg)
	}
	return fmt.Sprintf("uncaught %s", display(t.V))
}

// Code returns the code of a thrown failure record, or "".
func (t *Thrown) Code() string {
	if r, ok := t.V.(*Record); ok {
		if c, ok := r.Get("code"); ok {
			s, _ := c.(string)
			return s
		}
	}
	return ""
}

// Fault is what no catch sees (spec §9.2): a divergence, a host release, a budget, a journal
// failure. It unwinds the run past finally.
type Fault struct {
	Code    string
	Message string
	// Step is the step key the fault names, when it names one.
	Step string
}

func (f *Fault) Error() string { return f.Code + ": " + f.Message }

func (*Fault) uncatchable() {}

// uncatchable is what unwinds a run past catch and finally.
type uncatchable interface {
	error
	uncatchable()
}

// frontier ends a dry walk at the first step its journal has not settled.
type frontier struct{ key string }

func (f *frontier) Error() string { return "the walk reached the unrecorded step " + f.key }

func (*frontier) uncatchable() {}

// runtimeFault is a catchable runtime refusal: a frozen { code, kind: "runtime", message }.
func runtimeFault(code, format string, args ...any) error {
	r := NewRecord()
	r.Set("code", code)
	r.Set("kind", "runtime")
	r.Set("message", titled(code, fmt.Sprintf(format, args...)))
	r.frozen = true
	return &Thrown{V: r}
}

// step counts one dispatch against the walk's budget.
func (in *interp) step() error {
	in.steps++
	if in.steps > in.pins.StepBudget {
		return &Fault{Code: "L4013", Message: fmt.Sprintf("the walk ran %d steps, its budget (stepBudget)", in.pins.StepBudget)}
	}
	if in.pins.YieldEvery > 0 && in.steps%in.pins.YieldEvery == 0 && in.sched != nil && in.sched.timed == nil {
		// A yield point (spec §12): the branches a live answer woke run, and a race's arm
		// that can no longer win is cut here, in pure work (§7.3).
		return in.sched.yield()
	}
	return nil
}

// ---- statements ----

func (in *interp) block(e *env, f *frame, list []syntax.Stmt) error {
	for _, s := range list {
		in.hoist(e, s)
	}
	for _, s := range list {
		if err := in.exec(e, f, s); err != nil {
			return err
		}
	}
	return nil
}

// hoist binds a block's declarations: functions ready, let and const in their dead zone.
func (in *interp) hoist(e *env, s syntax.Stmt) {
	switch s := s.(type) {
	case *syntax.VarDecl:
		for _, d := range s.Decls {
			for _, id := range patternNames(d.Target) {
				e.vars[id.Name] = &slot{kind: s.Kind}
			}
		}
	case *syntax.FuncDecl:
		e.vars[s.Func.Name] = &slot{kind: "function", initialized: true, v: &Closure{fn: s.Func, env: e}}
	}
}

func (in *interp) exec(e *env, f *frame, s syntax.Stmt) error {
	if err := in.step(); err != nil {
		return err
	}
	switch s := s.(type) {
	case *syntax.ExprStmt:
		_, err := in.eval(e, f, s.X)
		return err
	case *syntax.VarDecl:
		for _, d := range s.Decls {
			var v Value = Undefined
			if d.Init != nil {
				var err error
				if v, err = in.eval(e, f, d.Init); err != nil {
					return err
				}
			}
			if err := in.bind(e, f, d.Target, v, s.Kind); err != nil {
				return err
			}
		}
		return nil
	case *syntax.FuncDecl, *syntax.Empty:
		return nil
	case *syntax.Block:
		return in.block(newEnv(e), f, s.Body)
	case *syntax.If:
		t, err := in.eval(e, f, s.Test)
		if err != nil {
			return err
		}
		if truthy(t) {
			return in.exec(e, f, s.Then)
		}
		if s.Else != nil {
			return in.exec(e, f, s.Else)
		}
		return nil
	case *syntax.While:
		for {
			t, err := in.eval(e, f, s.Test)
			if err != nil {
				return err
			}
			if !truthy(t) {
				return nil
			}
			if err := in.exec(e, f, s.Body); err != nil {
				if err == errBreak {
					return nil
				}
				if err != errContinue {
					return err
				}
			}
		}
	case *syntax.For:
		return in.forLoop(e, f, s)
	case *syntax.ForOf:
		return in.forOf(e, f, s)
	case *syntax.Return:
		var v Value = Undefined
		if s.Arg != nil {
			var err error
			if v, err = in.eval(e, f, s.Arg); err != nil {
				return err
			}
		}
		return &returned{v: v}
	case *syntax.Branch:
		if s.Continue {
			return errContinue
		}
		return errBreak
	case *syntax.Throw:
		v, err := in.eval(e, f, s.Arg)
		if err != nil {
			return err
		}
		return &Thrown{V: v}
	case *syntax.Try:
		return in.try(e, f, s)
	case *syntax.Switch:
		return in.switchStmt(e, f, s)
	}
	return runtimeFault("L1029", "%T is not in the language", s)
}

func (in *interp) forLoop(e *env, f *frame, s *syntax.For) error {
	loop := newEnv(e)
	var decl *syntax.VarDecl
	switch init := s.Init.(type) {
	case *syntax.VarDecl:
		decl = init
		in.hoist(loop, init)
		if err := in.exec(loop, f, init); err != nil {
			return err
		}
	case syntax.Expr:
		if _, err := in.eval(loop, f, init); err != nil {
			return err
		}
	}
	for {
		// let binds per iteration: each iteration's closures see its own copy.
		iter := loop
		if decl != nil && decl.Kind == "let" {
			iter = newEnv(e)
			for k, v := range loop.vars {
				c := *v
				iter.vars[k] = &c
			}
		}
		if s.Test != nil {
			t, err := in.eval(iter, f, s.Test)
			if err != nil {
				return err
			}
			if !truthy(t) {
				return nil
			}
		}
		if err := in.exec(iter, f, s.Body); err != nil {
			if err == errBreak {
				return nil
			}
			if err != errContinue {
				return err
			}
		}
		if s.Update != nil {
			if _, err := in.eval(iter, f, s.Update); err != nil {
				return err
			}
		}
		loop = iter
	}
}

func (in *interp) forOf(e *env, f *frame, s *syntax.ForOf) error {
	it, err := in.eval(e, f, s.Iter)
	if err != nil {
		return err
	}
	items, err := iterate(it)
	if err != nil {
		return err
	}
	for _, item := range items {
		body := newEnv(e)
		if s.Kind != "" {
			for _, id := range patternNames(s.Target) {
				body.vars[id.Name] = &slot{kind: s.Kind}
			}
			err = in.bind(body, f, s.Target, item, s.Kind)
		} else {
			err = in.assignPattern(body, f, s.Target, item)
		}
		if err != nil {
			return err
		}
		if err := in.exec(body, f, s.Body); err != nil {
			if err == errBreak {
				return nil
			}
			if err != errContinue {
				return err
			}
		}
	}
	return nil
}

// iterate returns what for...of and spread walk: an array's elements or a string's code points.
func iterate(v Value) ([]Value, error) {
	switch v := v.(type) {
	case *Array:
		return append([]Value(nil), v.Elems...), nil
	case string:
		var out []Value
		for _, r := range v {
			out = append(out, string(r))
		}
		return out, nil
	}
	return nil, runtimeFault("L4015", "%s is not iterable: for...of and spread take an array or a string", describe(v))
}

func (in *interp) try(e *env, f *frame, s *syntax.Try) error {
	err := in.block(newEnv(e), f, s.Body.Body)
	if t, ok := err.(*Thrown); ok && s.Catch != nil {
		c := newEnv(e)
		err = nil
		if s.Param != nil {
			for _, id := range patternNames(s.Param) {
				c.vars[id.Name] = &slot{kind: "catch"}
			}
			err = in.bind(c, f, s.Param, t.V, "catch")
		}
		if err == nil {
			err = in.block(c, f, s.Catch.Body)
		}
	}
	if s.Finally != nil {
		if _, fault := err.(uncatchable); fault {
			return err // an uncatchable fault skips finally
		}
		if ferr := in.block(newEnv(e), f, s.Finally.Body); ferr != nil {
			return ferr // a finalizer's completion replaces the try's
		}
	}
	return err
}

func (in *interp) switchStmt(e *env, f *frame, s *syntax.Switch) error {
	d, err := in.eval(e, f, s.Disc)
	if err != nil {
		return err
	}
	body := newEnv(e)
	for _, c := range s.Cases {
		for _, st := range c.Body {
			in.hoist(body, st)
		}
	}
	start := -1
	for i, c := range s.Cases {
		if c.Test == nil {
			continue
		}
		v, err := in.eval(body, f, c.Test)
		if err != nil {
			return err
		}
		if strictEqual(d, v) {
			start = i
			break
		}
	}
	if start < 0 {
		for i, c := range s.Cases {
			if c.Test == nil {
				start = i
			}
		}
	}
	if start < 0 {
		return nil
	}
	for _, c := range s.Cases[start:] {
		for _, st := range c.Body {
			if err := in.exec(body, f, st); err != nil {
				if err == errBreak {
					return nil
				}
				return err
			}
		}
	}
	return nil
}

// bind binds a declaration's pattern to v in e, whose slots the block hoisted.
func (in *interp) bind(e *env, f *frame, p syntax.Pattern, v Value, kind string) error {
	return in.destructure(e, f, p, v, func(id *syntax.Ident, v Value) error {
		s := e.vars[id.Name]
		if s == nil {
			s = &slot{kind: kind}
			e.vars[id.Name] = s
		}
		s.v, s.initialized = v, true
		return nil
	})
}

// assignPattern assigns v to an assignment target.
func (in *interp) assignPattern(e *env, f *frame, p syntax.Pattern, v Value) error {
	if m, ok := p.(*syntax.Member); ok {
		return in.assignMember(e, f, m, v)
	}
	return in.destructure(e, f, p, v, func(id *syntax.Ident, v Value) error { return in.assignName(e, f, id, v) })
}

// destructure walks a pattern over v, calling leaf for each name.
func (in *interp) destructure(e *env, f *frame, p syntax.Pattern, v Value, leaf func(*syntax.Ident, Value) error) error {
	switch p := p.(type) {
	case *syntax.Ident:
		return leaf(p, v)
	case *syntax.Member:
		return in.assignMember(e, f, p, v)
	case *syntax.DefaultPattern:
		if v == Undefined {
			var err error
			if v, err = in.eval(e, f, p.Default); err != nil {
				return err
			}
		}
		return in.destructure(e, f, p.Target, v, leaf)
	case *syntax.ObjectPattern:
		used := map[string]bool{}
		for _, pr := range p.Props {
			key := pr.Key
			if pr.Computed != nil {
				k, err := in.eval(e, f, pr.Computed)
				if err != nil {
					return err
				}
				if key, err = propertyKey(k); err != nil {
					return err
				}
			}
			used[key] = true
			field, err := member(v, key)
			if err != nil {
				return err
			}
			if err := in.destructure(e, f, pr.Value, field, leaf); err != nil {
				return err
			}
		}
		if p.Rest != nil {
			rest := NewRecord()
			rest.owner = f
			if r, ok := v.(*Record); ok {
				for _, k := range r.keys {
					if !used[k] {
						rest.Set(k, r.fields[k])
					}
				}
			} else if v == nil || v == Undefined {
				return runtimeFault("L4010", "destructuring %s", describe(v))
			}
			return in.destructure(e, f, p.Rest, rest, leaf)
		}
		return nil
	case *syntax.ArrayPattern:
		items, err := iterate(v)
		if err != nil {
			return err
		}
		for i, el := range p.Elems {
			var item Value = Undefined
			if i < len(items) {
				item = items[i]
			}
			if el == nil {
				continue
			}
			if err := in.destructure(e, f, el, item, leaf); err != nil {
				return err
			}
		}
		if p.Rest != nil {
			rest := &Array{owner: f}
			if len(items) > len(p.Elems) {
				rest.Elems = append(rest.Elems, items[len(p.Elems):]...)
			}
			return in.destructure(e, f, p.Rest, rest, leaf)
		}
		return nil
	}
	return runtimeFault("L1029", "%T is not a pattern", p)
}

// assignName writes v to the binding id names.
func (in *interp) assignName(e *env, f *frame, id *syntax.Ident, v Value) error {
	s := e.lookup(id.Name)
	switch {
	case s == nil:
		return runtimeFault("L2001", "%s is not declared", id.Name)
	case !s.initialized:
		return runtimeFault("L2004", "%s is used before its declaration", id.Name)
	case s.kind == "const" || s.kind == "function" || s.kind == "catch":
		return runtimeFault("L2003", "%s cannot be assigned", id.Name)
	}
	s.v = v
	return nil
}

// ---- expressions ----

func (in *interp) eval(e *env, f *frame, x syntax.Expr) (Value, error) {
	if err := in.step(); err != nil {
		return nil, err
	}
	switch x := x.(type) {
	case *syntax.Literal:
		switch x.Kind {
		case syntax.LitNull:
			return nil, nil
		case syntax.LitBool:
			return x.Bool, nil
		case syntax.LitNumber:
			return x.Num, nil
		case syntax.LitString:
			return x.Str, nil
		}
		return nil, runtimeFault("L1029", "the literal %s is not in the language", x.Raw)
	case *syntax.Ident:
		return in.lookup(e, x)
	case *syntax.Template:
		var b strings.Builder
		for i, q := range x.Quasis {
			b.WriteString(q)
			if i < len(x.Exprs) {
				v, err := in.eval(e, f, x.Exprs[i])
				if err != nil {
					return nil, err
				}
				s, err := toStringPrimitive(v, "a template literal")
				if err != nil {
					return nil, err
				}
				b.WriteString(s)
			}
		}
		return b.String(), nil
	case *syntax.Array:
		elems, err := in.args(e, f, x.Elems) // spread as a call's arguments spread
		if err != nil {
			return nil, err
		}
		return &Array{Elems: elems, owner: f}, nil
	case *syntax.Object:
		return in.object(e, f, x)
	case *syntax.Function:
		return &Closure{fn: x, env: e}, nil
	case *syntax.Paren:
		return in.eval(e, f, x.X)
	case *syntax.Chain:
		v, err := in.eval(e, f, x.X)
		if err == errShortCircuit {
			return Undefined, nil
		}
		return v, err
	case *syntax.Member:
		obj, key, err := in.memberParts(e, f, x)
		if err != nil {
			return nil, err
		}
		if x.Optional && (obj == nil || obj == Undefined) {
			return nil, errShortCircuit
		}
		if fn := methodOf(obj, key); fn != nil {
			return nil, runtimeFault("L4020", "%s is a method, not a value: call it, or wrap it: (x) => v.%s(x)", key, key)
		}
		return member(obj, key)
	case *syntax.Call:
		return in.call(e, f, x)
	case *syntax.Unary:
		return in.unary(e, f, x)
	case *syntax.Update:
		return in.update(e, f, x)
	case *syntax.Binary:
		return in.binary(e, f, x)
	case *syntax.Cond:
		t, err := in.eval(e, f, x.Test)
		if err != nil {
			return nil, err
		}
		if truthy(t) {
			return in.eval(e, f, x.Then)
		}
		return in.eval(e, f, x.Else)
	case *syntax.Assign:
		return in.assign(e, f, x)
	case *syntax.Await:
		return in.eval(e, f, x.X)
	}
	return nil, runtimeFault("L1029", "%T is not in the language", x)
}

// errShortCircuit ends an optional chain at a null or undefined link.
var errShortCircuit = errors.New("optional chain")

func (in *interp) lookup(e *env, id *syntax.Ident) (Value, error) {
	s := e.lookup(id.Name)
	switch {
	case s != nil && !s.initialized:
		return nil, runtimeFault("L2004", "%s is used before its declaration", id.Name)
	case s != nil:
		return s.v, nil
	}
	if v, ok := in.globals[id.Name]; ok {
		return v, nil
	}
	return nil, runtimeFault("L2001", "%s is not declared", id.Name)
}

func (in *interp) object(e *env, f *frame, x *syntax.Object) (Value, error) {
	r := NewRecord()
	r.owner = f
	for _, p := range x.Props {
		switch p.Kind {
		case syntax.PropSpread:
			v, err := in.eval(e, f, p.Value)
			if err != nil {
				return nil, err
			}
			switch s := v.(type) {
			case *Record:
				for _, k := range s.keys {
					if err := setField(r, k, s.fields[k]); err != nil {
						return nil, err
					}
				}
			case *Array:
				for i, el := range s.Elems {
					r.Set(strconv.Itoa(i), el)
				}
			case string:
				for i, c := range []rune(s) {
					r.Set(strconv.Itoa(i), string(c))
				}
			}
			continue
		case syntax.PropMethod:
			if err := setField(r, p.Key, &Closure{fn: p.Value.(*syntax.Function), env: e}); err != nil {
				return nil, err
			}
			continue
		}
		key := p.Key
		if p.Computed != nil {
			k, err := in.eval(e, f, p.Computed)
			if err != nil {
				return nil, err
			}
			if key, err = propertyKey(k); err != nil {
				return nil, err
			}
		}
		v, err := in.eval(e, f, p.Value)
		if err != nil {
			return nil, err
		}
		if err := setField(r, key, v); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// setField writes a record field, refusing __proto__ (L4014) and a callable then (L4021).
func setField(r *Record, k string, v Value) error {
	if k == "__proto__" {
		return runtimeFault("L4014", "a record takes no field named __proto__")
	}
	if k == "then" && isCallable(v) {
		return runtimeFault("L4021", "a record may not carry a callable then")
	}
	r.Set(k, v)
	return nil
}

func isCallable(v Value) bool {
	switch v.(type) {
	case *Closure, *Builtin:
		return true
	}
	return false
}

// memberParts evaluates a member expression's object and key.
func (in *interp) memberParts(e *env, f *frame, x *syntax.Member) (Value, string, error) {
	obj, err := in.eval(e, f, x.X)
	if err != nil {
		return nil, "", err
	}
	if x.Index == nil {
		return obj, x.Name, nil
	}
	k, err := in.eval(e, f, x.Index)
	if err != nil {
		return nil, "", err
	}
	key, err := propertyKey(k)
	return obj, key, err
}

// propertyKey spells a computed key: a primitive, as JavaScript spells it; anything else is
// refused (L4018).
func propertyKey(k Value) (string, error) {
	switch k := k.(type) {
	case string:
		return k, nil
	case float64:
		return syntax.FormatNumber(k), nil
	case bool:
		return strconv.FormatBool(k), nil
	case nil:
		return "null", nil
	case undefinedType:
		return "undefined", nil
	}
	return "", runtimeFault("L4018", "%s is not a key: a computed key must be a primitive", describe(k))
}

// member reads obj[key] (spec §4.2).
func member(obj Value, key string) (Value, error) {
	switch o := obj.(type) {
	case nil, undefinedType:
		return nil, runtimeFault("L4010", "reading %s of %s", key, describe(obj))
	case *Record:
		if v, ok := o.fields[key]; ok {
			return v, nil
		}
		return Undefined, nil
	case *Array:
		if key == "length" {
			return float64(len(o.Elems)), nil
		}
		if i, ok := arrayIndex(key); ok {
			if i < len(o.Elems) {
				return o.Elems[i], nil
			}
			return Undefined, nil
		}
	case string:
		if key == "length" {
			return float64(len(utf16Units(o))), nil
		}
		if i, ok := arrayIndex(key); ok {
			u := utf16Units(o)
			if i < len(u) {
				return unitsString(u[i : i+1]), nil
			}
			return Undefined, nil
		}
	}
	return nil, runtimeFault("L4014", "%s has no member %q", describe(obj), key)
}

func arrayIndex(key string) (int, bool) {
	if !isIndexKey(key) {
		return 0, false
	}
	n, err := strconv.Atoi(key)
	return n, err == nil
}

// assignMember writes v to a member target (spec §4.3).
func (in *interp) assignMember(e *env, f *frame, x *syntax.Member, v Value) error {
	obj, key, err := in.memberParts(e, f, x)
	if err != nil {
		return err
	}
	return in.setMember(f, obj, key, v)
}

func (in *interp) setMember(f *frame, obj Value, key string, v Value) error {
	switch o := obj.(type) {
	case *Record:
		if o.frozen {
			return runtimeFault("L2031", "the record crossed an effect boundary and is frozen: build a new one ({ ...record, %s: value })", key)
		}
		if err := in.owns(f, o.owner); err != nil {
			return err
		}
		return setField(o, key, v)
	case *Array:
		if o.frozen {
			return runtimeFault("L2031", "the array crossed an effect boundary and is frozen: build a new one ([...list, item])")
		}
		if err := in.owns(f, o.owner); err != nil {
			return err
		}
		if key == "length" {
			n, ok := v.(float64)
			if !ok || n != math.Trunc(n) || n < 0 || int(n) > len(o.Elems) {
				return runtimeFault("L4017", "length %s: an array's length may only be truncated, to a whole number up to %d", display(v), len(o.Elems))
			}
			o.Elems = o.Elems[:int(n)]
			return nil
		}
		i, ok := arrayIndex(key)
		if !ok {
			return runtimeFault("L4014", "an array takes an index or length, not %q", key)
		}
		switch {
		case i < len(o.Elems):
			o.Elems[i] = v
		case i == len(o.Elems):
			o.Elems = append(o.Elems, v)
		default:
			return runtimeFault("L4019", "writing index %d past the end of an array of %d", i, len(o.Elems))
		}
		return nil
	case nil, undefinedType:
		return runtimeFault("L4010", "writing %s of %s", key, describe(obj))
	}
	return runtimeFault("L4014", "%s has no member %q to write", describe(obj), key)
}

// owns refuses a write from a concurrent branch into a value born outside it (L2032).
func (in *interp) owns(f, owner *frame) error {
	if owner == nil || f == nil {
		return nil
	}
	for b := f; b != nil; b = b.parent {
		if b == owner {
			return nil
		}
		if b.branch {
			return runtimeFault("L2032", "a concurrent branch writes a value born outside it: return the value from the branch")
		}
	}
	return nil
}

func (in *interp) assign(e *env, f *frame, x *syntax.Assign) (Value, error) {
	if x.Op == "=" {
		v, err := in.eval(e, f, x.Value)
		if err != nil {
			return nil, err
		}
		if id, ok := x.Target.(*syntax.Ident); ok {
			if err := in.checkBranchWrite(e, f, id); err != nil {
				return nil, err
			}
		}
		return v, in.assignPattern(e, f, x.Target, v)
	}
	// A compound assignment reads its target once.
	var cur Value
	var obj Value
	var key string
	var err error
	m, isMember := x.Target.(*syntax.Member)
	if isMember {
		if obj, key, err = in.memberParts(e, f, m); err != nil {
			return nil, err
		}
		if cur, err = member(obj, key); err != nil {
			return nil, err
		}
	} else {
		id := x.Target.(*syntax.Ident)
		if cur, err = in.lookup(e, id); err != nil {
			return nil, err
		}
		if err := in.checkBranchWrite(e, f, id); err != nil {
			return nil, err
		}
	}
	var v Value
	switch op := strings.TrimSuffix(x.Op, "="); op {
	case "&&", "||", "??":
		short := op == "&&" && !truthy(cur) || op == "||" && truthy(cur) || op == "??" && cur != nil && cur != Undefined
		if short {
			return cur, nil
		}
		if v, err = in.eval(e, f, x.Value); err != nil {
			return nil, err
		}
	default:
		r, err := in.eval(e, f, x.Value)
		if err != nil {
			return nil, err
		}
		if v, err = arith(op, cur, r); err != nil {
			return nil, err
		}
	}
	if isMember {
		return v, in.setMember(f, obj, key, v)
	}
	return v, in.assignName(e, f, x.Target.(*syntax.Ident), v)
}

// checkBranchWrite refuses a write from a concurrent branch to a binding declared outside it
// (L2032): the binding's scope must be inside the branch's own.
func (in *interp) checkBranchWrite(e *env, f *frame, id *syntax.Ident) error {
	if f == nil || f.branchEnv == nil {
		return nil
	}
	for s := e; s != nil; s = s.parent {
		if s.vars[id.Name] != nil {
			return nil // declared inside the branch's environment chain below its root
		}
		if s == f.branchEnv {
			break
		}
	}
	if e.lookup(id.Name) != nil {
		return runtimeFault("L2032", "a concurrent branch writes %s, declared outside it: return the value from the branch", id.Name)
	}
	return nil
}

func (in *interp) unary(e *env, f *frame, x *syntax.Unary) (Value, error) {
	if x.Op == "typeof" {
		if id, ok := x.X.(*syntax.Ident); ok && e.lookup(id.Name) == nil && in.globals[id.Name] == nil {
			if _, ok := in.globals[id.Name]; !ok {
				return "undefined", nil
			}
		}
	}
	v, err := in.eval(e, f, x.X)
	if err != nil {
		return nil, err
	}
	switch x.Op {
	case "!":
		return !truthy(v), nil
	case "typeof":
		return typeOf(v), nil
	case "-", "+", "~":
		n, err := toNumber(v, "the operator "+x.Op)
		if err != nil {
			return nil, err
		}
		switch x.Op {
		case "-":
			return -n, nil
		case "+":
			return n, nil
		}
		return float64(^toInt32(n)), nil
	}
	return nil, runtimeFault("L1029", "the operator %s is not in the language", x.Op)
}

func (in *interp) update(e *env, f *frame, x *syntax.Update) (Value, error) {
	var cur Value
	var err error
	var obj Value
	var key string
	m, isMember := unparen(x.X).(*syntax.Member)
	if isMember {
		if obj, key, err = in.memberParts(e, f, m); err != nil {
			return nil, err
		}
		cur, err = member(obj, key)
	} else {
		id := unparen(x.X).(*syntax.Ident)
		cur, err = in.lookup(e, id)
		if err == nil {
			err = in.checkBranchWrite(e, f, id)
		}
	}
	if err != nil {
		return nil, err
	}
	n, ok := cur.(float64)
	if !ok {
		return nil, runtimeFault("L4018", "%s%s needs a number, not %s", x.Op, "", describe(cur))
	}
	next := n + 1
	if x.Op == "--" {
		next = n - 1
	}
	if isMember {
		err = in.setMember(f, obj, key, next)
	} else {
		err = in.assignName(e, f, unparen(x.X).(*syntax.Ident), next)
	}
	if err != nil {
		return nil, err
	}
	if x.Prefix {
		return next, nil
	}
	return n, nil
}

func (in *interp) binary(e *env, f *frame, x *syntax.Binary) (Value, error) {
	l, err := in.eval(e, f, x.L)
	if err != nil {
		return nil, err
	}
	switch x.Op {
	case "&&":
		if !truthy(l) {
			return l, nil
		}
		return in.eval(e, f, x.R)
	case "||":
		if truthy(l) {
			return l, nil
		}
		return in.eval(e, f, x.R)
	case "??":
		if l != nil && l != Undefined {
			return l, nil
		}
		return in.eval(e, f, x.R)
	}
	r, err := in.eval(e, f, x.R)
	if err != nil {
		return nil, err
	}
	switch x.Op {
	case "===":
		return strictEqual(l, r), nil
	case "!==":
		return !strictEqual(l, r), nil
	}
	return arith(x.Op, l, r)
}
