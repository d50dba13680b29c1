package syntax

// The syntax tree of a program. Every node records where it starts. Constructs the language
// refuses are parsed into nodes of their own where the parser can go on past them, so one check
// reports every refusal (the validator collects every error before reporting).

// Node is any node of the tree.
type Node interface{ Start() Pos }

// Stmt is a statement.
type Stmt interface {
	Node
	stmt()
}

// Expr is an expression.
type Expr interface {
	Node
	expr()
}

// Pattern is a binding or assignment target: *Ident, *ObjectPattern, *ArrayPattern,
// *DefaultPattern, or, as an assignment target, *Member.
type Pattern interface {
	Node
	pattern()
}

// At is the start of a node; embedded in every node.
type At struct{ P Pos }

// Start returns where the node starts.
func (a At) Start() Pos { return a.P }

// Program is a whole program.
type Program struct {
	At
	Body []Stmt
}

// Statements.
type (
	// ExprStmt is an expression statement.
	ExprStmt struct {
		At
		X Expr
	}
	// VarDecl is a const, let or (refused) var declaration.
	VarDecl struct {
		At
		Kind  string // "const", "let" or "var"
		Decls []*Declarator
	}
	// Declarator is one binding of a declaration.
	Declarator struct {
		At
		Target Pattern
		Init   Expr // nil when absent
	}
	// FuncDecl is a function declaration.
	FuncDecl struct {
		At
		Func *Function
	}
	// Block is a braced block.
	Block struct {
		At
		Body []Stmt
	}
	// If is an if statement; Else is nil when absent.
	If struct {
		At
		Test       Expr
		Then, Else Stmt
	}
	// While is a while loop; DoWhile marks the refused do...while form.
	While struct {
		At
		Test    Expr
		Body    Stmt
		DoWhile bool
	}
	// For is a C-style for loop; Init is a *VarDecl, an Expr statement's expression, or nil.
	For struct {
		At
		Init   Node
		Test   Expr
		Update Expr
		Body   Stmt
	}
	// ForOf is a for...of loop, or (In) the refused for...in. Kind is the declaration keyword,
	// "" when Target is an existing binding or member.
	ForOf struct {
		At
		Kind   string
		Target Pattern
		Iter   Expr
		Body   Stmt
		In     bool
		Await  bool
	}
	// Return is a return statement; Arg is nil for a bare return.
	Return struct {
		At
		Arg Expr
	}
	// Branch is break or continue; Label is set for the refused labelled form.
	Branch struct {
		At
		Continue bool
		Label    string
	}
	// Throw is a throw statement.
	Throw struct {
		At
		Arg Expr
	}
	// Try is try/catch/finally; Param is nil for a catch without one.
	Try struct {
		At
		Body    *Block
		Param   Pattern
		Catch   *Block
		Finally *Block
	}
	// Switch is a switch statement.
	Switch struct {
		At
		Disc  Expr
		Cases []*Case
	}
	// Case is one case of a switch; Test is nil for default.
	Case struct {
		At
		Test Expr
		Body []Stmt
	}
	// Empty is an empty statement.
	Empty struct{ At }
	// Refused is a statement the language refuses and the parser skipped (class, with, import,
	// export, debugger, a label), already reported.
	Refused struct {
		At
		What string
		Body Stmt // a labelled statement's body, a with statement's body; nil otherwise
	}
)

