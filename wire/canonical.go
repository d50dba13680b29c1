package wire

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// canonMaxDepth bounds array/object nesting so that hostile input cannot exhaust
// the stack of the recursive parser.
const canonMaxDepth = 1000

// ErrNotCanonicalizable is the sentinel matched by errors.Is for every
// *CanonicalError: the input is not a single I-JSON (RFC 7493) value and so has
// no RFC 8785 canonical form.
var ErrNotCanonicalizable = errors.New("not I-JSON")

// CanonicalError describes why input could not be canonicalised. Offset is
// the byte offset in the input where the problem was found and Msg names the
// rule that was broken. errors.Is(err, ErrNotCanonicalizable) reports true
// for every *CanonicalError.
type CanonicalError struct {
	Offset int
	Msg    string
}

// Error returns the message prefixed with "canonical json" and the offset.
func (e *CanonicalError) Error() string {
	return fmt.Sprintf("canonical json: at offset %d: %s", e.Offset, e.Msg)
}

// Is reports whether target is ErrNotCanonicalizable, so callers can branch
// on the class of failure without string matching.
func (e *CanonicalError) Is(target error) bool {
	return target == ErrNotCanonicalizable
}

// Canonicalize returns the RFC 8785 canonical form of the JSON text in.
//
// in must hold exactly one JSON value (RFC 8259) that is also I-JSON
// (RFC 7493): valid UTF-8, no lone surrogate escapes, no duplicate object
// keys, numbers representable as finite IEEE 754 doubles, and nesting no
// deeper than 1000. On any violation it returns nil and a *CanonicalError
// (which matches ErrNotCanonicalizable).
func Canonicalize(in []byte) ([]byte, error) {
	p := canonParserPool.Get().(*canonParser)
	defer p.release()
	p.in = in
	p.out = make([]byte, 0, len(in))
	if err := p.document(); err != nil {
		return nil, err
	}
	return p.out, nil
}

// Digest returns "sha256:" followed by the lowercase hex SHA-256 of the
// RFC 8785 canonical form of in. On invalid input it returns "" and the
// *CanonicalError from Canonicalize.
func Digest(in []byte) (string, error) {
	c, err := Canonicalize(in)
	if err != nil {
		return "", err
	}
	return sha256Digest(c), nil
}

// canonMember records one object member while its object is being parsed: the
// decoded key lives in canonParser.keys[k0:k1] and the canonical value bytes in
// canonParser.out[v0:v1]. Indices rather than slices keep them valid when the
// buffers grow.
type canonMember struct {
	k0, k1 int
	v0, v1 int
}

// canonParser is a strict single-pass parser that writes canonical output as it
// goes. Objects are the only construct that cannot be emitted in input order
// (RFC 8785 §3.2.3), so their members' values are written to out first and
// then rearranged in sorted key order once the closing brace is seen.
type canonParser struct {
	in  []byte
	i   int
	out []byte

	members []canonMember // stack of members of all open objects
	keys    []byte        // decoded keys of all open objects
	tmp     []byte        // decoded string value being converted
	scratch []byte        // copy of an object's value bytes while it is reordered
}

var canonParserPool = sync.Pool{New: func() any { return new(canonParser) }}

// canonMaxPooled stops a single huge input from pinning large buffers in the pool.
const canonMaxPooled = 64 << 10

func (p *canonParser) release() {
	p.in, p.out = nil, nil
	p.i = 0
	if cap(p.members) > canonMaxPooled/8 || cap(p.keys) > canonMaxPooled ||
		cap(p.tmp) > canonMaxPooled || cap(p.scratch) > canonMaxPooled {
		return
	}
	p.members = p.members[:0]
	p.keys = p.keys[:0]
	p.tmp = p.tmp[:0]
	p.scratch = p.scratch[:0]
	canonParserPool.Put(p)
}

