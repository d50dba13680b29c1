package syntax

import (
	"fmt"
	"strings"
)

// Parse parses a program's source as the language admits it. It returns the tree and every
// refusal it met: a construct the language refuses (class, var, ==, ...) is reported with its
// code and parsed past, so one pass reports them all; syntax outside JavaScript itself stops the
// parse at the first error (L1029), and the tree is then nil.
func Parse(src string) (*Program, []Diagnostic) {
	p := &parser{lx: newLexer(src), fn: &funcCtx{async: true, top: true}}
	prog := p.program()
	if p.fatal {
		return nil, p.diags
	}
	return prog, p.diags
}

// funcCtx is the function a parse is inside: the program itself at the top.
type funcCtx struct {
	async bool
	top   bool
}

type parser struct {
	lx    lexer
	tok   token
	prev  token
	fn    *funcCtx
	noIn  bool // inside a for head's init: "in" ends the expression
	diags []Diagnostic
	fatal bool
	depth int // the nesting of statements and expressions being parsed
	// arrows memoizes, by the offset of a "(", whether an arrow's => follows its match.
	arrows map[int]bool
}

// maxNesting bounds how deeply statements and expressions nest, so no program exhausts the
// stack of the parser, the validator or the interpreter.
const maxNesting = 500

// nest enters one level of nesting; the caller defers the returned func.
func (p *parser) nest() func() {
	p.depth++
	if p.depth > maxNesting {
		p.fail(p.tok.pos, "the program nests deeper than %d levels", maxNesting)
	}
	return func() { p.depth-- }
}

// bailout stops a parse at a syntax error.
type bailout struct{}

func (p *parser) program() (prog *Program) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(bailout); !ok {
				panic(r)
			}
			p.fatal = true
		}
	}()
	p.advance()
	prog = &Program{At: At{p.tok.pos}}
	for p.tok.kind != tEOF {
		prog.Body = append(prog.Body, p.statement())
	}
	if p.lx.err != nil {
		p.diags = append(p.diags, *p.lx.err)
		p.fatal = true
	}
	return prog
}

// advance moves to the next token.
func (p *parser) advance() {
	p.prev = p.tok
	p.tok = p.lx.next()
	if p.lx.err != nil {
		p.diags = append(p.diags, *p.lx.err)
		panic(bailout{})
	}
}

// refuse records a refusal of a construct the parse goes on past.
func (p *parser) refuse(at Pos, code, format string, args ...any) {
	p.diags = append(p.diags, Diagnostic{Code: code, Pos: at, Message: fmt.Sprintf(format, args...)})
}

// fail records a syntax error and stops the parse.
func (p *parser) fail(at Pos, format string, args ...any) {
	p.refuse(at, "L1029", format, args...)
	panic(bailout{})
}

func (p *parser) unexpected() {
	switch p.tok.kind {
	case tEOF:
		p.fail(p.tok.pos, "unexpected end of the program")
	case tString, tNumber:
		p.fail(p.tok.pos, "unexpected %s", p.tok.raw)
	}
	p.fail(p.tok.pos, "unexpected %q", p.tok.value)
}

func (p *parser) is(punct string) bool { return p.tok.kind == tPunct && p.tok.value == punct }

func (p *parser) isWord(word string) bool {
	return p.tok.kind == tIdent && p.tok.value == word && p.tok.raw == word
}

func (p *parser) eat(punct string) bool {
	if p.is(punct) {
		p.advance()
		return true
	}
	return false
}

func (p *parser) expect(punct string) Pos {
	at := p.tok.pos
	if !p.eat(punct) {
		if p.tok.kind == tEOF {
			p.fail(p.tok.pos, "expected %q before the end of the program", punct)
		}
		p.fail(p.tok.pos, "expected %q, found %s", punct, p.describe())
	}
	return at
}

func (p *parser) describe() string {
	switch p.tok.kind {
	case tString, tNumber, tBigInt, tRegex:
		return p.tok.raw
	case tTemplate:
		return "a template literal"
	case tEOF:
		return "the end of the program"
	}
	return fmt.Sprintf("%q", p.tok.value)
}

// semicolon ends a statement: a semicolon, or one automatic insertion would put there.
func (p *parser) semicolon() {
	if p.eat(";") || p.is("}") || p.tok.kind == tEOF || p.tok.nl {
		return
	}
	p.fail(p.tok.pos, "expected the end of the statement, found %s", p.describe())
}

// reserved are the words that are never an identifier in a module.
var reserved = map[string]bool{
	"break": true, "case": true, "catch": true, "class": true, "const": true, "continue": true, "debugger": true,
	"default": true, "delete": true, "do": true, "else": true, "export": true, "extends": true, "finally": true,
	"for": true, "function": true, "if": true, "import": true, "in": true, "instanceof": true, "new": true,
	"return": true, "super": true, "switch": true, "this": true, "throw": true, "try": true, "typeof": true,
	"var": true, "void": true, "while": true, "with": true, "yield": true, "let": true, "static": true,
	"implements": true, "interface": true, "package": true, "private": true, "protected": true, "public": true,
	"await": true, "enum": true, "null": true, "true": true, "false": true,
}

// name reads an identifier that binds or references a name.
func (p *parser) name() *Ident {
	t := p.tok
	if t.kind != tIdent || reserved[t.value] {
		p.fail(t.pos, "expected a name, found %s", p.describe())
	}
	p.advance()
	return &Ident{At: At{t.pos}, Name: t.value}
}

// ---- statements ----

