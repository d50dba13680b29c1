package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// canonicalVectors are accepted inputs with their exact canonical output.
// They are shared with the fuzz test as seeds.
var canonicalVectors = []struct {
	name string
	in   string
	want string
}{
	// RFC 8785 §3.2.4: the main example.
	{
		name: "rfc8785 main example",
		in: `{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`,
		want: `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
	},
	// RFC 8785 §3.2.3: sorting by UTF-16 code units.
	{
		name: "rfc8785 sorting example",
		in:   `{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
		want: "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}",
	},
	// Vectors from the TypeScript reference implementation's test suite.
	{
		name: "ts numbers",
		in:   `{"n":[333333333.33333329,1e30,4.5,2e-3,0.000000000000000000000000001,0,-0,10.0,1e21]}`,
		want: `{"n":[333333333.3333333,1e+30,4.5,0.002,1e-27,0,0,10,1e+21]}`,
	},
	{
		name: "ts key order",
		in:   `{"b":2,"a":{"z":1,"é":2,"A":3},"10":true,"1":false}`,
		want: `{"1":false,"10":true,"a":{"A":3,"z":1,"é":2},"b":2}`,
	},
	{
		name: "ts string escapes",
		in:   `{"s":"\u000f\nA\"\\/","l":[null,true,false]}`,
		want: `{"l":[null,true,false],"s":"\u000f\nA\"\\/"}`,
	},
	{
		name: "ts surrogate pair",
		in:   `{"s":"\ud834\udd1e"}`,
		want: `{"s":"𝄞"}`,
	},
	// Scalars at top level.
	{name: "null", in: `null`, want: `null`},
	{name: "true", in: `true`, want: `true`},
	{name: "false", in: `false`, want: `false`},
	{name: "top level string", in: `"x"`, want: `"x"`},
	{name: "zero", in: `0`, want: `0`},
	{name: "negative zero", in: `-0`, want: `0`},
	{name: "negative zero float", in: `-0.0e5`, want: `0`},
	{name: "underflow", in: `1e-400`, want: `0`},
	{name: "negative underflow", in: `-1e-400`, want: `0`},
	{name: "exponent plus", in: `1E+2`, want: `100`},
	{name: "exponent leading zeros", in: `1e007`, want: `10000000`},
	{name: "small exponent", in: `1e-7`, want: `1e-7`},
	{name: "negative small", in: `-1.5e-10`, want: `-1.5e-10`},
	{name: "long integer", in: `123456789012345678901234567890`, want: `1.2345678901234568e+29`},
	{name: "beyond 2^53", in: `9007199254740993`, want: `9007199254740992`},
	{name: "max float", in: `1.7976931348623157e308`, want: `1.7976931348623157e+308`},
	{name: "min subnormal", in: `5e-324`, want: `5e-324`},
	{name: "below 1e21", in: `100000000000000000000`, want: `100000000000000000000`},
	{name: "1e21", in: `1000000000000000000000`, want: `1e+21`},
	// Whitespace and structure.
	{
		name: "all whitespace kinds",
		in:   " \t\r\n{ \"a\" : [ 1 , 2 ] ,\t\"b\"\n:\r{ } } \n",
		want: `{"a":[1,2],"b":{}}`,
	},
	{name: "empty object", in: `{ }`, want: `{}`},
	{name: "empty array", in: `[ ]`, want: `[]`},
	{name: "nested empties", in: `[{},[],{"a":[]}]`, want: `[{},[],{"a":[]}]`},
	{
		name: "nested objects sorted at every level",
		in:   `{"z":{"y":{"b":1,"a":2},"x":[{"d":1,"c":2}]},"a":0}`,
		want: `{"a":0,"z":{"x":[{"c":2,"d":1}],"y":{"a":2,"b":1}}}`,
	},
	{name: "array order kept", in: `[3,1,2,"b","a"]`, want: `[3,1,2,"b","a"]`},
	// Strings (RFC 8785 §3.2.2.2).
	{
		name: "short escapes and controls",
		in:   `"\b\f\n\r\t\u0000\u001F\u0001"`,
		want: `"\b\f\n\r\t\u0000\u001f\u0001"`,
	},
	{
		name: "raw del, u2028, solidus",
		in:   `"\u007f\u2028\u2029\/ /"`,
		want: "\"\x7f\u2028\u2029/ /\"",
	},
	{name: "uppercase hex escape", in: `"\u00E9\u00e9"`, want: `"éé"`},
	{name: "raw non-ascii", in: `"héllo wörld 𝄞 😀"`, want: `"héllo wörld 𝄞 😀"`},
	{name: "noncharacter kept", in: `"\uffff\ufdd0"`, want: "\"\uffff\ufdd0\""},
	{name: "escaped nul in key", in: `{"\u0000":1,"":2}`, want: `{"":2,"\u0000":1}`},
	// Key ordering corner cases.
	{
		name: "utf16 order differs from utf8",
		in:   `{"\ufb33":1,"\ud83d\ude00":2,"\ue000":3}`,
		want: "{\"\U0001F600\":2,\"\ue000\":3,\"\ufb33\":1}",
	},
	{name: "prefix sorts first", in: `{"ab":1,"a":2,"":3}`, want: `{"":3,"a":2,"ab":1}`},
	{
		name: "same high surrogate",
		in:   `{"\ud83d\ude01":1,"\ud83d\ude00":2}`,
		want: "{\"\U0001F600\":2,\"\U0001F601\":1}",
	},
	{name: "escaped key equals raw order", in: `{"\u0062":1,"a":2}`, want: `{"a":2,"b":1}`},
	{
		name: "large object",
		in:   `{"t":20,"s":19,"r":18,"q":17,"p":16,"o":15,"n":14,"m":13,"l":12,"k":11,"j":10,"i":9,"h":8,"g":7,"f":6,"e":5,"d":4,"c":3,"b":2,"a":1}`,
		want: `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"r":18,"s":19,"t":20}`,
	},
}

func TestCanonicalize(t *testing.T) {
	for _, tc := range canonicalVectors {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tc.in))
			if err != nil {
				t.Fatalf("Canonicalize(%q) error: %v", tc.in, err)
			}
			if string(got) != tc.want {
				t.Errorf("Canonicalize(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestCanonicalizeIdempotent checks that canonical output is a fixed point.
func TestCanonicalizeIdempotent(t *testing.T) {
	for _, tc := range canonicalVectors {
		t.Run(tc.name, func(t *testing.T) {
			once, err := Canonicalize([]byte(tc.in))
			if err != nil {
				t.Fatalf("first pass: %v", err)
			}
			twice, err := Canonicalize(once)
			if err != nil {
				t.Fatalf("second pass on %q: %v", once, err)
			}
			if !bytes.Equal(once, twice) {
				t.Errorf("not idempotent:\n once %q\ntwice %q", once, twice)
			}
		})
	}
}

// canonicalErrorVectors are rejected inputs; msg must appear in the error message and
// off, if not -1, is the expected Offset.
var canonicalErrorVectors = []struct {
	name string
	in   string
	msg  string
	off  int
}{
	// Duplicate keys (RFC 7493 §2.3).
	{name: "duplicate key", in: `{"a":1,"a":2}`, msg: `duplicate key "a"`, off: 7},
	{name: "duplicate key by escape", in: `{"a":1,"\u0061":2}`, msg: `duplicate key "a"`, off: 7},
	{name: "duplicate key surrogate pair", in: `{"😀":1,"\ud83d\ude00":2}`, msg: `duplicate key "😀"`, off: 10},
	{name: "duplicate nested key", in: `{"x":{"b":1,"b":2}}`, msg: `duplicate key "b"`, off: 12},
	{
		name: "duplicate key in large object",
		in:   `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"r":18,"c":19}`,
		msg:  `duplicate key "c"`,
		off:  118,
	},
	{
		name: "duplicate key beyond map threshold",
		in:   `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"r":18,"s":19,"r":20}`,
		msg:  `duplicate key "r"`,
		off:  125,
	},
	// Lone surrogates (RFC 7493 §2.1).
	{name: "high surrogate at end", in: `{"s":"\ud800"}`, msg: `lone surrogate \ud800 in string`, off: 6},
	{name: "high then non-low escape", in: `"\ud800\u0041"`, msg: `lone surrogate \ud800 in string`, off: 1},
	{name: "high then high", in: `"\ud800\udbff"`, msg: `lone surrogate \ud800 in string`, off: 1},
	{name: "high then raw char", in: `"\ud800x"`, msg: `lone surrogate \ud800 in string`, off: 1},
	{name: "high then short escape", in: `"\ud800\n"`, msg: `lone surrogate \ud800 in string`, off: 1},
	{name: "low alone", in: `"\udc00"`, msg: `lone surrogate \udc00 in string`, off: 1},
	{name: "low then high", in: `"\udc00\ud800"`, msg: `lone surrogate \udc00 in string`, off: 1},
	{name: "lone surrogate in value", in: `{"s":"\ud800"}`, msg: `lone surrogate`, off: 6},
	{name: "lone surrogate in key", in: `{"\udead":1}`, msg: `lone surrogate \udead in string`, off: 2},
	// Invalid UTF-8.
	{name: "invalid byte in string", in: "\"a\xffb\"", msg: "invalid UTF-8", off: 2},
	{name: "truncated sequence", in: "\"\xc3\"", msg: "invalid UTF-8", off: 1},
	{name: "overlong solidus", in: "\"\xc0\xaf\"", msg: "invalid UTF-8", off: 1},
	{name: "utf-8 encoded surrogate", in: "\"\xed\xa0\x80\"", msg: "invalid UTF-8", off: 1},
	{name: "invalid byte in key", in: "{\"\xfe\":1}", msg: "invalid UTF-8", off: 2},
	{name: "invalid byte outside string", in: "[\xff]", msg: "invalid UTF-8", off: 1},
	// Numbers (RFC 8259 §6 grammar, finite as float64).
	{name: "leading zero", in: `01`, msg: `invalid number "01"`, off: 0},
	{name: "leading zero in array", in: `[1,-01]`, msg: `invalid number "-01"`, off: 3},
	{name: "lone minus", in: `-`, msg: `invalid number "-"`, off: 0},
	{name: "trailing point", in: `1.`, msg: `invalid number "1."`, off: 0},
	{name: "leading point", in: `.5`, msg: `invalid number ".5"`, off: 0},
	{name: "plus sign", in: `+1`, msg: `invalid number "+1"`, off: 0},
	{name: "empty exponent", in: `1e`, msg: `invalid number "1e"`, off: 0},
	{name: "signed empty exponent", in: `1e+`, msg: `invalid number "1e+"`, off: 0},
	{name: "point then exponent", in: `1.e5`, msg: `invalid number "1.e5"`, off: 0},
	{name: "NaN", in: `NaN`, msg: `invalid number "NaN"`, off: 0},
	{name: "Infinity", in: `Infinity`, msg: `invalid number "Infinity"`, off: 0},
	{name: "minus Infinity", in: `-Infinity`, msg: `invalid number "-Infinity"`, off: 0},
	{name: "hex", in: `0x10`, msg: `invalid number "0x10"`, off: 0},
	{name: "overflow", in: `1e400`, msg: `number 1e400 overflows float64`, off: 0},
	{name: "negative overflow", in: `[-1e400]`, msg: `number -1e400 overflows float64`, off: 1},
	{name: "overflow by digits", in: strings.Repeat("9", 400), msg: "overflows float64", off: 0},
	// Syntax.
	{name: "trailing garbage", in: `{} x`, msg: "trailing data after JSON value", off: 3},
	{name: "two values", in: `1 2`, msg: "trailing data after JSON value", off: 2},
	{name: "trailing comment", in: `{}//`, msg: "trailing data after JSON value", off: 2},
	{name: "empty input", in: ``, msg: "empty input", off: 0},
	{name: "whitespace only", in: " \n\t\r", msg: "empty input", off: 4},
	{name: "unterminated string", in: `"abc`, msg: "unterminated string", off: 4},
	{name: "unterminated string after escape", in: `"abc\`, msg: "unterminated string", off: 5},
	{name: "unterminated key", in: `{"a`, msg: "unterminated string", off: 3},
	{name: "unterminated object", in: `{"a":1`, msg: "unterminated object", off: 6},
	{name: "unterminated object after comma", in: `{"a":1,`, msg: "unterminated object", off: 7},
	{name: "unterminated object after colon", in: `{"a":`, msg: "unterminated object", off: 5},
	{name: "open brace only", in: `{`, msg: "unterminated object", off: 1},
	{name: "unterminated array", in: `[1,2`, msg: "unterminated array", off: 4},
	{name: "open bracket only", in: `[`, msg: "unterminated array", off: 1},
	{name: "raw newline in string", in: "\"a\nb\"", msg: "unescaped control character U+000A in string", off: 2},
	{name: "raw nul in string", in: "\"\x00\"", msg: "unescaped control character U+0000 in string", off: 1},
	{name: "invalid escape", in: `"\x41"`, msg: `invalid escape \x in string`, off: 1},
	{name: "invalid unicode escape", in: `"\u12g4"`, msg: `invalid \u escape in string`, off: 1},
	{name: "truncated unicode escape", in: `"\u12"`, msg: `truncated \u escape in string`, off: 1},
	{name: "missing colon", in: `{"a" 1}`, msg: "expected ':' after object key", off: 5},
	{name: "missing comma", in: `[1 2]`, msg: "expected ',' or ']' in array", off: 3},
	{name: "missing member comma", in: `{"a":1 "b":2}`, msg: "expected ',' or '}' in object", off: 7},
	{name: "number key", in: `{1:2}`, msg: "expected string for object key", off: 1},
	{name: "single quotes", in: `{'a':1}`, msg: "expected string for object key", off: 1},
	{name: "trailing comma in array", in: `[1,]`, msg: "expected a value", off: 3},
	{name: "trailing comma in object", in: `{"a":1,}`, msg: "expected string for object key", off: 7},
	{name: "bad literal", in: `tru`, msg: `invalid literal "tru"`, off: 0},
	{name: "capitalised literal", in: `True`, msg: `invalid literal "True"`, off: 0},
	{name: "byte order mark", in: "\ufeff{}", msg: "unexpected character U+FEFF", off: 0},
	{name: "form feed is not whitespace", in: "\f{}", msg: `unexpected character '\f'`, off: 0},
	{name: "nbsp is not whitespace", in: "[1,\u00a02]", msg: "unexpected character U+00A0", off: 3},
	// Depth.
	{name: "depth 1001 arrays", in: strings.Repeat("[", 1001) + strings.Repeat("]", 1001), msg: "nesting deeper than 1000", off: 1000},
	{
		name: "depth 1001 objects",
		in:   strings.Repeat(`{"a":`, 1001) + "1" + strings.Repeat("}", 1001),
		msg:  "nesting deeper than 1000",
		off:  5000,
	},
	{name: "very deep", in: strings.Repeat("[", 1<<20), msg: "nesting deeper than 1000", off: 1000},
	{name: "deep but unterminated", in: strings.Repeat("[", 1000), msg: "unterminated array", off: 1000},
}

func TestCanonicalizeErrors(t *testing.T) {
	for _, tc := range canonicalErrorVectors {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tc.in))
			if err == nil {
				t.Fatalf("Canonicalize(%q) = %q, want error", tc.in, got)
			}
			if got != nil {
				t.Errorf("Canonicalize returned %q alongside error", got)
			}
			if !errors.Is(err, ErrNotCanonicalizable) {
				t.Errorf("errors.Is(%v, ErrNotCanonicalizable) = false", err)
			}
			var ce *CanonicalError
			if !errors.As(err, &ce) {
				t.Fatalf("errors.As(%v, *CanonicalError) = false", err)
			}
			if !strings.Contains(ce.Msg, tc.msg) {
				t.Errorf("message %q does not contain %q", ce.Msg, tc.msg)
			}
			if tc.off >= 0 && ce.Offset != tc.off {
				t.Errorf("offset = %d, want %d (%v)", ce.Offset, tc.off, err)
			}
			if want := fmt.Sprintf("canonical json: at offset %d: %s", ce.Offset, ce.Msg); err.Error() != want {
				t.Errorf("Error() = %q, want %q", err.Error(), want)
			}
			// Digest must fail identically.
			d, derr := Digest([]byte(tc.in))
			if derr == nil || d != "" || derr.Error() != err.Error() {
				t.Errorf("Digest = %q, %v; want \"\", %v", d, derr, err)
			}
		})
	}
}

func TestCanonicalErrorFormat(t *testing.T) {
	_, err := Canonicalize([]byte(`{"a":1,"a":2}`))
	const want = `canonical json: at offset 7: duplicate key "a"`
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %s", err, want)
	}
	if errors.Is(err, errors.New("not I-JSON")) {
		t.Error("errors.Is matched an unrelated error with the same text")
	}
}

