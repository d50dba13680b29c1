package syntax

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Pos is a place in a program's source: a byte offset, and the line and column (both from 1;
// the column counts UTF-16 code units, as a JavaScript engine's does).
type Pos struct {
	Offset, Line, Col int
}

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// tokKind is the kind of a token.
type tokKind int

const (
	tEOF tokKind = iota
	tIdent
	tNumber
	tBigInt
	tString
	tTemplate // a template chunk: Value is the cooked text, tail reports a closing backtick
	tRegex
	tPunct
	tPrivate // #name
)

// token is one token; nl reports a line terminator between it and the token before.
type token struct {
	kind  tokKind
	value string // punctuator or identifier text; a literal's cooked value
	raw   string // a literal's source text
	num   float64
	tail  bool // a template chunk that ends the template
	pos   Pos
	end   int // byte offset after the token
	nl    bool
}

// lexer turns source into tokens on demand. Its state is a value, so the parser can look ahead by
// copying it.
type lexer struct {
	src string
	off int
	// lines are the byte offsets the source's lines start at; shared by every copy.
	lines []int
	// colOff and col memoize the last position computed, so columns along one long line are
	// counted once.
	colOff, col, colLine int
	// prevEnd reports whether the token before may end an expression: a slash after it is a
	// division, not a regular expression.
	prevEnd bool
	err     *Diagnostic
}

func newLexer(src string) lexer {
	lines := []int{0}
	for i := 0; i < len(src); i++ {
		switch {
		case src[i] == '\n':
			lines = append(lines, i+1)
		case src[i] == '\r':
			if i+1 < len(src) && src[i+1] == '\n' {
				i++
			}
			lines = append(lines, i+1)
		case lineSep(src[i:]):
			i += 2
			lines = append(lines, i+1)
		}
	}
	return lexer{src: src, lines: lines}
}

// pos returns the position of byte offset off.
func (lx *lexer) pos(off int) Pos {
	line, _ := slices.BinarySearch(lx.lines, off+1) // the lines starting at or before off
	start, col := lx.lines[line-1], 1
	if lx.colLine == line && lx.colOff >= start && lx.colOff <= off {
		start, col = lx.colOff, lx.col
	}
	for _, r := range lx.src[start:off] {
		col++
		if r > 0xFFFF {
			col++
		}
	}
	lx.colOff, lx.col, lx.colLine = off, col, line
	return Pos{Offset: off, Line: line, Col: col}
}

func (lx *lexer) fail(off int, code, format string, args ...any) token {
	if lx.err == nil {
		lx.err = &Diagnostic{Code: code, Pos: lx.pos(off), Message: fmt.Sprintf(format, args...)}
	}
	lx.off = len(lx.src)
	return token{kind: tEOF, pos: lx.pos(off), end: off}
}

// skip passes whitespace and comments, and reports whether it passed a line terminator.
func (lx *lexer) skip() bool {
	nl := false
	for lx.off < len(lx.src) {
		c := lx.src[lx.off]
		switch {
		case c == '\n':
			lx.newline(lx.off + 1)
			nl = true
		case c == '\r':
			next := lx.off + 1
			if next < len(lx.src) && lx.src[next] == '\n' {
				next++
			}
			lx.newline(next)
			nl = true
			continue
		case c == ' ' || c == '\t' || c == '\v' || c == '\f':
			lx.off++
		case c == '/' && lx.off+1 < len(lx.src) && lx.src[lx.off+1] == '/':
			for lx.off < len(lx.src) && lx.src[lx.off] != '\n' && lx.src[lx.off] != '\r' && !lineSep(lx.src[lx.off:]) {
				lx.off++
			}
		case c == '/' && lx.off+1 < len(lx.src) && lx.src[lx.off+1] == '*':
			end := strings.Index(lx.src[lx.off+2:], "*/")
			if end < 0 {
				lx.fail(lx.off, "L1029", "unterminated comment")
				return nl
			}
			stop := lx.off + 2 + end + 2
			for lx.off < stop {
				if lx.src[lx.off] == '\n' || lineSep(lx.src[lx.off:]) {
					n := 1
					if lx.src[lx.off] != '\n' {
						n = 3
					}
					lx.newline(lx.off + n)
					nl = true
					continue
				}
				lx.off++
			}
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRuneInString(lx.src[lx.off:])
			switch {
			case r == '\u2028' || r == '\u2029':
				lx.newline(lx.off + n)
				nl = true
			case r == '\u00a0' || r == '\ufeff' || unicode.Is(unicode.Zs, r):
				lx.off += n
			default:
				return nl
			}
		default:
			return nl
		}
	}
	return nl
}