func (p *parser) statement() Stmt {
	defer p.nest()()
	t := p.tok
	if t.kind == tPunct {
		switch t.value {
		case "{":
			return p.block()
		case ";":
			p.advance()
			return &Empty{At{t.pos}}
		}
	}
	if t.kind == tIdent && t.raw == t.value {
		switch t.value {
		case "const", "let", "var":
			d := p.varDecl()
			p.semicolon()
			return d
		case "function":
			return &FuncDecl{At: At{t.pos}, Func: p.function(false, true)}
		case "async":
			if p.peekWordSameLine("function") {
				p.advance()
				f := p.function(true, true)
				f.P = t.pos
				return &FuncDecl{At: At{t.pos}, Func: f}
			}
		case "if":
			return p.ifStmt()
		case "while":
			p.advance()
			test := p.parenExpr()
			return &While{At: At{t.pos}, Test: test, Body: p.body("while")}
		case "do":
			p.refuse(t.pos, "L1022", "do...while is not in the language: use while or for")
			p.advance()
			body := p.body("do")
			if !p.isWord("while") {
				p.fail(p.tok.pos, "expected while after the body of do")
			}
			p.advance()
			test := p.parenExpr()
			p.eat(";")
			return &While{At: At{t.pos}, Test: test, Body: body, DoWhile: true}
		case "for":
			return p.forStmt()
		case "return":
			return p.returnStmt()
		case "break", "continue":
			p.advance()
			b := &Branch{At: At{t.pos}, Continue: t.value == "continue"}
			if p.tok.kind == tIdent && !p.tok.nl && !reserved[p.tok.value] {
				p.refuse(p.tok.pos, "L1017", "a labelled %s is not in the language: use a helper function or a flag", t.value)
				b.Label = p.tok.value
				p.advance()
			}
			p.semicolon()
			return b
		case "throw":
			p.advance()
			if p.tok.nl {
				p.fail(p.tok.pos, "a line break after throw: the thrown value must start on its line")
			}
			arg := p.expression()
			p.semicolon()
			return &Throw{At: At{t.pos}, Arg: arg}
		case "try":
			return p.tryStmt()
		case "switch":
			return p.switchStmt()
		case "with":
			p.refuse(t.pos, "L1013", "with is not in the language")
			p.advance()
			p.parenExpr()
			return &Refused{At: At{t.pos}, What: "with", Body: p.statement()}
		case "class":
			p.refuse(t.pos, "L1001", "class is not in the language: use records and functions")
			p.skipClass()
			return &Refused{At: At{t.pos}, What: "class"}
		case "import":
			if !p.peekPunct("(") && !p.peekPunct(".") {
				p.refuse(t.pos, "L1020", "import is not in the language: a program is one file")
				p.skipStatement()
				return &Refused{At: At{t.pos}, What: "import"}
			}
		case "export":
			p.refuse(t.pos, "L1020", "export is not in the language: a program is one file")
			p.advance()
			if p.isWord("const") || p.isWord("let") || p.isWord("var") || p.isWord("function") || p.isWord("async") || p.isWord("class") {
				return &Refused{At: At{t.pos}, What: "export", Body: p.statement()}
			}
			p.skipStatement()
			return &Refused{At: At{t.pos}, What: "export"}
		case "debugger":
			p.refuse(t.pos, "L1029", "debugger is not in the language")
			p.advance()
			p.semicolon()
			return &Refused{At: At{t.pos}, What: "debugger"}
		}
		if !reserved[t.value] && p.peekPunct(":") {
			p.refuse(t.pos, "L1017", "the label %s: is not in the language: use a helper function or a flag", t.value)
			p.advance()
			p.advance()
			return &Refused{At: At{t.pos}, What: "label", Body: p.statement()}
		}
	}
	x := p.expression()
	p.semicolon()
	return &ExprStmt{At: At{t.pos}, X: x}
}

// peek returns the token after the current one.
func (p *parser) peek() token {
	lx := p.lx
	lx.err = nil
	return lx.next()
}

func (p *parser) peekPunct(punct string) bool {
	t := p.peek()
	return t.kind == tPunct && t.value == punct
}

func (p *parser) peekWordSameLine(word string) bool {
	t := p.peek()
	return t.kind == tIdent && t.value == word && t.raw == word && !t.nl
}

func (p *parser) block() *Block {
	b := &Block{At: At{p.expect("{")}}
	for !p.is("}") {
		if p.tok.kind == tEOF {
			p.fail(p.tok.pos, "expected \"}\" before the end of the program")
		}
		b.Body = append(b.Body, p.statement())
	}
	p.advance()
	return b
}

// body is the body of an if, else or loop: braces are required (L1009), and the statement is
// parsed either way.
func (p *parser) body(of string) Stmt {
	if !p.is("{") {
		p.refuse(p.tok.pos, "L1009", "the body of %s is not braced: put it in { }", of)
	}
	return p.statement()
}

func (p *parser) parenExpr() Expr {
	p.expect("(")
	x := p.expression()
	p.expect(")")
	return x
}

func (p *parser) ifStmt() Stmt {
	s := &If{At: At{p.tok.pos}}
	p.advance()
	s.Test = p.parenExpr()
	s.Then = p.body("if")
	if p.isWord("else") {
		p.advance()
		if p.isWord("if") {
			s.Else = p.ifStmt()
		} else {
			s.Else = p.body("else")
		}
	}
	return s
}