func TestCanonicalizeDepthLimit(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{
			name: "1000 arrays",
			in:   strings.Repeat("[", 1000) + strings.Repeat("]", 1000),
			want: strings.Repeat("[", 1000) + strings.Repeat("]", 1000),
		},
		{
			name: "1000 objects",
			in:   strings.Repeat(`{ "a" : `, 1000) + "1" + strings.Repeat(" }", 1000),
			want: strings.Repeat(`{"a":`, 1000) + "1" + strings.Repeat("}", 1000),
		},
		{
			name: "1000 mixed",
			in:   strings.Repeat(`[{"a":`, 500) + "null" + strings.Repeat("}]", 500),
			want: strings.Repeat(`[{"a":`, 500) + "null" + strings.Repeat("}]", 500),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tc.in))
			if err != nil {
				t.Fatalf("depth 1000 rejected: %v", err)
			}
			if string(got) != tc.want {
				t.Errorf("output differs from expected (len %d vs %d)", len(got), len(tc.want))
			}
		})
	}
}

func TestAppendCanonicalNumber(t *testing.T) {
	tests := []struct {
		name string
		f    float64
		want string
	}{
		{name: "zero", f: 0, want: "0"},
		{name: "negative zero", f: math.Copysign(0, -1), want: "0"},
		{name: "one", f: 1, want: "1"},
		{name: "minus one", f: -1, want: "-1"},
		{name: "ten", f: 10.0, want: "10"},
		{name: "4.50", f: 4.50, want: "4.5"},
		{name: "2e-3", f: 2e-3, want: "0.002"},
		{name: "1e20", f: 1e20, want: "100000000000000000000"},
		{name: "1e21", f: 1e21, want: "1e+21"},
		{name: "1e30", f: 1e30, want: "1e+30"},
		{name: "1e-6", f: 0.000001, want: "0.000001"},
		{name: "1e-7", f: 1e-7, want: "1e-7"},
		{name: "1e-27", f: 1e-27, want: "1e-27"},
		{name: "333333333.33333329", f: 333333333.33333329, want: "333333333.3333333"},
		{name: "-1.5e-10", f: -1.5e-10, want: "-1.5e-10"},
		{name: "123.456", f: 123.456, want: "123.456"},
		{name: "0.1", f: 0.1, want: "0.1"},
		{name: "0.1+0.2", f: 0.30000000000000004, want: "0.30000000000000004"},
		{name: "1.5e300", f: 1.5e300, want: "1.5e+300"},
		{name: "2^53", f: 1 << 53, want: "9007199254740992"},
		{name: "2^60", f: 1 << 60, want: "1152921504606847000"},
		{name: "1.2345e21", f: 1.2345e21, want: "1.2345e+21"},
		{name: "123456789.123e-20", f: 123456789.123e-20, want: "1.23456789123e-12"},
		{name: "5e-324", f: 5e-324, want: "5e-324"},
		{name: "max float", f: math.MaxFloat64, want: "1.7976931348623157e+308"},
		// RFC 8785 Appendix B, given as IEEE 754 bit patterns.
		{name: "B 0000000000000000", f: float64FromBits(0x0000000000000000), want: "0"},
		{name: "B 8000000000000000", f: float64FromBits(0x8000000000000000), want: "0"},
		{name: "B 0000000000000001", f: float64FromBits(0x0000000000000001), want: "5e-324"},
		{name: "B 8000000000000001", f: float64FromBits(0x8000000000000001), want: "-5e-324"},
		{name: "B 7fefffffffffffff", f: float64FromBits(0x7fefffffffffffff), want: "1.7976931348623157e+308"},
		{name: "B ffefffffffffffff", f: float64FromBits(0xffefffffffffffff), want: "-1.7976931348623157e+308"},
		{name: "B 4340000000000000", f: float64FromBits(0x4340000000000000), want: "9007199254740992"},
		{name: "B c340000000000000", f: float64FromBits(0xc340000000000000), want: "-9007199254740992"},
		{name: "B 4430000000000000", f: float64FromBits(0x4430000000000000), want: "295147905179352830000"},
		{name: "B 44b52d02c7e14af5", f: float64FromBits(0x44b52d02c7e14af5), want: "9.999999999999997e+22"},
		{name: "B 44b52d02c7e14af6", f: float64FromBits(0x44b52d02c7e14af6), want: "1e+23"},
		{name: "B 44b52d02c7e14af7", f: float64FromBits(0x44b52d02c7e14af7), want: "1.0000000000000001e+23"},
		{name: "B 444b1ae4d6e2ef4e", f: float64FromBits(0x444b1ae4d6e2ef4e), want: "999999999999999700000"},
		{name: "B 444b1ae4d6e2ef4f", f: float64FromBits(0x444b1ae4d6e2ef4f), want: "999999999999999900000"},
		{name: "B 444b1ae4d6e2ef50", f: float64FromBits(0x444b1ae4d6e2ef50), want: "1e+21"},
		{name: "B 3eb0c6f7a0b5ed8c", f: float64FromBits(0x3eb0c6f7a0b5ed8c), want: "9.999999999999997e-7"},
		{name: "B 3eb0c6f7a0b5ed8d", f: float64FromBits(0x3eb0c6f7a0b5ed8d), want: "0.000001"},
		{name: "B 41b3de4355555553", f: float64FromBits(0x41b3de4355555553), want: "333333333.3333332"},
		{name: "B 41b3de4355555554", f: float64FromBits(0x41b3de4355555554), want: "333333333.33333325"},
		{name: "B 41b3de4355555555", f: float64FromBits(0x41b3de4355555555), want: "333333333.3333333"},
		{name: "B 41b3de4355555556", f: float64FromBits(0x41b3de4355555556), want: "333333333.3333334"},
		{name: "B 41b3de4355555557", f: float64FromBits(0x41b3de4355555557), want: "333333333.33333343"},
		{name: "B becbf647612f3696", f: float64FromBits(0xbecbf647612f3696), want: "-0.0000033333333333333333"},
		{name: "B 43143ff3c1cb0959", f: float64FromBits(0x43143ff3c1cb0959), want: "1424953923781206.2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(appendCanonicalNumber(nil, tc.f)); got != tc.want {
				t.Errorf("appendCanonicalNumber(%v) = %q, want %q", tc.f, got, tc.want)
			}
			// appendCanonicalNumber must append, not overwrite.
			if got := string(appendCanonicalNumber([]byte("x"), tc.f)); got != "x"+tc.want {
				t.Errorf("appendCanonicalNumber with prefix = %q, want %q", got, "x"+tc.want)
			}
		})
	}
}