func lineSep(s string) bool { return strings.HasPrefix(s, "\u2028") || strings.HasPrefix(s, "\u2029") }

func (lx *lexer) newline(next int) { lx.off = next }

// next returns the next token.
func (lx *lexer) next() token {
	nl := lx.skip()
	t := lx.scan()
	t.nl = nl
	t.end = lx.off
	switch t.kind {
	case tIdent:
		lx.prevEnd = !exprKeyword[t.value]
	case tNumber, tBigInt, tString, tRegex, tPrivate:
		lx.prevEnd = true
	case tTemplate:
		lx.prevEnd = t.tail
	case tPunct:
		lx.prevEnd = t.value == ")" || t.value == "]" || t.value == "}"
	}
	return t
}

// exprKeyword are the words after which an expression starts: a slash after one begins a
// regular expression.
var exprKeyword = map[string]bool{
	"return": true, "typeof": true, "instanceof": true, "in": true, "of": true, "new": true, "delete": true,
	"void": true, "throw": true, "case": true, "do": true, "else": true, "await": true, "yield": true,
}

// punctuators, longest first within each leading character.
var punctuators = []string{
	">>>=", "...", "===", "!==", "**=", "<<=", ">>=", ">>>", "&&=", "||=", "??=",
	"=>", "==", "!=", "<=", ">=", "&&", "||", "??", "?.", "++", "--", "+=", "-=", "*=", "/=", "%=",
	"&=", "|=", "^=", "<<", ">>", "**",
	"{", "}", "(", ")", "[", "]", ";", ",", "<", ">", "+", "-", "*", "/", "%", "&", "|", "^", "!", "~",
	"?", ":", "=", ".", "@",
}

func (lx *lexer) scan() token {
	start := lx.off
	if start >= len(lx.src) {
		return token{kind: tEOF, pos: lx.pos(start)}
	}
	c := lx.src[start]
	switch {
	case isIdentStart(c) || c == '\\' || c >= utf8.RuneSelf:
		name, ok := lx.ident()
		if !ok {
			return lx.fail(start, "L1029", "unexpected character %q", lx.src[start:start+1])
		}
		return token{kind: tIdent, value: name, raw: lx.src[start:lx.off], pos: lx.pos(start)}
	case c == '#':
		lx.off++
		name, ok := lx.ident()
		if !ok {
			return lx.fail(start, "L1029", "unexpected character '#'")
		}
		return token{kind: tPrivate, value: name, pos: lx.pos(start)}
	case c >= '0' && c <= '9' || c == '.' && start+1 < len(lx.src) && lx.src[start+1] >= '0' && lx.src[start+1] <= '9':
		return lx.number()
	case c == '"' || c == '\'':
		return lx.str(c)
	case c == '`':
		lx.off++
		return lx.template(start)
	case c == '/' && !lx.prevEnd:
		return lx.regex()
	}
	if strings.HasPrefix(lx.src[start:], "?.") && start+2 < len(lx.src) && lx.src[start+2] >= '0' && lx.src[start+2] <= '9' {
		lx.off++
		return token{kind: tPunct, value: "?", pos: lx.pos(start)}
	}
	for _, p := range punctuators {
		if strings.HasPrefix(lx.src[start:], p) {
			lx.off += len(p)
			return token{kind: tPunct, value: p, pos: lx.pos(start)}
		}
	}
	return lx.fail(start, "L1029", "unexpected character %q", lx.src[start:start+1])
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$'
}

