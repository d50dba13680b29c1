// Package lang is Cotal Lang, the language a Cotal workflow run executes (the reference's
// spec/cotal-lang.md): a small subset of JavaScript whose every interaction with the world is an
// effect written to a step journal. It needs no broker. Check validates a program before it runs.
package lang

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/gocotal/cotal/lang/internal/syntax"
)

// Diagnostic is one refusal or warning, in the program's own coordinates: its code (Lnnnn, the
// spec's Appendix A), its line and column (from 1; the column counts UTF-16 code units, as a
// JavaScript engine does), and a message naming the cause and the edit that fixes it.
type Diagnostic struct {
	Code    string `json:"code"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Message string `json:"message"`
}

func (d Diagnostic) String() string {
	return fmt.Sprintf("%d:%d: %s %s", d.Line, d.Column, d.Code, d.Message)
}

// Report is what Check answers: whether the program is accepted, every refusal, and the
// warnings, which never refuse.
type Report struct {
	Accepted    bool         `json:"accepted"`
	Diagnostics []Diagnostic `json:"diagnostics"`
	Warnings    []Diagnostic `json:"warnings,omitempty"`
}

// Check validates a program as the validator of spec §2 does: its syntax (L1xxx), its names and
// static rules (L2xxx), and the call shape of each effect it can see (L3xxx). It collects every
// refusal it can before answering; a syntax error outside JavaScript ends the parse, so
// refusals past it are not reported.
func Check(source string) *Report {
	_, r := check(source)
	return r
}

// check is Check, and the parsed program.
func check(source string) (*syntax.Program, *Report) {
	prog, diags := syntax.Parse(source)
	c := &checker{}
	for _, d := range diags {
		c.add(d.Pos, d.Code, "%s", d.Message)
	}
	if prog != nil {
		c.program(prog)
	}
	r := &Report{Diagnostics: c.diags, Warnings: c.warnings}
	for _, l := range [][]Diagnostic{r.Diagnostics, r.Warnings} {
		slices.SortStableFunc(l, func(a, b Diagnostic) int {
			return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column), strings.Compare(a.Code, b.Code))
		})
	}
	r.Diagnostics = slices.Compact(r.Diagnostics)
	if r.Diagnostics == nil {
		r.Diagnostics = []Diagnostic{}
	}
	r.Accepted = len(r.Diagnostics) == 0
	return prog, r
}

// checker walks a parsed program with its scopes.
type checker struct {
	diags, warnings []Diagnostic
	scope           *scope
	fn              *fnScope
	// following are the named branch functions being followed, so a recursive one is
	// followed once.
	following map[*syntax.Function]bool
}

func (c *checker) add(at syntax.Pos, code, format string, args ...any) {
	c.diags = append(c.diags, Diagnostic{Code: code, Line: at.Line, Column: at.Col, Message: titled(code, fmt.Sprintf(format, args...))})
}

func (c *checker) warn(at syntax.Pos, code, format string, args ...any) {
	c.warnings = append(c.warnings, Diagnostic{Code: code, Line: at.Line, Column: at.Col, Message: titled(code, fmt.Sprintf(format, args...))})
}

// binding is one declared name.
type binding struct {
	kind        string // const, let, var, function, param, catch
	fn          *fnScope
	initialized bool
	// async reports a binding to an async function: a call of it must be awaited (L2013).
	async bool
	// function is the function a function declaration or a const binds, and scope where it
	// was declared: a branch given by name is followed there (L2032).
	function *syntax.Function
	scope    *scope
}

type scope struct {
	parent *scope
	names  map[string]*binding
}

// fnScope is a function being walked; the program is the outermost. A concurrent branch is a
// function a scope runs as one of its branches.
type fnScope struct {
	parent *fnScope
	branch bool
}

func (c *checker) push() { c.scope = &scope{parent: c.scope, names: map[string]*binding{}} }
func (c *checker) pop()  { c.scope = c.scope.parent }

func (c *checker) lookup(name string) *binding {
	for s := c.scope; s != nil; s = s.parent {
		if b := s.names[name]; b != nil {
			return b
		}
	}
	return nil
}

// declare binds name in the current scope.
func (c *checker) declare(id *syntax.Ident, kind string, initialized bool) *binding {
	if isReserved(id.Name) {
		c.add(id.P, "L2002", "%s shadows a reserved name: choose another name", id.Name)
	}
	if b := c.scope.names[id.Name]; b != nil {
		if b.kind != "var" || kind != "var" {
			c.add(id.P, "L1029", "%s is declared twice in the same block", id.Name)
		}
		return b
	}
	b := &binding{kind: kind, fn: c.fn, initialized: initialized}
	c.scope.names[id.Name] = b
	return b
}

func (c *checker) program(p *syntax.Program) {
	c.fn = &fnScope{}
	c.push()
	c.statements(p.Body)
	c.pop()
}

// statements walks a block's statements: its let, const and function declarations bind the whole
// block, functions initialized at its start and the others where they are declared.
func (c *checker) statements(list []syntax.Stmt) {
	for _, s := range list {
		c.hoist(s)
	}
	for _, s := range list {
		c.stmt(s)
	}
}

func (c *checker) hoist(s syntax.Stmt) {
	switch s := s.(type) {
	case *syntax.VarDecl:
		for _, d := range s.Decls {
			for _, id := range patternNames(d.Target) {
				c.declare(id, s.Kind, false)
			}
		}
	case *syntax.FuncDecl:
		b := c.declare(&syntax.Ident{At: s.Func.At, Name: s.Func.Name}, "function", true)
		b.async, b.function, b.scope = s.Func.Async, s.Func, c.scope
	case *syntax.Refused:
		if s.Body != nil && s.What == "export" {
			c.hoist(s.Body)
		}
	}
}

func (c *checker) stmt(s syntax.Stmt) {
	switch s := s.(type) {
	case *syntax.ExprStmt:
		c.expr(s.X, false)
	case *syntax.VarDecl:
		for _, d := range s.Decls {
			if d.Init != nil {
				c.expr(d.Init, false)
				if f, ok := unparen(d.Init).(*syntax.Function); ok && s.Kind == "const" {
					if id, ok := d.Target.(*syntax.Ident); ok {
						b := c.scope.names[id.Name]
						b.async, b.function, b.scope = f.Async, f, c.scope
					}
				}
			}
			c.patternDefaults(d.Target)
			for _, id := range patternNames(d.Target) {
				if b := c.scope.names[id.Name]; b != nil {
					b.initialized = true
				}
			}
		}
	case *syntax.FuncDecl:
		c.function(s.Func, false)
	case *syntax.Block:
		c.push()
		c.statements(s.Body)
		c.pop()
	case *syntax.If:
		c.expr(s.Test, false)
		c.stmt(s.Then)
		if s.Else != nil {
			c.stmt(s.Else)
		}
	case *syntax.While:
		c.expr(s.Test, false)
		c.stmt(s.Body)
	case *syntax.For:
		c.push()
		switch init := s.Init.(type) {
		case *syntax.VarDecl:
			c.hoist(init)
			c.stmt(init)
		case syntax.Expr:
			c.expr(init, false)
		}
		if s.Test != nil {
			c.expr(s.Test, false)
		}
		if s.Update != nil {
			c.expr(s.Update, false)
		}
		c.stmt(s.Body)
		c.pop()
	case *syntax.ForOf:
		c.push()
		var declared []*binding
		if s.Kind != "" {
			for _, id := range patternNames(s.Target) {
				declared = append(declared, c.declare(id, s.Kind, false))
			}
		}
		c.expr(s.Iter, false)
		for _, b := range declared {
			b.initialized = true
		}
		if s.Kind == "" {
			c.assignTarget(s.Target)
		} else {
			c.patternDefaults(s.Target)
		}
		c.stmt(s.Body)
		c.pop()
	case *syntax.Return:
		if s.Arg != nil {
			c.expr(s.Arg, true)
		}
	case *syntax.Throw:
		c.expr(s.Arg, false)
	case *syntax.Try:
		c.stmt(s.Body)
		if s.Catch != nil {
			c.push()
			if s.Param != nil {
				for _, id := range patternNames(s.Param) {
					c.declare(id, "catch", true)
				}
				c.patternDefaults(s.Param)
			}
			c.stmt(s.Catch)
			c.pop()
		}
		if s.Finally != nil {
			c.stmt(s.Finally)
		}
	case *syntax.Switch:
		c.switchStmt(s)
	case *syntax.Refused:
		if s.Body != nil {
			c.stmt(s.Body)
		}
	}
}

// switchStmt walks a switch: its cases share one block, and each but the last must end in a
// statement that leaves the case (L1010).
func (c *checker) switchStmt(s *syntax.Switch) {
	c.expr(s.Disc, false)
	c.push()
	var body []syntax.Stmt
	for _, cs := range s.Cases {
		body = append(body, cs.Body...)
	}
	for _, st := range body {
		c.hoist(st)
	}
	for i, cs := range s.Cases {
		if cs.Test != nil {
			c.expr(cs.Test, false)
		}
		for _, st := range cs.Body {
			c.stmt(st)
		}
		if i < len(s.Cases)-1 && len(cs.Body) > 0 && !terminates(cs.Body[len(cs.Body)-1]) {
			c.add(cs.P, "L1010", "this case falls through to the next: end it with return, break, continue or throw")
		}
	}
	c.pop()
}

// terminates reports whether a case's last statement leaves the case.
func terminates(s syntax.Stmt) bool {
	switch s := s.(type) {
	case *syntax.Return, *syntax.Branch, *syntax.Throw:
		return true
	case *syntax.Block:
		return len(s.Body) > 0 && terminates(s.Body[len(s.Body)-1])
	}
	return false
}

// patternNames returns the names a binding pattern binds, in order.
func patternNames(p syntax.Pattern) []*syntax.Ident {
	switch p := p.(type) {
	case *syntax.Ident:
		return []*syntax.Ident{p}
	case *syntax.DefaultPattern:
		return patternNames(p.Target)
	case *syntax.ObjectPattern:
		var out []*syntax.Ident
		for _, pr := range p.Props {
			out = append(out, patternNames(pr.Value)...)
		}
		if p.Rest != nil {
			out = append(out, patternNames(p.Rest)...)
		}
		return out
	case *syntax.ArrayPattern:
		var out []*syntax.Ident
		for _, el := range p.Elems {
			if el != nil {
				out = append(out, patternNames(el)...)
			}
		}
		if p.Rest != nil {
			out = append(out, patternNames(p.Rest)...)
		}
		return out
	}
	return nil
}

// patternDefaults walks the default values and computed keys inside a binding pattern.
func (c *checker) patternDefaults(p syntax.Pattern) {
	switch p := p.(type) {
	case *syntax.DefaultPattern:
		c.patternDefaults(p.Target)
		c.expr(p.Default, false)
	case *syntax.ObjectPattern:
		for _, pr := range p.Props {
			if pr.Computed != nil {
				c.expr(pr.Computed, false)
			}
			c.patternDefaults(pr.Value)
		}
	case *syntax.ArrayPattern:
		for _, el := range p.Elems {
			if el != nil {
				c.patternDefaults(el)
			}
		}
	}
}

// assignTarget checks an assignment's target: each name it writes must be declared, writable
// and, inside a concurrent branch, the branch's own (L2032); a member target's parts are walked.
func (c *checker) assignTarget(p syntax.Pattern) {
	switch p := p.(type) {
	case *syntax.Ident:
		c.write(p)
	case *syntax.Member:
		c.expr(p, false)
	case *syntax.DefaultPattern:
		c.assignTarget(p.Target)
		c.expr(p.Default, false)
	case *syntax.ObjectPattern:
		for _, pr := range p.Props {
			if pr.Computed != nil {
				c.expr(pr.Computed, false)
			}
			c.assignTarget(pr.Value)
		}
		if p.Rest != nil {
			c.assignTarget(p.Rest)
		}
	case *syntax.ArrayPattern:
		for _, el := range p.Elems {
			if el != nil {
				c.assignTarget(el)
			}
		}
		if p.Rest != nil {
			c.assignTarget(p.Rest)
		}
	}
}

// write checks a write to the name id.
func (c *checker) write(id *syntax.Ident) {
	b := c.lookup(id.Name)
	switch {
	case b == nil && isReserved(id.Name):
		c.add(id.P, "L2003", "%s is a reserved name and cannot be assigned: declare a name of your own", id.Name)
		return
	case b == nil:
		c.reference(id)
		return
	case b.kind == "const" || b.kind == "function" || b.kind == "catch":
		c.add(id.P, "L2003", "%s is a %s binding and cannot be assigned: declare it with let", id.Name, map[string]string{"const": "const", "function": "function", "catch": "catch parameter"}[b.kind])
	}
	if !b.initialized && b.fn == c.fn {
		c.add(id.P, "L2004", "%s is used before its declaration: move the declaration above this line", id.Name)
	}
	if c.crossesBranch(b) {
		c.add(id.P, "L2032", "a concurrent branch writes %s, declared outside it: return the value from the branch and read it from the scope's result", id.Name)
	}
}

// crossesBranch reports whether the function being walked is inside a concurrent branch that
// the binding b was declared outside of.
func (c *checker) crossesBranch(b *binding) bool {
	for f := c.fn; f != nil && f != b.fn; f = f.parent {
		if f.branch {
			return true
		}
	}
	return false
}

// reference checks a read of the name id.
func (c *checker) reference(id *syntax.Ident) {
	if b := c.lookup(id.Name); b != nil {
		if !b.initialized && b.fn == c.fn {
			c.add(id.P, "L2004", "%s is used before its declaration: move the declaration above this line", id.Name)
		}
		return
	}
	if isReserved(id.Name) {
		return
	}
	if id.Name == "Promise" {
		c.add(id.P, "L2011", "the Promise API is not available: use parallel, race or fanOut for concurrency")
		return
	}
	if fix, ok := hostGlobals[id.Name]; ok {
		if fix == "" {
			c.add(id.P, "L2012", "%s is a host global and is not available", id.Name)
		} else {
			c.add(id.P, "L2012", "%s is a host global and is not available: use %s", id.Name, fix)
		}
		return
	}
	c.add(id.P, "L2001", "%s is not declared: declare it with const or let, or check its spelling", id.Name)
}

// unparen is x without the parentheses around it.
func unparen(x syntax.Expr) syntax.Expr {
	for {
		p, ok := x.(*syntax.Paren)
		if !ok {
			return x
		}
		x = p.X
	}
}

// expr walks an expression; awaited reports that a call here may start an effect (it is the
// operand of await or return, or a branch's concise body).
func (c *checker) expr(x syntax.Expr, awaited bool) {
	switch x := x.(type) {
	case *syntax.Ident:
		c.reference(x)
	case *syntax.Literal, *syntax.Keyword:
		if k, ok := x.(*syntax.Keyword); ok && k.X != nil {
			c.expr(k.X, false)
		}
	case *syntax.Template:
		if x.Tag != nil {
			c.expr(x.Tag, false)
		}
		for _, e := range x.Exprs {
			c.expr(e, false)
		}
	case *syntax.Array:
		for _, e := range x.Elems {
			if e != nil {
				c.expr(e, false)
			}
		}
	case *syntax.Object:
		for _, p := range x.Props {
			if p.Computed != nil {
				c.expr(p.Computed, false)
			}
			if p.Default != nil {
				c.add(p.P, "L1029", "a shorthand property with a default is only a destructuring pattern")
			}
			switch v := p.Value.(type) {
			case *syntax.Function:
				c.function(v, false)
			case nil:
			default:
				c.expr(v, false)
			}
		}
	case *syntax.Spread:
		c.expr(x.X, false)
	case *syntax.Member:
		c.expr(x.X, false)
		if x.Index != nil {
			c.expr(x.Index, false)
		}
	case *syntax.Call:
		c.call(x, awaited)
	case *syntax.Chain:
		c.expr(x.X, awaited)
	case *syntax.Unary:
		c.expr(x.X, false)
	case *syntax.Update:
		if id, ok := unparen(x.X).(*syntax.Ident); ok {
			c.write(id)
		} else {
			c.expr(x.X, false)
		}
	case *syntax.Binary:
		c.expr(x.L, false)
		c.expr(x.R, false)
	case *syntax.Cond:
		c.expr(x.Test, false)
		c.expr(x.Then, false)
		c.expr(x.Else, false)
	case *syntax.Assign:
		c.expr(x.Value, false)
		c.assignTarget(x.Target)
	case *syntax.Await:
		c.expr(unparen(x.X), true)
	case *syntax.Sequence:
		for _, e := range x.List {
			c.expr(e, false)
		}
	case *syntax.Paren:
		c.expr(x.X, false)
	case *syntax.Function:
		c.function(x, false)
	}
}

// function walks a function: its name (a named expression's binds inside it), its parameters
// left to right (a default reaches only the ones before it), and its body. branch marks a
// concurrent branch.
func (c *checker) function(f *syntax.Function, branch bool) {
	outerFn := c.fn
	c.fn = &fnScope{parent: outerFn, branch: branch}
	c.push()
	if f.Name != "" && f.Kind == syntax.PropInit && !isDeclared(f, c) {
		b := c.declare(&syntax.Ident{At: f.At, Name: f.Name}, "function", true)
		b.async = f.Async
	}
	var params []*binding
	for _, p := range f.Params {
		for _, id := range patternNames(p) {
			params = append(params, c.declare(id, "param", false))
		}
	}
	if f.Rest != nil {
		for _, id := range patternNames(f.Rest) {
			params = append(params, c.declare(id, "param", false))
		}
	}
	i := 0
	for _, p := range append(slices.Clone(f.Params), f.Rest) {
		if p == nil {
			continue
		}
		c.patternDefaults(p)
		for range patternNames(p) {
			params[i].initialized = true
			i++
		}
	}
	switch {
	case f.Body != nil:
		c.push()
		c.statements(f.Body.Body)
		c.pop()
	case f.Expr != nil:
		c.expr(f.Expr, branch)
	}
	c.pop()
	c.fn = outerFn
}

// isDeclared reports whether f is a function declaration already bound in the enclosing block
// (its name is not bound again inside it).
func isDeclared(f *syntax.Function, c *checker) bool {
	b := c.scope.parent.names[f.Name]
	return b != nil && b.kind == "function" && b.fn == c.fn.parent
}

// call walks a call: an effect call must be awaited (L2013) and is checked against its
// primitive's shape (L3xxx); the branches of a concurrency scope are walked as branches.
func (c *checker) call(x *syntax.Call, awaited bool) {
	callee := unparen(x.Callee)
	id, _ := callee.(*syntax.Ident)
	var b *binding
	if id != nil {
		b = c.lookup(id.Name)
	}
	primitive := ""
	if id != nil && b == nil {
		if _, ok := effects[id.Name]; ok {
			primitive = id.Name
		}
	}
	if (primitive != "" || b != nil && b.async) && !awaited && !x.New {
		c.add(x.P, "L2013", "%s(...) starts an effect and is not awaited: await it, return it, or run it as a branch of parallel, race or fanOut", id.Name)
	}
	c.expr(x.Callee, false)
	branches := map[syntax.Expr]bool{}
	if primitive != "" {
		c.effectShape(primitive, x, branches)
	}
	for _, a := range x.Args {
		c.arg(a, branches)
	}
}

// arg walks a call's argument; a branch function among them, or inside the record or array of
// branches, is walked as a concurrent branch.
func (c *checker) arg(a syntax.Expr, branches map[syntax.Expr]bool) {
	switch v := unparen(a).(type) {
	case *syntax.Function:
		c.function(v, branches[v])
		return
	case *syntax.Ident:
		if branches[v] {
			c.expr(v, false)
			c.followBranch(v)
			return
		}
	case *syntax.Object:
		if branches[v] {
			for _, p := range v.Props {
				if p.Kind != syntax.PropSpread && p.Value != nil {
					c.branchValue(p.Value)
				} else if p.Value != nil {
					c.expr(p.Value, false)
				}
			}
			return
		}
	case *syntax.Array:
		if branches[v] {
			for _, e := range v.Elems {
				if e != nil {
					c.branchValue(e)
				}
			}
			return
		}
	}
	c.expr(a, false)
}

// branchValue walks one branch of a record or array of branches: a function written there is a
// branch, and one named there is followed to where it was declared.
func (c *checker) branchValue(x syntax.Expr) {
	switch v := unparen(x).(type) {
	case *syntax.Function:
		c.function(v, true)
	case *syntax.Ident:
		c.expr(v, false)
		c.followBranch(v)
	default:
		c.expr(x, false)
	}
}

// followBranch walks the function a branch names as a concurrent branch, in the scope it was
// declared in, keeping only what that walk finds about writes across the branch (L2032): its
// other refusals were reported where it was declared.
func (c *checker) followBranch(id *syntax.Ident) {
	b := c.lookup(id.Name)
	if b == nil || b.function == nil || c.following[b.function] {
		return
	}
	if c.following == nil {
		c.following = map[*syntax.Function]bool{}
	}
	c.following[b.function] = true
	defer delete(c.following, b.function)
	saved, savedScope, savedFn, savedWarnings := len(c.diags), c.scope, c.fn, len(c.warnings)
	c.scope, c.fn = b.scope, b.fn
	c.function(b.function, true)
	c.scope, c.fn = savedScope, savedFn
	kept := c.diags[:saved]
	for _, d := range c.diags[saved:] {
		if d.Code == "L2032" {
			d.Message += fmt.Sprintf(" (the function %s, run as a branch)", id.Name)
			kept = append(kept, d)
		}
	}
	c.diags, c.warnings = kept, c.warnings[:savedWarnings]
}

// stepName is the step-name grammar (§6.2).
var stepName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$`)

