package lang

import (
	"fmt"
	"slices"

	"github.com/gocotal/cotal/lang/internal/syntax"
)

// A race's branch digest (spec §10.6) is taken over its losing arms' function nodes in the
// shape the reference's parser (acorn, ECMAScript 2023, no parentheses kept) gives them, with
// their positions removed: the ESTree node types and fields, each literal's raw text. So a journal
// one implementation wrote is checked the same way by the other, a reformat is silent, and an
// edit inside a losing arm is not. Only what the validator admits is mapped: a refused construct
// never reaches a run.

// node builds an ESTree node record: its type, then its fields.
func node(typ string, kv ...any) *Record {
	return projection(append([]any{"type", typ}, kv...)...)
}

// nodes maps a list of syntax nodes.
func nodes[T any](list []T, conv func(T) Value) *Array {
	out := &Array{Elems: make([]Value, 0, len(list))}
	for _, x := range list {
		out.Elems = append(out.Elems, conv(x))
	}
	return out
}

// estreeExpr is an expression's ESTree node; nil for none.
func estreeExpr(x syntax.Expr) Value {
	switch x := x.(type) {
	case nil:
		return nil
	case *syntax.Paren:
		return estreeExpr(x.X)
	case *syntax.Ident:
		return node("Identifier", "name", x.Name)
	case *syntax.Literal:
		return estreeLiteral(x)
	case *syntax.Template:
		quasis := &Array{}
		for i, cooked := range x.Quasis {
			quasis.Elems = append(quasis.Elems, node("TemplateElement",
				"value", projection("raw", x.Raws[i], "cooked", cooked), "tail", i == len(x.Quasis)-1))
		}
		return node("TemplateLiteral", "expressions", nodes(x.Exprs, estreeExpr), "quasis", quasis)
	case *syntax.Array:
		return node("ArrayExpression", "elements", nodes(x.Elems, estreeExpr))
	case *syntax.Object:
		return node("ObjectExpression", "properties", nodes(x.Props, estreeProperty))
	case *syntax.Spread:
		return node("SpreadElement", "argument", estreeExpr(x.X))
	case *syntax.Member:
		var prop Value = node("Identifier", "name", x.Name)
		if x.Index != nil {
			prop = estreeExpr(x.Index)
		}
		return node("MemberExpression", "object", estreeExpr(x.X), "property", prop, "computed", x.Index != nil, "optional", x.Optional)
	case *syntax.Call:
		return node("CallExpression", "callee", estreeExpr(x.Callee), "arguments", nodes(x.Args, estreeExpr), "optional", x.Optional)
	case *syntax.Chain:
		return node("ChainExpression", "expression", estreeExpr(x.X))
	case *syntax.Unary:
		return node("UnaryExpression", "operator", x.Op, "prefix", true, "argument", estreeExpr(x.X))
	case *syntax.Update:
		return node("UpdateExpression", "operator", x.Op, "prefix", x.Prefix, "argument", estreeExpr(x.X))
	case *syntax.Binary:
		typ := "BinaryExpression"
		if x.Op == "&&" || x.Op == "||" || x.Op == "??" {
			typ = "LogicalExpression"
		}
		return node(typ, "left", estreeExpr(x.L), "operator", x.Op, "right", estreeExpr(x.R))
	case *syntax.Cond:
		return node("ConditionalExpression", "test", estreeExpr(x.Test), "consequent", estreeExpr(x.Then), "alternate", estreeExpr(x.Else))
	case *syntax.Assign:
		return node("AssignmentExpression", "operator", x.Op, "left", estreePattern(x.Target), "right", estreeExpr(x.Value))
	case *syntax.Await:
		return node("AwaitExpression", "argument", estreeExpr(x.X))
	case *syntax.Function:
		return estreeFunction(x, "")
	}
	return node(fmt.Sprintf("%T", x)) // refused by the validator: never reached by a run
}

func estreeLiteral(x *syntax.Literal) Value {
	var v Value
	switch x.Kind {
	case syntax.LitBool:
		v = x.Bool
	case syntax.LitNumber:
		v = x.Num
	case syntax.LitString:
		v = x.Str
	}
	return node("Literal", "value", v, "raw", x.Raw)
}