func (p *parser) varDecl() *VarDecl {
	d := &VarDecl{At: At{p.tok.pos}, Kind: p.tok.value}
	if d.Kind == "var" {
		p.refuse(p.tok.pos, "L1003", "var is not in the language: use const, or let when it is reassigned")
	}
	p.advance()
	for {
		dc := &Declarator{At: At{p.tok.pos}, Target: p.bindingTarget()}
		if p.eat("=") {
			dc.Init = p.assign()
		}
		d.Decls = append(d.Decls, dc)
		if !p.eat(",") {
			return d
		}
	}
}

func (p *parser) forStmt() Stmt {
	at := p.tok.pos
	p.advance()
	await := false
	if p.isWord("await") {
		p.refuse(p.tok.pos, "L1029", "for await is not in the language: await inside the loop body")
		await = true
		p.advance()
	}
	p.expect("(")
	var init Node
	if p.isWord("const") || p.isWord("let") || p.isWord("var") {
		kind, kat := p.tok.value, p.tok.pos
		if kind == "var" {
			p.refuse(kat, "L1003", "var is not in the language: use const, or let when it is reassigned")
		}
		p.advance()
		target := p.bindingTarget()
		if p.isWord("of") || p.isWord("in") {
			return p.forOf(at, kind, target, await)
		}
		d := &VarDecl{At: At{kat}, Kind: kind}
		dc := &Declarator{At: At{target.Start()}, Target: target}
		saved := p.noIn
		p.noIn = true
		if p.eat("=") {
			dc.Init = p.assign()
		}
		d.Decls = append(d.Decls, dc)
		for p.eat(",") {
			dc := &Declarator{At: At{p.tok.pos}, Target: p.bindingTarget()}
			if p.eat("=") {
				dc.Init = p.assign()
			}
			d.Decls = append(d.Decls, dc)
		}
		p.noIn = saved
		init = d
	} else if !p.is(";") {
		saved := p.noIn
		p.noIn = true
		x := p.expression()
		p.noIn = saved
		if p.isWord("of") || p.isWord("in") {
			return p.forOf(at, "", p.toPattern(x), await)
		}
		init = x
	}
	f := &For{At: At{at}, Init: init}
	p.expect(";")
	if !p.is(";") {
		f.Test = p.expression()
	}
	p.expect(";")
	if !p.is(")") {
		f.Update = p.expression()
	}
	p.expect(")")
	f.Body = p.body("for")
	return f
}

func (p *parser) forOf(at Pos, kind string, target Pattern, await bool) Stmt {
	s := &ForOf{At: At{at}, Kind: kind, Target: target, Await: await, In: p.tok.value == "in"}
	if s.In {
		p.refuse(p.tok.pos, "L1004", "for...in is not in the language: use for (const k of keys(record))")
		p.advance()
		s.Iter = p.expression()
	} else {
		p.advance()
		s.Iter = p.assign()
	}
	p.expect(")")
	s.Body = p.body("for")
	return s
}

func (p *parser) returnStmt() Stmt {
	r := &Return{At: At{p.tok.pos}}
	if p.fn.top {
		p.refuse(p.tok.pos, "L1024", "return outside a function: log the result, or publish it through an effect")
	}
	p.advance()
	switch {
	case p.is(";"):
		p.advance()
	case p.is("}") || p.tok.kind == tEOF:
	case p.tok.nl:
		p.refuse(p.tok.pos, "L1008", "a value on the line after a bare return is not returned: put it on the return's line")
	default:
		r.Arg = p.expression()
		p.semicolon()
	}
	return r
}

func (p *parser) tryStmt() Stmt {
	s := &Try{At: At{p.tok.pos}}
	p.advance()
	s.Body = p.block()
	if p.isWord("catch") {
		p.advance()
		if p.eat("(") {
			s.Param = p.bindingTarget()
			p.expect(")")
		}
		s.Catch = p.block()
	}
	if p.isWord("finally") {
		p.advance()
		s.Finally = p.block()
	}
	if s.Catch == nil && s.Finally == nil {
		p.fail(p.tok.pos, "try needs a catch or a finally")
	}
	return s
}

func (p *parser) switchStmt() Stmt {
	s := &Switch{At: At{p.tok.pos}}
	p.advance()
	s.Disc = p.parenExpr()
	p.expect("{")
	for !p.eat("}") {
		c := &Case{At: At{p.tok.pos}}
		switch {
		case p.isWord("case"):
			p.advance()
			c.Test = p.expression()
		case p.isWord("default"):
			p.advance()
		default:
			p.fail(p.tok.pos, "expected case or default, found %s", p.describe())
		}
		p.expect(":")
		for !p.isWord("case") && !p.isWord("default") && !p.is("}") {
			if p.tok.kind == tEOF {
				p.fail(p.tok.pos, "expected \"}\" before the end of the program")
			}
			c.Body = append(c.Body, p.statement())
		}
		s.Cases = append(s.Cases, c)
	}
	return s
}

// skipClass passes a refused class: its head up to the body, and the body's braces.
func (p *parser) skipClass() {
	p.advance()
	for !p.is("{") {
		if p.tok.kind == tEOF {
			p.fail(p.tok.pos, "expected the class body")
		}
		p.advance()
	}
	p.skipBraces()
}

// skipBraces passes a balanced {...} from the current "{".
func (p *parser) skipBraces() {
	depth := 0
	for {
		switch {
		case p.tok.kind == tEOF:
			p.fail(p.tok.pos, "expected \"}\" before the end of the program")
		case p.is("{"):
			depth++
		case p.is("}"):
			depth--
			if depth == 0 {
				p.advance()
				return
			}
		case p.tok.kind == tTemplate && !p.tok.tail:
			p.templateRest()
			continue
		}
		p.advance()
	}
}