func (p *canonParser) errorf(off int, format string, args ...any) error {
	return &CanonicalError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// skipWS skips the four insignificant whitespace bytes of RFC 8259 §2.
func (p *canonParser) skipWS() {
	for p.i < len(p.in) {
		switch p.in[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *canonParser) document() error {
	p.skipWS()
	if p.i >= len(p.in) {
		return p.errorf(p.i, "empty input")
	}
	if err := p.value(0); err != nil {
		return err
	}
	p.skipWS()
	if p.i < len(p.in) {
		return p.errorf(p.i, "trailing data after JSON value")
	}
	return nil
}

// value parses one JSON value at p.i (whitespace already skipped) and
// appends its canonical form to p.out. depth counts enclosing containers.
func (p *canonParser) value(depth int) error {
	if p.i >= len(p.in) {
		return p.errorf(p.i, "unexpected end of input, expected a value")
	}
	switch c := p.in[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		var err error
		if p.tmp, err = p.decodeString(p.tmp[:0]); err != nil {
			return err
		}
		p.out = appendCanonicalString(p.out, p.tmp)
		return nil
	case c == '-' || c == '+' || c == '.' || ('0' <= c && c <= '9'):
		return p.number()
	case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		return p.literal()
	default:
		return p.unexpected("expected a value")
	}
}

// unexpected reports the character at p.i, which is valid in no position.
func (p *canonParser) unexpected(what string) error {
	if p.i >= len(p.in) {
		return p.errorf(p.i, "unexpected end of input, %s", what)
	}
	c := p.in[p.i]
	if c < utf8.RuneSelf {
		return p.errorf(p.i, "unexpected character %q, %s", rune(c), what)
	}
	r, size := utf8.DecodeRune(p.in[p.i:])
	if r == utf8.RuneError && size <= 1 {
		return p.errorf(p.i, "invalid UTF-8")
	}
	return p.errorf(p.i, "unexpected character %U, %s", r, what)
}

// token returns the end of the run of bytes starting at p.i that could
// belong to a number or literal, so that errors can quote the whole token
// (e.g. "01" or "0x10") instead of a confusing fragment.
func (p *canonParser) token() int {
	j := p.i
	for j < len(p.in) {
		c := p.in[j]
		if '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' ||
			c == '+' || c == '-' || c == '.' {
			j++
			continue
		}
		break
	}
	return j
}

// canonShortToken truncates a token for an error message so that a megabyte of
// digits does not end up in a log line.
func canonShortToken(tok []byte) string {
	const limit = 40
	if len(tok) > limit {
		return string(tok[:limit]) + "..."
	}
	return string(tok)
}

// canonQuoteToken is canonShortToken in double quotes, for tokens that may be garbage.
func canonQuoteToken(tok []byte) string {
	return strconv.Quote(canonShortToken(tok))
}

func (p *canonParser) literal() error {
	start := p.i
	end := p.token()
	tok := p.in[start:end]
	switch string(tok) {
	case "null", "true", "false":
		// RFC 8785 §3.2.2.1: literals are emitted as is.
		p.out = append(p.out, tok...)
		p.i = end
		return nil
	case "NaN", "Infinity":
		return p.errorf(start, "invalid number %s", canonQuoteToken(tok))
	}
	return p.errorf(start, "invalid literal %s", canonQuoteToken(tok))
}

// validJSONNumber reports whether tok matches the RFC 8259 §6 number grammar:
// -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
func validJSONNumber(tok []byte) bool {
	i := 0
	if i < len(tok) && tok[i] == '-' {
		i++
	}
	switch {
	case i < len(tok) && tok[i] == '0':
		i++
	case i < len(tok) && '1' <= tok[i] && tok[i] <= '9':
		for i < len(tok) && '0' <= tok[i] && tok[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(tok) && tok[i] == '.' {
		i++
		d := i
		for i < len(tok) && '0' <= tok[i] && tok[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(tok) && (tok[i] == 'e' || tok[i] == 'E') {
		i++
		if i < len(tok) && (tok[i] == '+' || tok[i] == '-') {
			i++
		}
		d := i
		for i < len(tok) && '0' <= tok[i] && tok[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	return i == len(tok)
}

func (p *canonParser) number() error {
	start := p.i
	end := p.token()
	tok := p.in[start:end]
	if !validJSONNumber(tok) {
		return p.errorf(start, "invalid number %s", canonQuoteToken(tok))
	}
	// The token is ASCII and grammatical, so the only possible ParseFloat
	// error is ErrRange. Go reports it only for overflow to ±Inf; underflow
	// rounds to (signed) zero without error, which I-JSON permits.
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return p.errorf(start, "number %s overflows float64", canonShortToken(tok))
	}
	p.out = appendCanonicalNumber(p.out, f)
	p.i = end
	return nil
}

func (p *canonParser) array(depth int) error {
	open := p.i
	if depth > canonMaxDepth {
		return p.errorf(open, "nesting deeper than %d", canonMaxDepth)
	}
	p.i++ // '['
	p.out = append(p.out, '[')
	p.skipWS()
	if p.i < len(p.in) && p.in[p.i] == ']' {
		p.i++
		p.out = append(p.out, ']')
		return nil
	}
	for {
		p.skipWS()
		if p.i >= len(p.in) {
			return p.errorf(p.i, "unterminated array")
		}
		if err := p.value(depth); err != nil {
			return err
		}
		p.skipWS()
		if p.i >= len(p.in) {
			return p.errorf(p.i, "unterminated array")
		}
		switch p.in[p.i] {
		case ',':
			p.i++
			p.out = append(p.out, ',')
		case ']':
			p.i++
			p.out = append(p.out, ']')
			return nil
		default:
			return p.unexpected("expected ',' or ']' in array")
		}
	}
}

// canonDupMapThreshold is the member count above which duplicate detection
// switches from a linear scan to a map, keeping huge objects O(n).
const canonDupMapThreshold = 16

func (p *canonParser) object(depth int) error {
	open := p.i
	if depth > canonMaxDepth {
		return p.errorf(open, "nesting deeper than %d", canonMaxDepth)
	}
	p.i++ // '{'
	p.skipWS()
	if p.i < len(p.in) && p.in[p.i] == '}' {
		p.i++
		p.out = append(p.out, '{', '}')
		return nil
	}
	objStart := len(p.out)
	base := len(p.members)
	keyBase := len(p.keys)
	defer func() {
		p.members = p.members[:base]
		p.keys = p.keys[:keyBase]
	}()
	var seen map[string]struct{}
	for {
		p.skipWS()
		if p.i >= len(p.in) {
			return p.errorf(p.i, "unterminated object")
		}
		if p.in[p.i] != '"' {
			return p.unexpected("expected string for object key")
		}
		keyOff := p.i
		k0 := len(p.keys)
		var err error
		if p.keys, err = p.decodeString(p.keys); err != nil {
			return err
		}
		k1 := len(p.keys)
		// I-JSON (RFC 7493 §2.3) forbids duplicate names; comparing the
		// decoded keys catches duplicates that differ only in escaping.
		key := p.keys[k0:k1]
		prev := p.members[base:]
		if seen == nil && len(prev) < canonDupMapThreshold {
			for _, m := range prev {
				if string(p.keys[m.k0:m.k1]) == string(key) {
					return p.errorf(keyOff, "duplicate key %s", strconv.Quote(string(key)))
				}
			}
		} else {
			if seen == nil {
				seen = make(map[string]struct{}, 2*len(prev))
				for _, m := range prev {
					seen[string(p.keys[m.k0:m.k1])] = struct{}{}
				}
			}
			if _, dup := seen[string(key)]; dup {
				return p.errorf(keyOff, "duplicate key %s", strconv.Quote(string(key)))
			}
			seen[string(key)] = struct{}{}
		}
		p.skipWS()
		if p.i >= len(p.in) {
			return p.errorf(p.i, "unterminated object")
		}
		if p.in[p.i] != ':' {
			return p.unexpected("expected ':' after object key")
		}
		p.i++
		p.skipWS()
		if p.i >= len(p.in) {
			return p.errorf(p.i, "unterminated object")
		}
		v0 := len(p.out)
		if err := p.value(depth); err != nil {
			return err
		}
		p.members = append(p.members, canonMember{k0: k0, k1: k1, v0: v0, v1: len(p.out)})
		p.skipWS()
		if p.i >= len(p.in) {
			return p.errorf(p.i, "unterminated object")
		}
		switch p.in[p.i] {
		case ',':
			p.i++
			continue
		case '}':
			p.i++
		default:
			return p.unexpected("expected ',' or '}' in object")
		}
		break
	}

	// RFC 8785 §3.2.3: members are ordered by key compared as arrays of
	// UTF-16 code units; values keep their own (already canonical) form.
	ms := p.members[base:]
	keys := p.keys
	slices.SortFunc(ms, func(a, b canonMember) int {
		return compareUTF16(keys[a.k0:a.k1], keys[b.k0:b.k1])
	})
	p.scratch = append(p.scratch[:0], p.out[objStart:]...)
	p.out = append(p.out[:objStart], '{')
	for j, m := range ms {
		if j > 0 {
			p.out = append(p.out, ',')
		}
		p.out = appendCanonicalString(p.out, keys[m.k0:m.k1])
		p.out = append(p.out, ':')
		p.out = append(p.out, p.scratch[m.v0-objStart:m.v1-objStart]...)
	}
	p.out = append(p.out, '}')
	return nil
}

// decodeString decodes the JSON string starting at the opening quote at p.i,
// appends its UTF-8 contents to dst and leaves p.i after the closing quote.
// It enforces I-JSON: input must be valid UTF-8 and \u escapes must not
// produce lone surrogates (RFC 7493 §2.1).
func (p *canonParser) decodeString(dst []byte) ([]byte, error) {
	in := p.in
	i := p.i + 1
	for {
		// Copy the longest run of bytes that need no interpretation.
		j := i
		for j < len(in) {
			c := in[j]
			if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
				break
			}
			j++
		}
		dst = append(dst, in[i:j]...)
		i = j
		if i >= len(in) {
			return dst, p.errorf(i, "unterminated string")
		}
		c := in[i]
		switch {
		case c == '"':
			p.i = i + 1
			return dst, nil
		case c < 0x20:
			return dst, p.errorf(i, "unescaped control character %U in string", rune(c))
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size <= 1 {
				return dst, p.errorf(i, "invalid UTF-8")
			}
			dst = append(dst, in[i:i+size]...)
			i += size
		default: // backslash
			if i+1 >= len(in) {
				return dst, p.errorf(len(in), "unterminated string")
			}
			esc := in[i+1]
			switch esc {
			case '"', '\\', '/':
				dst = append(dst, esc)
				i += 2
			case 'b':
				dst = append(dst, '\b')
				i += 2
			case 'f':
				dst = append(dst, '\f')
				i += 2
			case 'n':
				dst = append(dst, '\n')
				i += 2
			case 'r':
				dst = append(dst, '\r')
				i += 2
			case 't':
				dst = append(dst, '\t')
				i += 2
			case 'u':
				r, err := p.hex4(i)
				if err != nil {
					return dst, err
				}
				switch {
				case 0xDC00 <= r && r <= 0xDFFF:
					return dst, p.errorf(i, "lone surrogate \\u%04x in string", r)
				case 0xD800 <= r && r <= 0xDBFF:
					// A high surrogate must be followed immediately by an
					// escaped low surrogate; together they are one code point.
					if i+7 < len(in) && in[i+6] == '\\' && in[i+7] == 'u' {
						lo, err := p.hex4(i + 6)
						if err != nil {
							return dst, err
						}
						if 0xDC00 <= lo && lo <= 0xDFFF {
							r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
							dst = utf8.AppendRune(dst, r)
							i += 12
							continue
						}
					}
					return dst, p.errorf(i, "lone surrogate \\u%04x in string", r)
				}
				dst = utf8.AppendRune(dst, r)
				i += 6
			default:
				if esc >= utf8.RuneSelf {
					return dst, p.errorf(i, "invalid escape in string")
				}
				return dst, p.errorf(i, "invalid escape \\%c in string", esc)
			}
		}
	}
}

// hex4 decodes the four hex digits of the \u escape whose backslash is at
// in[i].
func (p *canonParser) hex4(i int) (rune, error) {
	if i+6 > len(p.in) {
		return 0, p.errorf(i, "truncated \\u escape in string")
	}
	var r rune
	for _, c := range p.in[i+2 : i+6] {
		var v byte
		switch {
		case '0' <= c && c <= '9':
			v = c - '0'
		case 'a' <= c && c <= 'f':
			v = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, p.errorf(i, "invalid \\u escape in string")
		}
		r = r<<4 | rune(v)
	}
	return r, nil
}

// appendCanonicalString appends s (valid UTF-8) as a JSON string in the form required
// by RFC 8785 §3.2.2.2: only '"', '\\' and C0 controls are escaped, the
// five controls with short forms use them, the rest use lowercase \u00xx,
// and everything else (including '/', DEL and U+2028) is emitted raw.
func appendCanonicalString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = appendEscaped(append(dst, s[start:i]...), c)
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// compareUTF16 compares two valid UTF-8 strings as sequences of UTF-16 code
// units (RFC 8785 §3.2.3). UTF-8 byte order equals code point order, which
// differs from UTF-16 order only when a supplementary character (encoded as
// surrogates 0xD800-0xDBFF first) meets a BMP character in U+E000-U+FFFF, so
// only the first differing code point needs converting.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	// The bytes before i are equal, so both strings have a code point
	// boundary at the same place.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRune(a[i:])
	rb, _ := utf8.DecodeRune(b[i:])
	ua, ub := firstUTF16Unit(ra), firstUTF16Unit(rb)
	if ua != ub {
		return int(ua) - int(ub)
	}
	// Same high surrogate: the low surrogates order like the code points.
	return int(ra) - int(rb)
}

func firstUTF16Unit(r rune) rune {
	if r >= 0x10000 {
		return 0xD800 + (r-0x10000)>>10
	}
	return r
}

// appendCanonicalNumber appends f in the form of ECMAScript Number.prototype.toString,
// as RFC 8785 §3.2.2.3 requires. f must be finite; the parser guarantees it.
func appendCanonicalNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0') // -0 serialises as 0.
	}
	// Fast path: integers below 2^53 are exact and print with no exponent.
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return strconv.AppendInt(dst, int64(f), 10)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		panic("wire: appendCanonicalNumber called with non-finite value")
	}
	// Go's shortest round-trip formatting yields the same digits as the
	// ECMAScript algorithm (the shortest, closest to f); only the layout
	// differs, so reuse the digits and exponent from the 'e' form.
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	if e[0] == '-' {
		dst = append(dst, '-')
		e = e[1:]
	}
	var dbuf [24]byte
	digits := append(dbuf[:0], e[0])
	j := 1
	if e[j] == '.' {
		j++
		for e[j] != 'e' {
			digits = append(digits, e[j])
			j++
		}
	}
	j++ // 'e'
	expNeg := e[j] == '-'
	j++ // sign, always present
	exp := 0
	for ; j < len(e); j++ {
		exp = exp*10 + int(e[j]-'0')
	}
	if expNeg {
		exp = -exp
	}
	k := len(digits)
	n := exp + 1 // position of the decimal point relative to the digits
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		} else {
			dst = append(dst, '-')
		}
		x := n - 1
		if x < 0 {
			x = -x
		}
		dst = strconv.AppendInt(dst, int64(x), 10)
	}
	return dst
}