// estreeKey is a property key: a name, or the string or number literal written.
func estreeKey(name string, lit *syntax.Literal) Value {
	if lit != nil {
		return estreeLiteral(lit)
	}
	return node("Identifier", "name", name)
}

func estreeProperty(p *syntax.Property) Value {
	switch p.Kind {
	case syntax.PropSpread:
		return node("SpreadElement", "argument", estreeExpr(p.Value))
	case syntax.PropShorthand:
		key := estreeKey(p.Key, nil)
		var value = key
		if p.Default != nil {
			value = node("AssignmentPattern", "left", key, "right", estreeExpr(p.Default))
		}
		return estreePropertyNode(key, value, false, true)
	case syntax.PropMethod:
		return estreePropertyNode(estreeKey(p.Key, p.KeyLit), estreeFunction(p.Value.(*syntax.Function), "method"), true, false)
	}
	return estreePropertyNode(estreeKey(p.Key, p.KeyLit), estreeExpr(p.Value), false, false)
}

func estreePropertyNode(key, value Value, method, shorthand bool) Value {
	return node("Property", "method", method, "shorthand", shorthand, "computed", false, "key", key, "value", value, "kind", "init")
}

// estreeFunction is a function's node; as is "declaration" for a function declaration, "method"
// for a method's value (anonymous), "" for an expression or an arrow.
func estreeFunction(f *syntax.Function, as string) Value {
	params := nodes(f.Params, estreePattern)
	if f.Rest != nil {
		params.Elems = append(params.Elems, node("RestElement", "argument", estreePattern(f.Rest)))
	}
	var body Value
	if f.Body != nil {
		body = node("BlockStatement", "body", estreeBody(f.Body.Body))
	} else {
		body = estreeExpr(f.Expr)
	}
	if f.Arrow {
		return node("ArrowFunctionExpression", "id", nil, "expression", f.Body == nil, "generator", false, "async", f.Async, "params", params, "body", body)
	}
	var id Value
	if f.Name != "" && as != "method" {
		id = node("Identifier", "name", f.Name)
	}
	typ := "FunctionExpression"
	if as == "declaration" {
		typ = "FunctionDeclaration"
	}
	return node(typ, "id", id, "expression", false, "generator", f.Generator, "async", f.Async, "params", params, "body", body)
}

// estreeBody is a function body's statements: its leading string-literal statements are
// directives, which carry their text without the quotes.
func estreeBody(list []syntax.Stmt) *Array {
	out := nodes(list, estreeStmt)
	for i, s := range list {
		es, ok := s.(*syntax.ExprStmt)
		if !ok {
			break
		}
		lit, ok := es.X.(*syntax.Literal)
		if !ok || lit.Kind != syntax.LitString {
			break
		}
		out.Elems[i].(*Record).Set("directive", lit.Raw[1:len(lit.Raw)-1])
	}
	return out
}