// skipStatement passes a refused import or export up to its end.
func (p *parser) skipStatement() {
	p.advance()
	for p.tok.kind != tEOF && !p.tok.nl && !p.is(";") {
		if p.is("{") {
			p.skipBraces()
			continue
		}
		p.advance()
	}
	p.eat(";")
}

// ---- expressions ----

// expression is an expression with the (refused) comma operator.
func (p *parser) expression() Expr {
	x := p.assign()
	if !p.is(",") {
		return x
	}
	seq := &Sequence{At: At{x.Start()}, List: []Expr{x}}
	p.refuse(p.tok.pos, "L1026", "the comma operator is not in the language: one statement per expression")
	for p.eat(",") {
		seq.List = append(seq.List, p.assign())
	}
	return seq
}

var assignOps = map[string]bool{
	"=": true, "+=": true, "-=": true, "*=": true, "/=": true, "%=": true, "**=": true, "<<=": true, ">>=": true,
	">>>=": true, "&=": true, "|=": true, "^=": true, "&&=": true, "||=": true, "??=": true,
}

func (p *parser) assign() Expr {
	defer p.nest()()
	if f := p.arrow(); f != nil {
		return f
	}
	if p.isWord("yield") {
		at := p.tok.pos
		p.refuse(at, "L1005", "yield is not in the language: use a loop with await inside it")
		p.advance()
		k := &Keyword{At: At{at}, Word: "yield"}
		if !p.tok.nl && !p.is(")") && !p.is("]") && !p.is("}") && !p.is(",") && !p.is(";") && !p.is(":") && p.tok.kind != tEOF {
			k.X = p.assign()
		}
		return k
	}
	left := p.conditional()
	if p.tok.kind == tPunct && assignOps[p.tok.value] {
		op := p.tok.value
		var target Pattern
		if op == "=" {
			target = p.toPattern(left)
		} else {
			target = p.simpleTarget(left)
		}
		p.advance()
		return &Assign{At: At{left.Start()}, Op: op, Target: target, Value: p.assign()}
	}
	return left
}

// arrow parses an arrow function when one starts here, and returns nil otherwise.
func (p *parser) arrow() Expr {
	t := p.tok
	async := false
	if t.kind == tIdent && t.value == "async" && t.raw == "async" {
		n := p.peek()
		if n.nl || !(n.kind == tIdent && !reserved[n.value] || n.kind == tPunct && n.value == "(") {
			return nil
		}
		save := *p
		p.advance()
		if p.arrowAhead() {
			async = true
		} else {
			*p = save
			return nil
		}
	} else if !p.arrowAhead() {
		return nil
	}
	f := &Function{At: At{t.pos}, Arrow: true, Async: async}
	if p.is("(") {
		p.params(f)
	} else {
		f.Params = []Pattern{p.name()}
	}
	if p.tok.nl {
		p.fail(p.tok.pos, "a line break before => ends the arrow's parameters")
	}
	p.expect("=>")
	outer := p.fn
	p.fn = &funcCtx{async: async}
	saved := p.noIn
	p.noIn = false
	if p.is("{") {
		f.Body = p.block()
	} else {
		f.Expr = p.assign()
	}
	p.noIn = saved
	p.fn = outer
	return f
}

// arrowAhead reports whether the tokens from here are an arrow's parameters and its =>.
func (p *parser) arrowAhead() bool {
	if p.tok.kind == tIdent && !reserved[p.tok.value] {
		n := p.peek()
		return n.kind == tPunct && n.value == "=>"
	}
	if !p.is("(") {
		return false
	}
	if p.arrows == nil {
		p.arrows = map[int]bool{}
	}
	start := p.tok.pos.Offset
	if known, ok := p.arrows[start]; ok {
		return known
	}
	lx := p.lx
	lx.err = nil
	// open holds, per bracket still open, the offset of a "(" (else -1), or -2 for a template
	// substitution, which its closing brace continues. Each "(" closed on the way is memoized
	// too, from the token after it, so a nest of parentheses is scanned once.
	open := []int{start}
	closed := -1
	for {
		t := lx.next()
		if closed >= 0 {
			p.arrows[closed] = t.kind == tPunct && t.value == "=>"
			closed = -1
		}
		if len(open) == 0 {
			break
		}
		if t.kind == tEOF || lx.err != nil {
			for _, o := range open {
				if o >= 0 {
					p.arrows[o] = false // never closed: no arrow
				}
			}
			break
		}
		switch {
		case t.kind == tPunct && t.value == "(":
			open = append(open, t.pos.Offset)
		case t.kind == tPunct && (t.value == "[" || t.value == "{"):
			open = append(open, -1)
		case t.kind == tTemplate && !t.tail:
			open = append(open, -2)
		case t.kind == tPunct && (t.value == ")" || t.value == "]" || t.value == "}"):
			top := open[len(open)-1]
			open = open[:len(open)-1]
			switch {
			case top == -2:
				if c := lx.continueTemplate(t); !c.tail {
					open = append(open, -2)
				}
			case top >= 0:
				closed = top
			}
		}
	}
	return p.arrows[start]
}

func (p *parser) params(f *Function) {
	p.expect("(")
	for !p.eat(")") {
		if p.is("...") {
			p.advance()
			f.Rest = p.bindingTarget()
			if p.is("=") {
				p.fail(p.tok.pos, "a rest parameter takes no default")
			}
			p.expect(")")
			return
		}
		f.Params = append(f.Params, p.bindingElement())
		if !p.is(")") {
			p.expect(",")
		}
	}
}