// effectShape checks a call of an effect primitive against its shape where the call makes it
// visible, and marks the arguments whose functions are concurrent branches.
func (c *checker) effectShape(name string, x *syntax.Call, branches map[syntax.Expr]bool) {
	shape := effects[name]
	arg := func(i int) syntax.Expr {
		if i < len(x.Args) {
			if _, spread := x.Args[i].(*syntax.Spread); !spread {
				return unparen(x.Args[i])
			}
		}
		return nil
	}
	bag, _ := arg(shape.bag - 1).(*syntax.Object)
	options := map[string]*syntax.Property{}
	if bag != nil {
		for _, p := range bag.Props {
			switch {
			case p.Kind == syntax.PropSpread || p.Computed != nil:
				// keys known only at run time are checked there
			case !slices.Contains(shape.keys, p.Key):
				c.add(p.P, "L3011", "%s takes no option %q: %s", name, p.Key, signatures[name])
			default:
				options[p.Key] = p
			}
		}
	}
	// The step name.
	var nameExpr syntax.Expr
	nameAt := x.P
	if shape.positional {
		nameExpr = arg(0)
	} else if p := options["name"]; p != nil {
		nameExpr, nameAt = unparen(p.Value), p.P
	}
	switch {
	case nameExpr == nil && shape.named && (bag != nil || arg(shape.bag-1) == nil) && !shape.positional:
		c.add(nameAt, "L3012", "%s needs a step name: %s", name, signatures[name])
	case nameExpr == nil && shape.positional && len(x.Args) == 0:
		c.add(nameAt, "L3012", "%s needs a step name: %s", name, signatures[name])
	case nameExpr != nil:
		if s, ok := literalString(nameExpr); ok {
			if !stepName.MatchString(s) {
				c.add(nameExpr.Start(), "L3014", "the step name %q is not a kebab-case token of 1 to 64 characters (a-z, 0-9, -)", s)
			}
		} else if shape.named {
			c.add(nameExpr.Start(), "L3013", "the step name of %s must be a string literal: tools read it without running the program", name)
		}
	}
	switch name {
	case "checkpoint":
		if to := options["to"]; to != nil {
			if p := options["onExpiry"]; p == nil || !isLiteral(p.Value, "escalate") {
				c.add(to.P, "L3044", "to goes only with onExpiry: \"escalate\"")
			}
		}
	case "notify":
		if fact, ok := arg(1).(*syntax.Object); ok {
			c.notifyFact(fact)
		}
	case "waitUntil":
		if probe := arg(0); probe != nil {
			switch probe.(type) {
			case *syntax.Function, *syntax.Ident, *syntax.Member, *syntax.Call, *syntax.Cond:
			default:
				c.add(probe.Start(), "L3045", "the probe of waitUntil must be a function: waitUntil(async () => ..., { name, every, deadline })")
			}
		}
		if bag != nil {
			every, deadline := options["every"], options["deadline"]
			if every == nil || deadline == nil {
				c.add(bag.P, "L3046", "waitUntil needs both every (its cadence) and deadline: %s", signatures[name])
			} else if e, ok := literalDuration(every.Value); ok {
				if d, ok := literalDuration(deadline.Value); ok && (e == 0 || e > d) {
					c.add(every.P, "L3047", "the cadence %s is zero or longer than the deadline: choose a cadence shorter than the deadline", mustString(every.Value))
				}
			}
		}
	case "parallel", "race":
		switch b := arg(0).(type) {
		case *syntax.Object:
			branches[b] = true
			for _, p := range b.Props {
				if strings.ContainsAny(p.Key, "/#:") {
					c.add(p.P, "L3025", "the branch key %q contains /, # or :, which would forge a step key", p.Key)
				}
			}
		case *syntax.Array:
			branches[b] = true
			c.warn(b.P, "L3023", "array-form %s branches are keyed by index: inserting a branch shifts every later branch's steps; use a record of branches", name)
		}
	case "fanOut":
		if fn := arg(1); fn != nil {
			branches[fn] = true
		}
		if items, ok := arg(0).(*syntax.Array); ok && options["key"] == nil {
			for _, it := range items.Elems {
				if o, ok := unparen(it).(*syntax.Object); !ok || !hasKey(o, "id") {
					c.warn(items.P, "L3021", "the items of this fanOut carry no id and it names no key: give each item an id, or pass key")
					break
				}
			}
		}
	case "conclave":
		// one branch: not concurrent, so its writes are its own
	}
	// Values that cannot cross: a function or undefined given as effect data.
	for i, a := range x.Args {
		if i == shape.bag-1 || branches[unparen(a)] || name == "waitUntil" && i == 0 || (name == "fanOut" || name == "conclave") && i == 1 {
			continue
		}
		c.crossing(unparen(a), name, i)
	}
	for k, p := range options {
		if k == "terminal" || k == "key" || p.Value == nil { // functions by contract
			continue
		}
		c.crossing(unparen(p.Value), name, shape.bag-1)
	}
}

