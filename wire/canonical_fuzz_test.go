package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"unicode/utf8"
)

// FuzzCanonicalize checks that Canonicalize never panics, that whatever it
// accepts is valid JSON whose canonical form is valid JSON with the same
// meaning (as decoded by encoding/json), and that the canonical form is a
// fixed point.
//
// Besides the table vectors added below, testdata/fuzz/FuzzCanonicalize holds
// seed files for the edges most likely to hide bugs:
//
//   - depth_1000: the deepest nesting that must be accepted.
//   - depth_1001: one level past the limit; must be an error, never a stack
//     overflow, and mutations around it probe the off-by-one.
//   - surrogate_pair: escaped surrogate pairs that decode to astral
//     characters and whose keys sort differently in UTF-16 and UTF-8.
//   - lone_surrogate: a high surrogate followed by a non-low escape.
//   - exponent_1e21: numbers around the 1e21 and 1e-7 switches between
//     plain and exponent notation (RFC 8785 §3.2.2.3).
//   - negative_zero: -0, a negative zero with a fraction and an exponent,
//     and a negative underflow, all of which must serialise as 0.
//   - duplicate_key: keys that are equal only after unescaping.
//   - invalid_utf8: a raw 0xFF byte inside a string.
//   - rfc8785_example: the RFC's main example, mixing every rule.
func FuzzCanonicalize(f *testing.F) {
	for _, v := range canonicalVectors {
		f.Add([]byte(v.in))
	}
	for _, v := range canonicalErrorVectors {
		if len(v.in) <= 8<<10 { // big inputs only slow the mutator down
			f.Add([]byte(v.in))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		if err != nil {
			if out != nil {
				t.Fatalf("non-nil output %q with error %v", out, err)
			}
			if !errors.Is(err, ErrNotCanonicalizable) {
				t.Fatalf("error %v does not match ErrNotCanonicalizable", err)
			}
			var ce *CanonicalError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *CanonicalError", err)
			}
			if ce.Offset < 0 || ce.Offset > len(in) {
				t.Fatalf("offset %d outside input of length %d", ce.Offset, len(in))
			}
			return
		}
		// We are stricter than RFC 8259, so accepted input must be JSON.
		if !json.Valid(in) {
			t.Fatalf("accepted invalid JSON %q", in)
		}
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("output %q of %q is not valid JSON", out, in)
		}
		again, err := Canonicalize(out)
		if err != nil {
			t.Fatalf("canonical output %q rejected: %v", out, err)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("not idempotent for %q:\n once %q\ntwice %q", in, out, again)
		}
		var vin, vout any
		if err := json.Unmarshal(in, &vin); err != nil {
			t.Fatalf("encoding/json rejects accepted input %q: %v", in, err)
		}
		if err := json.Unmarshal(out, &vout); err != nil {
			t.Fatalf("encoding/json rejects output %q: %v", out, err)
		}
		if !reflect.DeepEqual(vin, vout) {
			t.Fatalf("meaning changed:\n  in %q -> %#v\n out %q -> %#v", in, vin, out, vout)
		}
	})
}