// function parses a function declaration or expression from the "function" keyword.
func (p *parser) function(async, decl bool) *Function {
	f := &Function{At: At{p.tok.pos}, Async: async}
	p.advance()
	if p.is("*") {
		p.refuse(p.tok.pos, "L1005", "a generator is not in the language: use a loop with await inside it")
		f.Generator = true
		p.advance()
	}
	if decl || p.tok.kind == tIdent {
		f.Name = p.name().Name
	}
	p.functionRest(f)
	return f
}

// functionRest parses a function's parameters and body.
func (p *parser) functionRest(f *Function) {
	outer := p.fn
	p.fn = &funcCtx{async: f.Async}
	saved := p.noIn
	p.noIn = false
	p.params(f)
	f.Body = p.block()
	p.noIn = saved
	p.fn = outer
}

func (p *parser) conditional() Expr {
	test := p.binary(0)
	if !p.is("?") {
		return test
	}
	p.advance()
	saved := p.noIn
	p.noIn = false
	then := p.assign()
	p.noIn = saved
	p.expect(":")
	return &Cond{At: At{test.Start()}, Test: test, Then: then, Else: p.assign()}
}

var precedence = map[string]int{
	"??": 1, "||": 2, "&&": 3, "|": 4, "^": 5, "&": 6,
	"==": 7, "!=": 7, "===": 7, "!==": 7,
	"<": 8, ">": 8, "<=": 8, ">=": 8, "instanceof": 8, "in": 8,
	"<<": 9, ">>": 9, ">>>": 9, "+": 10, "-": 10, "*": 11, "/": 11, "%": 11, "**": 12,
}

// binaryOp returns the binary operator at the current token and its precedence, or 0.
func (p *parser) binaryOp() (string, int) {
	switch {
	case p.tok.kind == tPunct:
		return p.tok.value, precedence[p.tok.value]
	case p.isWord("instanceof"), p.isWord("in") && !p.noIn:
		return p.tok.value, precedence[p.tok.value]
	}
	return "", 0
}

func (p *parser) binary(min int) Expr {
	left := p.unary()
	for {
		op, prec := p.binaryOp()
		if prec == 0 || prec <= min {
			return left
		}
		at := p.tok.pos
		switch op {
		case "==", "!=":
			p.refuse(at, "L1025", "%s is not in the language: use %s=", op, op)
		case "in":
			p.refuse(at, "L1004", "the in operator is not in the language: use has(record, key)")
		case "instanceof":
			p.refuse(at, "L1016", "instanceof is not in the language: compare a field")
		}
		if op == "**" {
			if u, ok := left.(*Unary); ok {
				p.fail(u.P, "a unary operator before ** needs parentheses")
			}
		}
		p.advance()
		var right Expr
		if op == "**" {
			right = p.binary(prec - 1) // right-associative
		} else {
			right = p.binary(prec)
		}
		left = &Binary{At: At{left.Start()}, Op: op, L: left, R: right}
	}
}

func (p *parser) unary() Expr {
	defer p.nest()()
	t := p.tok
	switch {
	case t.kind == tPunct && (t.value == "!" || t.value == "-" || t.value == "+" || t.value == "~"):
		p.advance()
		return &Unary{At: At{t.pos}, Op: t.value, X: p.unary()}
	case t.kind == tPunct && (t.value == "++" || t.value == "--"):
		p.advance()
		x := p.unary()
		return &Update{At: At{t.pos}, Op: t.value, Prefix: true, X: p.simpleTargetExpr(x)}
	case p.isWord("typeof"):
		p.advance()
		return &Unary{At: At{t.pos}, Op: "typeof", X: p.unary()}
	case p.isWord("void"):
		p.refuse(t.pos, "L1027", "void is not in the language: use undefined, or drop the expression")
		p.advance()
		return &Unary{At: At{t.pos}, Op: "void", X: p.unary()}
	case p.isWord("delete"):
		p.refuse(t.pos, "L1021", "delete is not in the language: build a new record")
		p.advance()
		return &Unary{At: At{t.pos}, Op: "delete", X: p.unary()}
	case p.isWord("await"):
		if !p.fn.async {
			p.refuse(t.pos, "L1023", "await in a function that is not async: mark the function async")
		}
		p.advance()
		return &Await{At: At{t.pos}, X: p.unary()}
	}
	x := p.leftHandSide()
	if p.tok.kind == tPunct && (p.tok.value == "++" || p.tok.value == "--") && !p.tok.nl {
		op := p.tok.value
		p.advance()
		return &Update{At: At{x.Start()}, Op: op, X: p.simpleTargetExpr(x)}
	}
	return x
}

// leftHandSide parses a member, call or new expression.
func (p *parser) leftHandSide() Expr {
	t := p.tok
	var x Expr
	switch {
	case p.isWord("new"):
		p.advance()
		if p.eat(".") {
			if !p.isWord("target") {
				p.fail(p.tok.pos, "expected new.target")
			}
			p.refuse(t.pos, "L1020", "new.target is not in the language")
			p.advance()
			x = &Keyword{At: At{t.pos}, Word: "new.target"}
			break
		}
		p.refuse(t.pos, "L1019", "new is not in the language: use records and functions")
		callee := p.memberOnly()
		c := &Call{At: At{t.pos}, Callee: callee, New: true}
		if p.is("(") {
			c.Args = p.arguments()
		}
		x = c
	case p.isWord("super"):
		p.refuse(t.pos, "L1019", "super is not in the language: use records and functions")
		p.advance()
		x = &Keyword{At: At{t.pos}, Word: "super"}
	case p.isWord("import"):
		p.advance()
		if p.eat(".") {
			p.refuse(t.pos, "L1020", "import.meta is not in the language: run() gives the run's metadata")
			p.name()
			x = &Keyword{At: At{t.pos}, Word: "import.meta"}
			break
		}
		p.refuse(t.pos, "L1020", "import() is not in the language: a program is one file")
		x = &Call{At: At{t.pos}, Callee: &Keyword{At: At{t.pos}, Word: "import"}, Args: p.arguments()}
	default:
		x = p.primary()
	}
	return p.suffixes(x, true)
}