// crossing refuses a literal value that cannot cross an effect boundary: a function (L3042) or
// undefined (L3041), at the top of an argument or inside its literal records and arrays.
func (c *checker) crossing(v syntax.Expr, name string, i int) {
	switch v := v.(type) {
	case *syntax.Function:
		c.add(v.P, "L3042", "a function passed as data to %s (argument %d): effect data must have a canonical form", name, i+1)
	case *syntax.Ident:
		if v.Name == "undefined" && c.lookup("undefined") == nil {
			c.add(v.P, "L3041", "undefined cannot cross an effect boundary (%s, argument %d): use null, or leave the field out", name, i+1)
		}
	case *syntax.Object:
		for _, p := range v.Props {
			if p.Kind == syntax.PropMethod {
				c.add(p.P, "L3042", "a method passed as data to %s (argument %d): effect data must have a canonical form", name, i+1)
			} else if p.Value != nil && p.Kind != syntax.PropSpread {
				c.crossing(unparen(p.Value), name, i)
			}
		}
	case *syntax.Array:
		for _, e := range v.Elems {
			if e != nil {
				c.crossing(unparen(e), name, i)
			}
		}
	}
}

// notifyFact checks a literal fact against the bounded decision record (§6.8, L3043).
func (c *checker) notifyFact(fact *syntax.Object) {
	bad := func(at syntax.Pos, format string, args ...any) {
		c.add(at, "L3043", "the notify fact is not a bounded decision record: "+format, args...)
	}
	for _, p := range fact.Props {
		if p.Kind == syntax.PropSpread || p.Computed != nil {
			continue
		}
		v := unparen(p.Value)
		switch p.Key {
		case "decision", "outcome":
			if s, ok := literalString(v); ok && !stepName.MatchString(s) {
				bad(p.P, "%s %q is not a step-name token", p.Key, s)
			}
		case "detail":
			d, ok := v.(*syntax.Object)
			if !ok {
				if _, lit := v.(*syntax.Literal); lit {
					bad(p.P, "detail must be a record")
				}
				continue
			}
			if len(d.Props) > 8 {
				bad(d.P, "detail has %d keys, at most 8", len(d.Props))
			}
			for _, dp := range d.Props {
				if dp.Kind == syntax.PropSpread || dp.Computed != nil {
					continue
				}
				if len(dp.Key) > 32 || !stepName.MatchString(dp.Key) {
					bad(dp.P, "the detail key %q is not a kebab-case token of at most 32 characters", dp.Key)
				}
				switch dv := unparen(dp.Value).(type) {
				case *syntax.Literal:
					switch dv.Kind {
					case syntax.LitString:
						if len([]rune(dv.Str)) > 128 || strings.ContainsAny(dv.Str, "\n\r\u2028\u2029") || strings.IndexFunc(dv.Str, isControl) >= 0 {
							bad(dp.P, "the detail %s is not a single-line string of at most 128 characters", dp.Key)
						}
					case syntax.LitNull:
						bad(dp.P, "the detail %s is null: a detail value is a number, a boolean or a string", dp.Key)
					}
				case *syntax.Object, *syntax.Array, *syntax.Function:
					bad(dp.P, "the detail %s is not a number, a boolean or a string", dp.Key)
				}
			}
		default:
			bad(p.P, "it carries %q; a fact holds decision, outcome and detail only", p.Key)
		}
	}
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// literalString returns the value of a string literal or a template with no substitution.
func literalString(x syntax.Expr) (string, bool) {
	switch x := x.(type) {
	case *syntax.Literal:
		return x.Str, x.Kind == syntax.LitString
	case *syntax.Template:
		if len(x.Exprs) == 0 && x.Tag == nil {
			return x.Quasis[0], true
		}
	}
	return "", false
}

func isLiteral(x syntax.Expr, s string) bool {
	v, ok := literalString(unparen(x))
	return ok && v == s
}

func mustString(x syntax.Expr) string {
	s, _ := literalString(unparen(x))
	return s
}

func hasKey(o *syntax.Object, key string) bool {
	return slices.ContainsFunc(o.Props, func(p *syntax.Property) bool { return p.Key == key && p.Computed == nil })
}

// durationPattern is a duration's grammar (§4.6).
var durationPattern = regexp.MustCompile(`^(\d+)(ms|s|m|h|d)$`)

// literalDuration returns a literal duration in milliseconds.
func literalDuration(x syntax.Expr) (int64, bool) {
	s, ok := literalString(unparen(x))
	if !ok {
		return 0, false
	}
	ms, err := ParseDuration(s)
	return ms, err == nil
}