func float64FromBits(b uint64) float64 { return math.Float64frombits(b) }

func TestCompareUTF16(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want int // sign only
	}{
		{name: "equal", a: "abc", b: "abc", want: 0},
		{name: "empty first", a: "", b: "a", want: -1},
		{name: "prefix", a: "a", b: "ab", want: -1},
		{name: "ascii", a: "b", b: "a", want: 1},
		{name: "bmp below surrogates", a: "\u20ac", b: "\U0001F600", want: -1},
		{name: "astral before private use", a: "\U0001F600", b: "\ue000", want: -1},
		{name: "astral before fb33", a: "\U0001D11E", b: "\ufb33", want: -1},
		{name: "fb33 after astral", a: "\ufb33", b: "\U0001D11E", want: 1},
		{name: "astral same high", a: "\U0001F600", b: "\U0001F601", want: -1},
		{name: "astral different high", a: "\U0001F600", b: "\U00010000", want: 1},
		{name: "after common multibyte prefix", a: "é\uffff", b: "é\U00010000", want: 1},
	}
	sign := func(x int) int {
		switch {
		case x < 0:
			return -1
		case x > 0:
			return 1
		}
		return 0
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sign(compareUTF16([]byte(tc.a), []byte(tc.b))); got != tc.want {
				t.Errorf("compareUTF16(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
			}
		})
	}
}