// memberOnly parses a new expression's callee: a primary and its member accesses, no call.
func (p *parser) memberOnly() Expr {
	x := p.primary()
	for {
		switch {
		case p.is("."):
			x = p.dotMember(x, false)
		case p.is("["):
			at := p.tok.pos
			p.advance()
			idx := p.expression()
			p.expect("]")
			x = &Member{At: At{at}, X: x, Index: idx}
		default:
			return x
		}
	}
}

func (p *parser) dotMember(x Expr, optional bool) Expr {
	if !optional {
		p.advance()
	}
	t := p.tok
	if t.kind == tPrivate {
		p.fail(t.pos, "#%s is not in the language: records have no private fields", t.value)
	}
	if t.kind != tIdent {
		p.fail(t.pos, "expected a member name, found %s", p.describe())
	}
	if t.value == "__proto__" {
		p.refuse(t.pos, "L1028", "the property name __proto__ is not in the language: use another name")
	}
	p.advance()
	return &Member{At: At{t.pos}, X: x, Name: t.value, Optional: optional}
}

// suffixes parses the member accesses, calls and (refused) tagged templates after x; calls when
// calls may follow. A chain holding ?. is wrapped in a Chain.
func (p *parser) suffixes(x Expr, calls bool) Expr {
	chained := false
	for {
		switch {
		case p.is("."):
			x = p.dotMember(x, false)
		case p.is("?."):
			chained = true
			p.advance()
			switch {
			case p.is("("):
				x = &Call{At: At{x.Start()}, Callee: x, Args: p.arguments(), Optional: true}
			case p.is("["):
				at := p.tok.pos
				p.advance()
				idx := p.expression()
				p.expect("]")
				x = &Member{At: At{at}, X: x, Index: idx, Optional: true}
			default:
				x = p.dotMember(x, true)
			}
		case p.is("["):
			if p.tok.nl {
				p.refuse(p.tok.pos, "L1008", "a line opening with [ continues the statement above it: end that statement with a semicolon, or join the lines")
			}
			at := p.tok.pos
			p.advance()
			saved := p.noIn
			p.noIn = false
			idx := p.expression()
			p.noIn = saved
			p.expect("]")
			x = &Member{At: At{at}, X: x, Index: idx}
		case p.is("(") && calls:
			if p.tok.nl {
				p.refuse(p.tok.pos, "L1008", "a line opening with ( continues the statement above it: end that statement with a semicolon, or join the lines")
			}
			x = &Call{At: At{x.Start()}, Callee: x, Args: p.arguments()}
		case p.tok.kind == tTemplate:
			p.refuse(p.tok.pos, "L1018", "a tagged template is not in the language: use a plain template literal")
			tpl := p.template()
			tpl.Tag = x
			x = tpl
		default:
			if chained {
				return &Chain{At: At{x.Start()}, X: x}
			}
			return x
		}
	}
}

func (p *parser) arguments() []Expr {
	p.expect("(")
	saved := p.noIn
	p.noIn = false
	var args []Expr
	for !p.eat(")") {
		if p.is("...") {
			at := p.tok.pos
			p.advance()
			args = append(args, &Spread{At: At{at}, X: p.assign()})
		} else {
			args = append(args, p.assign())
		}
		if !p.is(")") {
			p.expect(",")
		}
	}
	p.noIn = saved
	return args
}

func (p *parser) primary() Expr {
	t := p.tok
	switch t.kind {
	case tNumber:
		p.advance()
		return &Literal{At: At{t.pos}, Kind: LitNumber, Num: t.num, Raw: t.raw}
	case tString:
		p.advance()
		return &Literal{At: At{t.pos}, Kind: LitString, Str: t.value, Raw: t.raw}
	case tBigInt:
		p.refuse(t.pos, "L1030", "a bigint literal is not in the language: use a number, or a string")
		p.advance()
		return &Literal{At: At{t.pos}, Kind: LitBigInt, Raw: t.raw}
	case tRegex:
		p.refuse(t.pos, "L1007", "a regular expression is not in the language: use contains, startsWith, endsWith or split")
		p.advance()
		return &Literal{At: At{t.pos}, Kind: LitRegex, Raw: t.raw}
	case tTemplate:
		return p.template()
	case tPunct:
		switch t.value {
		case "(":
			p.advance()
			saved := p.noIn
			p.noIn = false
			x := p.expression()
			p.noIn = saved
			p.expect(")")
			return &Paren{At: At{t.pos}, X: x}
		case "[":
			return p.array()
		case "{":
			return p.object()
		}
	case tIdent:
		if t.raw != t.value {
			break // an escaped keyword is a name, checked below
		}
		switch t.value {
		case "null":
			p.advance()
			return &Literal{At: At{t.pos}, Kind: LitNull, Raw: "null"}
		case "true", "false":
			p.advance()
			return &Literal{At: At{t.pos}, Kind: LitBool, Bool: t.value == "true", Raw: t.value}
		case "this":
			p.refuse(t.pos, "L1002", "this is not in the language: pass the record as an argument")
			p.advance()
			return &Keyword{At: At{t.pos}, Word: "this"}
		case "function":
			return p.function(false, false)
		case "async":
			if p.peekWordSameLine("function") {
				p.advance()
				f := p.function(true, false)
				f.P = t.pos
				return f
			}
		case "class":
			p.refuse(t.pos, "L1001", "class is not in the language: use records and functions")
			p.skipClass()
			return &Keyword{At: At{t.pos}, Word: "class"}
		}
	}
	if t.kind == tIdent && !reserved[t.value] {
		p.advance()
		return &Ident{At: At{t.pos}, Name: t.value}
	}
	p.unexpected()
	return nil
}