// Expressions.
type (
	// Ident is an identifier.
	Ident struct {
		At
		Name string
	}
	// Literal is null, a boolean, a number or a string (and, refused, a regular expression or a
	// bigint).
	Literal struct {
		At
		Kind LitKind
		Bool bool
		Num  float64
		Str  string
		Raw  string
	}
	// Template is a template literal: Quasis has one more element than Exprs.
	Template struct {
		At
		Quasis []string // the cooked text of each chunk
		Raws   []string // the source text of each chunk, line breaks as \n
		Exprs  []Expr
		Tag    Expr // the refused tagged form
	}
	// Array is an array literal; a nil element is a (refused) hole.
	Array struct {
		At
		Elems []Expr
	}
	// Object is an object literal.
	Object struct {
		At
		Props []*Property
	}
	// Property is one property of an object literal.
	Property struct {
		At
		Kind     PropKind
		Key      string   // a literal key's name
		KeyLit   *Literal // a string or number key as written; nil for a name
		Computed Expr     // the (refused) computed key
		Value    Expr     // the value; a method's *Function; a spread's operand
		// Default is a shorthand's "= value", which only a pattern may carry ({ a = 1 } = r).
		Default Expr
	}
	// Spread is ...X in an array literal or a call's arguments.
	Spread struct {
		At
		X Expr
	}
	// Member is X.Name or X[Index]; Optional marks ?. at this link.
	Member struct {
		At
		X        Expr
		Name     string
		Index    Expr
		Optional bool
	}
	// Call is a call; New marks the refused new form.
	Call struct {
		At
		Callee   Expr
		Args     []Expr
		Optional bool
		New      bool
	}
	// Chain wraps an optional chain: a ?. inside it short-circuits the whole chain to undefined.
	Chain struct {
		At
		X Expr
	}
	// Unary is a prefix operator: ! - + ~ typeof (and the refused void and delete).
	Unary struct {
		At
		Op string
		X  Expr
	}
	// Update is ++ or --.
	Update struct {
		At
		Op     string
		Prefix bool
		X      Expr
	}
	// Binary is a binary or logical operator.
	Binary struct {
		At
		Op   string
		L, R Expr
	}
	// Cond is a ? b : c.
	Cond struct {
		At
		Test, Then, Else Expr
	}
	// Assign is an assignment of any operator; Target is a pattern.
	Assign struct {
		At
		Op     string
		Target Pattern
		Value  Expr
	}
	// Await is await X.
	Await struct {
		At
		X Expr
	}
	// Sequence is the refused comma operator.
	Sequence struct {
		At
		List []Expr
	}
	// Keyword is a refused expression keyword: this, super, new.target, import.meta, yield.
	Keyword struct {
		At
		Word string
		X    Expr // yield's operand
	}
	// Paren is a parenthesized expression, kept so a pattern is not taken from one.
	Paren struct {
		At
		X Expr
	}
)

// Function is a function declaration or expression, or an arrow function.
type Function struct {
	At
	Name      string // "" when anonymous
	Params    []Pattern
	Rest      Pattern
	Body      *Block // nil for a concise arrow body
	Expr      Expr   // a concise arrow body
	Async     bool
	Arrow     bool
	Generator bool
	Kind      PropKind // a method's kind inside an object literal; PropInit otherwise
}

// Patterns.
type (
	// ObjectPattern is { a, b: c, ...rest }.
	ObjectPattern struct {
		At
		Props []*PatternProp
		Rest  Pattern
	}
	// PatternProp is one property of an object pattern.
	PatternProp struct {
		At
		Key       string
		KeyLit    *Literal // a string or number key as written; nil for a name
		Computed  Expr
		Value     Pattern
		Shorthand bool // { a } or { a = 1 }
	}
	// ArrayPattern is [a, , b, ...rest]; a nil element is a hole.
	ArrayPattern struct {
		At
		Elems []Pattern
		Rest  Pattern
	}
	// DefaultPattern is Target = Default.
	DefaultPattern struct {
		At
		Target  Pattern
		Default Expr
	}
)

// LitKind is a literal's kind.
type LitKind int

// The literal kinds.
const (
	LitNull LitKind = iota
	LitBool
	LitNumber
	LitString
	LitRegex
	LitBigInt
)

// PropKind is an object property's kind.
type PropKind int

// The property kinds.
const (
	PropInit      PropKind = iota // key: value, and the shorthand key
	PropShorthand                 // a shorthand { key }
	PropSpread                    // ...value
	PropMethod                    // key() {}
	PropGet                       // the refused getter
	PropSet                       // the refused setter
)

func (*ExprStmt) stmt() {}
func (*VarDecl) stmt()  {}
func (*FuncDecl) stmt() {}
func (*Block) stmt()    {}
func (*If) stmt()       {}
func (*While) stmt()    {}
func (*For) stmt()      {}
func (*ForOf) stmt()    {}
func (*Return) stmt()   {}
func (*Branch) stmt()   {}
func (*Throw) stmt()    {}
func (*Try) stmt()      {}
func (*Switch) stmt()   {}
func (*Empty) stmt()    {}
func (*Refused) stmt()  {}

func (*Ident) expr()    {}
func (*Literal) expr()  {}
func (*Template) expr() {}
func (*Array) expr()    {}
func (*Object) expr()   {}
func (*Spread) expr()   {}
func (*Member) expr()   {}
func (*Call) expr()     {}
func (*Chain) expr()    {}
func (*Unary) expr()    {}
func (*Update) expr()   {}
func (*Binary) expr()   {}
func (*Cond) expr()     {}
func (*Assign) expr()   {}
func (*Await) expr()    {}
func (*Sequence) expr() {}
func (*Keyword) expr()  {}
func (*Paren) expr()    {}
func (*Function) expr() {}

func (*Ident) pattern()          {}
func (*Member) pattern()         {}
func (*ObjectPattern) pattern()  {}
func (*ArrayPattern) pattern()   {}
func (*DefaultPattern) pattern() {}

// Diagnostic is one refusal: its code, where, and what (the message names the cause and the fix).
type Diagnostic struct {
	Code    string
	Pos     Pos
	Message string
}