func isIdentPart(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// ident reads an identifier name, escapes resolved.
func (lx *lexer) ident() (string, bool) {
	var b strings.Builder
	first := true
	for lx.off < len(lx.src) {
		c := lx.src[lx.off]
		switch {
		case c < utf8.RuneSelf && (isIdentPart(c) && (!first || !(c >= '0' && c <= '9'))):
			b.WriteByte(c)
			lx.off++
		case c == '\\':
			r, ok := lx.unicodeEscape()
			if !ok || !(unicode.IsLetter(r) || r == '_' || r == '$' || !first && (unicode.IsDigit(r) || unicode.Is(unicode.Mn, r))) {
				return "", false
			}
			b.WriteRune(r)
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRuneInString(lx.src[lx.off:])
			if !(unicode.IsLetter(r) || !first && (unicode.IsDigit(r) || unicode.In(r, unicode.Mn, unicode.Mc, unicode.Pc) || r == '\u200c' || r == '\u200d')) {
				if first {
					return "", false
				}
				return b.String(), true
			}
			b.WriteRune(r)
			lx.off += n
		default:
			return b.String(), !first
		}
		first = false
	}
	return b.String(), !first
}

// unicodeEscape reads \uXXXX or \u{X...} at lx.off.
func (lx *lexer) unicodeEscape() (rune, bool) {
	s := lx.src[lx.off:]
	if !strings.HasPrefix(s, `\u`) {
		return 0, false
	}
	if strings.HasPrefix(s, `\u{`) {
		end := strings.IndexByte(s, '}')
		if end < 4 {
			return 0, false
		}
		v, err := strconv.ParseUint(s[3:end], 16, 32)
		if err != nil || v > 0x10FFFF {
			return 0, false
		}
		lx.off += end + 1
		return rune(v), true
	}
	if len(s) < 6 {
		return 0, false
	}
	v, err := strconv.ParseUint(s[2:6], 16, 32)
	if err != nil {
		return 0, false
	}
	lx.off += 6
	return rune(v), true
}

func (lx *lexer) number() token {
	start := lx.off
	s := lx.src
	isDigit := func(c byte, base int) bool {
		switch base {
		case 16:
			return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
		case 8:
			return c >= '0' && c <= '7'
		case 2:
			return c == '0' || c == '1'
		}
		return c >= '0' && c <= '9'
	}
	digits := func(base int) {
		for lx.off < len(s) && (isDigit(s[lx.off], base) || s[lx.off] == '_' && lx.off+1 < len(s) && isDigit(s[lx.off+1], base)) {
			lx.off++
		}
	}
	base := 10
	if s[lx.off] == '0' && lx.off+1 < len(s) && strings.ContainsRune("xXoObB", rune(s[lx.off+1])) {
		base = map[byte]int{'x': 16, 'X': 16, 'o': 8, 'O': 8, 'b': 2, 'B': 2}[s[lx.off+1]]
		lx.off += 2
		digits(base)
	} else {
		digits(10)
		if lx.off < len(s) && s[lx.off] == '.' {
			lx.off++
			digits(10)
		}
		if lx.off < len(s) && (s[lx.off] == 'e' || s[lx.off] == 'E') {
			lx.off++
			if lx.off < len(s) && (s[lx.off] == '+' || s[lx.off] == '-') {
				lx.off++
			}
			digits(10)
		}
	}
	raw := s[start:lx.off]
	if lx.off < len(s) && s[lx.off] == 'n' {
		lx.off++
		return token{kind: tBigInt, raw: s[start:lx.off], pos: lx.pos(start)}
	}
	if lx.off < len(s) && (isIdentStart(s[lx.off]) || s[lx.off] >= '0' && s[lx.off] <= '9') {
		return lx.fail(lx.off, "L1029", "an identifier starts right after the number %s", raw)
	}
	clean := strings.ReplaceAll(raw, "_", "")
	var v float64
	if base != 10 {
		u, err := strconv.ParseUint(clean[2:], base, 64)
		if err != nil {
			f, ok := parseBig(clean[2:], base)
			if !ok {
				return lx.fail(start, "L1029", "malformed number %s", raw)
			}
			v = f
		} else {
			v = float64(u)
		}
	} else {
		if len(clean) > 1 && clean[0] == '0' && clean[1] >= '0' && clean[1] <= '9' {
			return lx.fail(start, "L1029", "legacy octal number %s (a module is strict)", raw)
		}
		f, err := strconv.ParseFloat(clean, 64)
		if err != nil && !strings.Contains(err.Error(), "range") {
			return lx.fail(start, "L1029", "malformed number %s", raw)
		}
		v = f
	}
	return token{kind: tNumber, num: v, raw: raw, pos: lx.pos(start)}
}

// parseBig reads digits of base too large for a uint64.
func parseBig(digits string, base int) (float64, bool) {
	v := 0.0
	for _, c := range digits {
		d, err := strconv.ParseUint(string(c), base, 8)
		if err != nil {
			return 0, false
		}
		v = v*float64(base) + float64(d)
	}
	return v, true
}

func (lx *lexer) str(q byte) token {
	start := lx.off
	lx.off++
	var b strings.Builder
	for {
		if lx.off >= len(lx.src) {
			return lx.fail(start, "L1029", "unterminated string literal")
		}
		c := lx.src[lx.off]
		switch {
		case c == q:
			lx.off++
			return token{kind: tString, value: b.String(), raw: lx.src[start:lx.off], pos: lx.pos(start)}
		case c == '\n' || c == '\r':
			return lx.fail(start, "L1029", "unterminated string literal")
		case c == '\\':
			if !lx.escape(&b, false) {
				return lx.fail(lx.off, "L1029", "malformed escape in a string literal")
			}
		default:
			b.WriteByte(c)
			lx.off++
		}
	}
}

// escape reads one escape sequence at lx.off into b; in a template, a line continuation keeps
// its lines.
func (lx *lexer) escape(b *strings.Builder, template bool) bool {
	s := lx.src
	if lx.off+1 >= len(s) {
		return false
	}
	c := s[lx.off+1]
	simple := map[byte]string{'n': "\n", 't': "\t", 'r': "\r", 'b': "\b", 'f': "\f", 'v': "\v", '0': "\x00"}
	switch {
	case c == '0' && lx.off+2 < len(s) && s[lx.off+2] >= '0' && s[lx.off+2] <= '9':
		return false // a legacy octal escape: refused in strict code
	case simple[c] != "":
		b.WriteString(simple[c])
		lx.off += 2
	case c >= '1' && c <= '9':
		return false
	case c == 'x':
		if lx.off+4 > len(s) {
			return false
		}
		v, err := strconv.ParseUint(s[lx.off+2:lx.off+4], 16, 8)
		if err != nil {
			return false
		}
		b.WriteRune(rune(v))
		lx.off += 4
	case c == 'u':
		save := lx.off
		r, ok := lx.unicodeEscape()
		if !ok {
			lx.off = save
			return false
		}
		b.WriteRune(r) // a lone surrogate becomes U+FFFD: a Go string holds UTF-8
	case c == '\r':
		lx.off += 2
		if lx.off < len(s) && s[lx.off] == '\n' {
			lx.off++
		}
	case c == '\n':
		lx.off += 2
	default:
		r, n := utf8.DecodeRuneInString(s[lx.off+1:])
		if r == '\u2028' || r == '\u2029' {
			lx.off += 1 + n
			return true
		}
		b.WriteRune(r)
		lx.off += 1 + n
	}
	return true
}

// template reads a template chunk from lx.off (after a backtick or a closing brace of a
// substitution) up to the next substitution or the closing backtick.
func (lx *lexer) template(start int) token {
	var b strings.Builder
	chunk := lx.off
	for {
		if lx.off >= len(lx.src) {
			return lx.fail(start, "L1029", "unterminated template literal")
		}
		c := lx.src[lx.off]
		switch {
		case c == '`':
			raw := lx.src[chunk:lx.off]
			lx.off++
			return token{kind: tTemplate, value: b.String(), raw: raw, tail: true, pos: lx.pos(start)}
		case c == '$' && lx.off+1 < len(lx.src) && lx.src[lx.off+1] == '{':
			raw := lx.src[chunk:lx.off]
			lx.off += 2
			return token{kind: tTemplate, value: b.String(), raw: raw, pos: lx.pos(start)}
		case c == '\\':
			if !lx.escape(&b, true) {
				return lx.fail(lx.off, "L1029", "malformed escape in a template literal")
			}
		case c == '\n':
			b.WriteByte(c)
			lx.newline(lx.off + 1)
		case c == '\r':
			b.WriteByte('\n')
			next := lx.off + 1
			if next < len(lx.src) && lx.src[next] == '\n' {
				next++
			}
			lx.newline(next)
		default:
			b.WriteByte(c)
			lx.off++
		}
	}
}

// continueTemplate reads the chunk after a substitution whose closing brace is at off.
func (lx *lexer) continueTemplate(closing token) token {
	lx.off = closing.pos.Offset + 1
	t := lx.template(closing.pos.Offset)
	t.end = lx.off
	lx.prevEnd = t.tail
	return t
}

func (lx *lexer) regex() token {
	start := lx.off
	lx.off++
	inClass := false
	for {
		if lx.off >= len(lx.src) || lx.src[lx.off] == '\n' || lx.src[lx.off] == '\r' {
			return lx.fail(start, "L1029", "unterminated regular expression")
		}
		c := lx.src[lx.off]
		lx.off++
		switch {
		case c == '\\':
			lx.off++
		case c == '[':
			inClass = true
		case c == ']':
			inClass = false
		case c == '/' && !inClass:
			for lx.off < len(lx.src) && isIdentPart(lx.src[lx.off]) {
				lx.off++
			}
			return token{kind: tRegex, raw: lx.src[start:lx.off], pos: lx.pos(start)}
		}
	}
}