// template parses a template literal from its first chunk.
func (p *parser) template() *Template {
	tpl := &Template{At: At{p.tok.pos}, Quasis: []string{p.tok.value}, Raws: []string{templateRaw(p.tok.raw)}}
	for !p.tok.tail {
		p.advance()
		saved := p.noIn
		p.noIn = false
		tpl.Exprs = append(tpl.Exprs, p.expression())
		p.noIn = saved
		if !p.is("}") {
			p.fail(p.tok.pos, "expected \"}\" to end the template substitution, found %s", p.describe())
		}
		p.tok = p.lx.continueTemplate(p.tok)
		if p.lx.err != nil {
			p.diags = append(p.diags, *p.lx.err)
			panic(bailout{})
		}
		tpl.Quasis = append(tpl.Quasis, p.tok.value)
		tpl.Raws = append(tpl.Raws, templateRaw(p.tok.raw))
	}
	p.advance()
	return tpl
}

// templateRaw is a template chunk's source text with its line breaks normalized to \n, as
// ECMAScript defines a template's raw strings.
func templateRaw(raw string) string {
	return strings.ReplaceAll(strings.ReplaceAll(raw, "\r\n", "\n"), "\r", "\n")
}

// templateRest passes the rest of a template being skipped from a chunk that opens a
// substitution.
func (p *parser) templateRest() { p.template() }

func (p *parser) array() Expr {
	a := &Array{At: At{p.tok.pos}}
	p.advance()
	saved := p.noIn
	p.noIn = false
	for !p.eat("]") {
		switch {
		case p.is(","):
			p.refuse(p.tok.pos, "L1012", "an array hole is not in the language: write the value, or null")
			a.Elems = append(a.Elems, nil)
			p.advance()
			continue
		case p.is("..."):
			at := p.tok.pos
			p.advance()
			a.Elems = append(a.Elems, &Spread{At: At{at}, X: p.assign()})
		default:
			a.Elems = append(a.Elems, p.assign())
		}
		if !p.is("]") {
			p.expect(",")
		}
	}
	p.noIn = saved
	return a
}

func (p *parser) object() Expr {
	o := &Object{At: At{p.tok.pos}}
	p.advance()
	saved := p.noIn
	p.noIn = false
	for !p.eat("}") {
		o.Props = append(o.Props, p.property())
		if !p.is("}") {
			p.expect(",")
		}
	}
	p.noIn = saved
	return o
}

func (p *parser) property() *Property {
	t := p.tok
	pr := &Property{At: At{t.pos}}
	if p.is("...") {
		p.advance()
		pr.Kind, pr.Value = PropSpread, p.assign()
		return pr
	}
	kind, async, generator := PropInit, false, false
	if t.kind == tIdent && (t.value == "get" || t.value == "set" || t.value == "async") {
		n := p.peek()
		if !(n.kind == tPunct && (n.value == "," || n.value == ":" || n.value == "(" || n.value == "}" || n.value == "=")) {
			p.advance()
			switch t.value {
			case "get", "set":
				p.refuse(t.pos, "L1015", "a %ster is not in the language: store the value, or call a function", t.value)
				kind = map[string]PropKind{"get": PropGet, "set": PropSet}[t.value]
			case "async":
				if p.tok.nl {
					p.fail(p.tok.pos, "a line break after async in a method")
				}
				async = true
			}
		}
	}
	if p.is("*") {
		p.refuse(p.tok.pos, "L1005", "a generator is not in the language: use a loop with await inside it")
		generator = true
		p.advance()
	}
	keyTok := p.tok
	p.propertyKey(pr)
	switch {
	case p.is("("):
		f := &Function{At: At{keyTok.pos}, Name: pr.Key, Async: async, Generator: generator, Kind: kind}
		if kind == PropInit {
			kind = PropMethod
			f.Kind = PropMethod
		}
		p.functionRest(f)
		pr.Kind, pr.Value = kind, f
	case kind != PropInit || async || generator:
		p.fail(p.tok.pos, "expected \"(\" after the method's name")
	case p.eat(":"):
		pr.Value = p.assign()
	case keyTok.kind == tIdent && pr.Computed == nil && !reserved[keyTok.value]:
		pr.Kind, pr.Value = PropShorthand, &Ident{At: At{keyTok.pos}, Name: keyTok.value}
		if p.eat("=") {
			pr.Default = p.assign()
		}
	default:
		p.fail(p.tok.pos, "expected \":\" after the property's key, found %s", p.describe())
	}
	return pr
}

// propertyKey reads a property's key into pr: a name, a string, a number, or a refused computed
// key.
func (p *parser) propertyKey(pr *Property) {
	t := p.tok
	switch t.kind {
	case tIdent:
		pr.Key = t.value
		p.advance()
	case tString:
		pr.Key, pr.KeyLit = t.value, &Literal{At: At{t.pos}, Kind: LitString, Str: t.value, Raw: t.raw}
		p.advance()
	case tNumber:
		pr.Key, pr.KeyLit = FormatNumber(t.num), &Literal{At: At{t.pos}, Kind: LitNumber, Num: t.num, Raw: t.raw}
		p.advance()
	case tPunct:
		if t.value == "[" {
			p.refuse(t.pos, "L1011", "a computed property key is not in the language: use a literal key, merge, or record[k] = v")
			p.advance()
			pr.Computed = p.assign()
			p.expect("]")
			return
		}
		p.unexpected()
	default:
		p.unexpected()
	}
	if pr.Key == "__proto__" {
		p.refuse(t.pos, "L1028", "the property name __proto__ is not in the language: use another name")
	}
}