func TestDigest(t *testing.T) {
	a, err := Digest([]byte(`{"x":1,"y":[true,"z"]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Digest([]byte(`{ "y" : [ true, "z" ], "x" : 1.0 }`))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("digests of equivalent documents differ: %s vs %s", a, b)
	}
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(a) {
		t.Errorf("digest %q has wrong form", a)
	}
	c, err := Canonicalize([]byte(`{"y":[true,"z"],"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(c) != `{"x":1,"y":[true,"z"]}` {
		t.Fatalf("canonical form = %s", c)
	}
	sum := sha256.Sum256(c)
	if want := "sha256:" + hex.EncodeToString(sum[:]); a != want {
		t.Errorf("Digest = %s, want %s", a, want)
	}
	other, err := Digest([]byte(`{"x":2,"y":[true,"z"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if other == a {
		t.Errorf("different documents have the same digest %s", a)
	}
}

// TestCanonicalizeConcurrent exercises the pooled canonParser state under -race.
func TestCanonicalizeConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				tc := canonicalVectors[(g+i)%len(canonicalVectors)]
				got, err := Canonicalize([]byte(tc.in))
				if err != nil || string(got) != tc.want {
					t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// canonicalBenchMessage is a realistic ~2 KiB wire message: nested objects, arrays,
// escaped and non-ASCII strings, integers and fractions, unsorted keys.
const canonicalBenchMessage = `{
  "type": "task.update",
  "version": 3,
  "id": "01J9ZK4R7X2M8Q3V5T6W0Y1B2C",
  "subject": "cotal.tasks.eu-west-1.worker-17.update",
  "timestamp": 1733131200.125,
  "sender": {"node": "worker-17", "region": "eu-west-1", "pid": 48213, "labels": {"tier": "gold", "zone": "b", "owner": "Zoë Ångström"}},
  "trace": {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7", "sampled": true},
  "payload": {
    "task": {
      "name": "resize-images",
      "state": "running",
      "progress": 0.6275,
      "attempt": 2,
      "max_attempts": 5,
      "started_at": 1733131100.5,
      "deadline": 1733134800,
      "args": ["--quality=85", "--format=webp", "--max-width=1920", "C:\\images\\in", "/var/tmp/out"],
      "env": {"LANG": "en_US.UTF-8", "TZ": "Europe/Berlin", "GOMAXPROCS": "8"}
    },
    "metrics": {
      "cpu": [0.12, 0.87, 0.93, 0.45, 1e-3],
      "mem_bytes": 734003200,
      "io": {"read": 12582912, "write": 9437184, "iops": 1520.75},
      "latency_ms": {"p50": 12.5, "p90": 48.25, "p99": 210.125, "max": 1250}
    },
    "items": [
      {"id": 1, "src": "a/photo-0001.jpg", "bytes": 2048576, "ok": true, "note": null},
      {"id": 2, "src": "a/photo-0002.jpg", "bytes": 3145728, "ok": true, "note": null},
      {"id": 3, "src": "a/photo-0003.jpg", "bytes": 1572864, "ok": false, "note": "decode error: \"unexpected EOF\"\n"},
      {"id": 4, "src": "b/Café — menu.png", "bytes": 524288, "ok": true, "note": "emoji \ud83d\ude00 in caption"},
      {"id": 5, "src": "b/photo-0005.heic", "bytes": 4194304, "ok": true, "note": null, "exif": {"iso": 200, "f": 1.8, "exposure": 0.008}},
      {"id": 6, "src": "c/scan\tpage-1.tiff", "bytes": 10485760, "ok": false, "note": "timeout after 30s", "retry_in": 1.5e1}
    ],
    "checksum": "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
  },
  "ttl_seconds": 3600,
  "retry": {"backoff": "exponential", "base_ms": 250, "factor": 2.0, "jitter": 0.1}
}`

func BenchmarkCanonicalize(b *testing.B) {
	in := []byte(canonicalBenchMessage)
	if _, err := Canonicalize(in); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonicalize(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDigest(b *testing.B) {
	in := []byte(canonicalBenchMessage)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Digest(in); err != nil {
			b.Fatal(err)
		}
	}
}