func estreeStmt(s syntax.Stmt) Value {
	switch s := s.(type) {
	case nil:
		return nil
	case *syntax.ExprStmt:
		return node("ExpressionStatement", "expression", estreeExpr(s.X))
	case *syntax.VarDecl:
		return estreeVarDecl(s)
	case *syntax.FuncDecl:
		return estreeFunction(s.Func, "declaration")
	case *syntax.Block:
		return node("BlockStatement", "body", nodes(s.Body, estreeStmt))
	case *syntax.If:
		return node("IfStatement", "test", estreeExpr(s.Test), "consequent", estreeStmt(s.Then), "alternate", estreeStmt(s.Else))
	case *syntax.While:
		return node("WhileStatement", "test", estreeExpr(s.Test), "body", estreeStmt(s.Body))
	case *syntax.For:
		var init Value
		switch i := s.Init.(type) {
		case *syntax.VarDecl:
			init = estreeVarDecl(i)
		case syntax.Expr:
			init = estreeExpr(i)
		}
		return node("ForStatement", "init", init, "test", estreeExpr(s.Test), "update", estreeExpr(s.Update), "body", estreeStmt(s.Body))
	case *syntax.ForOf:
		left := estreePattern(s.Target)
		if s.Kind != "" {
			left = node("VariableDeclaration", "declarations", &Array{Elems: []Value{node("VariableDeclarator", "id", left, "init", nil)}}, "kind", s.Kind)
		}
		return node("ForOfStatement", "await", s.Await, "left", left, "right", estreeExpr(s.Iter), "body", estreeStmt(s.Body))
	case *syntax.Return:
		return node("ReturnStatement", "argument", estreeExpr(s.Arg))
	case *syntax.Branch:
		if s.Continue {
			return node("ContinueStatement", "label", nil)
		}
		return node("BreakStatement", "label", nil)
	case *syntax.Throw:
		return node("ThrowStatement", "argument", estreeExpr(s.Arg))
	case *syntax.Try:
		var handler, finalizer Value
		if s.Catch != nil {
			handler = node("CatchClause", "param", estreePattern(s.Param), "body", estreeStmt(s.Catch))
		}
		if s.Finally != nil {
			finalizer = estreeStmt(s.Finally)
		}
		return node("TryStatement", "block", estreeStmt(s.Body), "handler", handler, "finalizer", finalizer)
	case *syntax.Switch:
		cases := nodes(s.Cases, func(c *syntax.Case) Value {
			return node("SwitchCase", "consequent", nodes(c.Body, estreeStmt), "test", estreeExpr(c.Test))
		})
		return node("SwitchStatement", "discriminant", estreeExpr(s.Disc), "cases", cases)
	case *syntax.Empty:
		return node("EmptyStatement")
	}
	return node(fmt.Sprintf("%T", s)) // refused by the validator: never reached by a run
}

func estreeVarDecl(d *syntax.VarDecl) Value {
	decls := nodes(d.Decls, func(x *syntax.Declarator) Value {
		return node("VariableDeclarator", "id", estreePattern(x.Target), "init", estreeExpr(x.Init))
	})
	return node("VariableDeclaration", "declarations", decls, "kind", d.Kind)
}

func estreePattern(p syntax.Pattern) Value {
	switch p := p.(type) {
	case nil:
		return nil
	case *syntax.Ident:
		return estreeExpr(p)
	case *syntax.Member:
		return estreeExpr(p)
	case *syntax.DefaultPattern:
		return node("AssignmentPattern", "left", estreePattern(p.Target), "right", estreeExpr(p.Default))
	case *syntax.ObjectPattern:
		props := nodes(p.Props, func(pp *syntax.PatternProp) Value {
			return estreePropertyNode(estreeKey(pp.Key, pp.KeyLit), estreePattern(pp.Value), false, pp.Shorthand)
		})
		if p.Rest != nil {
			props.Elems = append(props.Elems, node("RestElement", "argument", estreePattern(p.Rest)))
		}
		return node("ObjectPattern", "properties", props)
	case *syntax.ArrayPattern:
		elems := nodes(p.Elems, estreePattern)
		if p.Rest != nil {
			elems.Elems = append(elems.Elems, node("RestElement", "argument", estreePattern(p.Rest)))
		}
		return node("ArrayPattern", "elements", elems)
	}
	return node(fmt.Sprintf("%T", p))
}

// branchDigester returns the digest of a race's losing arms as written in arms, the race's
// first argument: a record literal's arms by key, a loser it does not have as null. It returns
// nil when the arms are not a record literal: such a race records no digest.
func branchDigester(arms syntax.Expr) func(losers []string) (string, error) {
	obj, ok := unparen(arms).(*syntax.Object)
	if !ok {
		return nil
	}
	bodies := map[string]Value{}
	for _, p := range obj.Props {
		if p.Kind != syntax.PropSpread && p.Computed == nil {
			bodies[p.Key] = estreeProperty(p).(*Record).fields["value"] // a repeated key: the last
		}
	}
	return func(losers []string) (string, error) {
		sorted := slices.Clone(losers)
		slices.SortFunc(sorted, compareUTF16)
		pairs := &Array{}
		for _, k := range sorted {
			pairs.Elems = append(pairs.Elems, &Array{Elems: []Value{k, bodies[k]}})
		}
		return digest(pairs)
	}
}