// ---- patterns ----

// bindingTarget parses a binding: a name, or an object or array pattern.
func (p *parser) bindingTarget() Pattern {
	defer p.nest()()
	switch {
	case p.is("{"):
		return p.objectPattern()
	case p.is("["):
		return p.arrayPattern()
	}
	return p.name()
}

// bindingElement is a binding with an optional default.
func (p *parser) bindingElement() Pattern {
	target := p.bindingTarget()
	if p.is("=") {
		at := p.tok.pos
		p.advance()
		return &DefaultPattern{At: At{at}, Target: target, Default: p.assign()}
	}
	return target
}

func (p *parser) objectPattern() Pattern {
	op := &ObjectPattern{At: At{p.tok.pos}}
	p.advance()
	for !p.eat("}") {
		if p.is("...") {
			p.advance()
			op.Rest = p.name()
			p.expect("}")
			return op
		}
		keyTok := p.tok
		var pr Property
		p.propertyKey(&pr)
		pp := &PatternProp{At: At{keyTok.pos}, Key: pr.Key, KeyLit: pr.KeyLit, Computed: pr.Computed}
		if p.eat(":") {
			pp.Value = p.bindingElement()
		} else {
			if keyTok.kind != tIdent || pr.Computed != nil || reserved[keyTok.value] {
				p.fail(p.tok.pos, "expected \":\" after the pattern's key")
			}
			var v Pattern = &Ident{At: At{keyTok.pos}, Name: keyTok.value}
			if p.is("=") {
				at := p.tok.pos
				p.advance()
				v = &DefaultPattern{At: At{at}, Target: v, Default: p.assign()}
			}
			pp.Value, pp.Shorthand = v, true
		}
		op.Props = append(op.Props, pp)
		if !p.is("}") {
			p.expect(",")
		}
	}
	return op
}

func (p *parser) arrayPattern() Pattern {
	ap := &ArrayPattern{At: At{p.tok.pos}}
	p.advance()
	for !p.eat("]") {
		if p.is(",") {
			p.refuse(p.tok.pos, "L1012", "an array hole is not in the language: write a name, and leave it unused")
			ap.Elems = append(ap.Elems, nil)
			p.advance()
			continue
		}
		if p.is("...") {
			p.advance()
			ap.Rest = p.bindingTarget()
			p.expect("]")
			return ap
		}
		ap.Elems = append(ap.Elems, p.bindingElement())
		if !p.is("]") {
			p.expect(",")
		}
	}
	return ap
}

// toPattern turns an expression parsed before an = into its assignment target.
func (p *parser) toPattern(x Expr) Pattern {
	switch e := x.(type) {
	case *Ident, *Member:
		return e.(Pattern)
	case *Paren:
		switch e.X.(type) {
		case *Ident, *Member:
			return p.toPattern(e.X)
		}
	case *Assign:
		if e.Op == "=" {
			return &DefaultPattern{At: At{e.P}, Target: e.Target, Default: e.Value}
		}
	case *Array:
		ap := &ArrayPattern{At: At{e.P}}
		for i, el := range e.Elems {
			if s, ok := el.(*Spread); ok {
				if i != len(e.Elems)-1 {
					p.fail(s.P, "a rest element must be last")
				}
				ap.Rest = p.toPattern(s.X)
				break
			}
			if el == nil {
				ap.Elems = append(ap.Elems, nil)
				continue
			}
			ap.Elems = append(ap.Elems, p.toPattern(el))
		}
		return ap
	case *Object:
		op := &ObjectPattern{At: At{e.P}}
		for i, pr := range e.Props {
			switch pr.Kind {
			case PropSpread:
				if i != len(e.Props)-1 {
					p.fail(pr.P, "a rest property must be last")
				}
				op.Rest = p.toPattern(pr.Value)
			case PropShorthand:
				var v Pattern = pr.Value.(*Ident)
				if pr.Default != nil {
					v = &DefaultPattern{At: At{pr.P}, Target: v, Default: pr.Default}
				}
				op.Props = append(op.Props, &PatternProp{At: At{pr.P}, Key: pr.Key, Value: v, Shorthand: true})
			case PropInit:
				op.Props = append(op.Props, &PatternProp{At: At{pr.P}, Key: pr.Key, KeyLit: pr.KeyLit, Computed: pr.Computed, Value: p.toPattern(pr.Value)})
			default:
				p.fail(pr.P, "a method is not an assignment target")
			}
		}
		return op
	}
	p.fail(x.Start(), "this expression cannot be assigned to")
	return nil
}

// simpleTarget is the target of a compound assignment: a name or a member.
func (p *parser) simpleTarget(x Expr) Pattern {
	switch e := x.(type) {
	case *Ident, *Member:
		return e.(Pattern)
	case *Paren:
		return p.simpleTarget(e.X)
	}
	p.fail(x.Start(), "this expression cannot be assigned to")
	return nil
}

// simpleTargetExpr checks an update's operand and returns it.
func (p *parser) simpleTargetExpr(x Expr) Expr {
	p.simpleTarget(x)
	return x
}
