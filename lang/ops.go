package lang

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/gocotal/cotal/lang/internal/syntax"
)

// The operators on values (spec §4.5): primitives coerce as ECMAScript says; an array, a record
// or a function never does (L4018).

func truthy(v Value) bool {
	switch v := v.(type) {
	case nil, undefinedType:
		return false
	case bool:
		return v
	case float64:
		return v != 0 && !math.IsNaN(v)
	case string:
		return v != ""
	}
	return true
}

func strictEqual(a, b Value) bool {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case *Array, *Record, *Closure, *Builtin:
		return a == b
	}
	return a == b
}

func isPrimitive(v Value) bool {
	switch v.(type) {
	case nil, undefinedType, bool, float64, string:
		return true
	}
	return false
}

// toNumber is ECMAScript's ToNumber over a primitive; where names the operation for a refusal.
func toNumber(v Value, where string) (float64, error) {
	switch v := v.(type) {
	case float64:
		return v, nil
	case bool:
		if v {
			return 1, nil
		}
		return 0, nil
	case nil:
		return 0, nil
	case undefinedType:
		return math.NaN(), nil
	case string:
		return stringToNumber(v), nil
	}
	return 0, runtimeFault("L4018", "%s takes a primitive, not %s: convert it explicitly", where, describe(v))
}

// stringToNumber is ECMAScript's StringToNumber.
func stringToNumber(s string) float64 {
	t := strings.TrimFunc(s, isJSSpace)
	if t == "" {
		return 0
	}
	switch t {
	case "Infinity", "+Infinity":
		return math.Inf(1)
	case "-Infinity":
		return math.Inf(-1)
	}
	if len(t) > 2 && t[0] == '0' && strings.ContainsRune("xXoObB", rune(t[1])) {
		base := map[byte]int{'x': 16, 'X': 16, 'o': 8, 'O': 8, 'b': 2, 'B': 2}[t[1]]
		n, err := strconv.ParseUint(t[2:], base, 64)
		if err != nil {
			return math.NaN()
		}
		return float64(n)
	}
	for _, c := range t {
		if !strings.ContainsRune("0123456789+-.eE", c) {
			return math.NaN()
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return n
		}
		return math.NaN()
	}
	return n
}

func isJSSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r', '\u00a0', '\u1680', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\ufeff':
		return true
	}
	return r >= '\u2000' && r <= '\u200a'
}

// toStringPrimitive is ECMAScript's ToString over a primitive.
func toStringPrimitive(v Value, where string) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case float64:
		return syntax.FormatNumber(v), nil
	case bool:
		return strconv.FormatBool(v), nil
	case nil:
		return "null", nil
	case undefinedType:
		return "undefined", nil
	}
	return "", runtimeFault("L4018", "%s takes a primitive, not %s: convert it explicitly", where, describe(v))
}

func toInt32(n float64) int32 {
	if math.IsNaN(n) || math.IsInf(n, 0) {
		return 0
	}
	return int32(uint32(int64(math.Mod(math.Trunc(n), 4294967296))))
}

func toUint32(n float64) uint32 { return uint32(toInt32(n)) }

// arith applies a binary operator other than equality and the logical ones.
func arith(op string, l, r Value) (Value, error) {
	if !isPrimitive(l) || !isPrimitive(r) {
		bad := l
		if isPrimitive(l) {
			bad = r
		}
		return nil, runtimeFault("L4018", "the operator %s takes primitives, not %s: convert it explicitly", op, describe(bad))
	}
	switch op {
	case "+":
		ls, lstr := l.(string)
		rs, rstr := r.(string)
		if lstr || rstr {
			if !lstr {
				ls, _ = toStringPrimitive(l, op)
			}
			if !rstr {
				rs, _ = toStringPrimitive(r, op)
			}
			return ls + rs, nil
		}
	case "<", ">", "<=", ">=":
		ls, lstr := l.(string)
		rs, rstr := r.(string)
		if lstr && rstr {
			c := compareUTF16(ls, rs)
			return map[string]bool{"<": c < 0, ">": c > 0, "<=": c <= 0, ">=": c >= 0}[op], nil
		}
		a, _ := toNumber(l, op)
		b, _ := toNumber(r, op)
		if math.IsNaN(a) || math.IsNaN(b) {
			return false, nil
		}
		return map[string]bool{"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op], nil
	}
	a, _ := toNumber(l, op)
	b, _ := toNumber(r, op)
	switch op {
	case "+":
		return a + b, nil
	case "-":
		return a - b, nil
	case "*":
		return a * b, nil
	case "/":
		return a / b, nil
	case "%":
		if b == 0 || math.IsInf(a, 0) || math.IsNaN(a) || math.IsNaN(b) {
			return math.NaN(), nil
		}
		if math.IsInf(b, 0) {
			return a, nil
		}
		return math.Mod(a, b), nil
	case "**":
		if math.IsNaN(b) || (a == 1 || a == -1) && math.IsInf(b, 0) {
			return math.NaN(), nil
		}
		return math.Pow(a, b), nil
	case "&":
		return float64(toInt32(a) & toInt32(b)), nil
	case "|":
		return float64(toInt32(a) | toInt32(b)), nil
	case "^":
		return float64(toInt32(a) ^ toInt32(b)), nil
	case "<<":
		return float64(toInt32(a) << (toUint32(b) & 31)), nil
	case ">>":
		return float64(toInt32(a) >> (toUint32(b) & 31)), nil
	case ">>>":
		return float64(toUint32(a) >> (toUint32(b) & 31)), nil
	}
	return nil, runtimeFault("L1029", "the operator %s is not in the language", op)
}

// describe names a value's kind in a message.
func describe(v Value) string {
	switch v.(type) {
	case nil:
		return "null"
	case undefinedType:
		return "undefined"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case *Array:
		return "an array"
	case *Record:
		return "a record"
	case *Closure, *Builtin:
		return "a function"
	}
	return "a value"
}

// display renders a value for a message.
func display(v Value) string {
	if c, err := Canonical(v); err == nil {
		return string(c)
	}
	return describe(v)
}

func utf16Units(s string) []uint16 { return utf16.Encode([]rune(s)) }

func unitsString(u []uint16) string { return string(utf16.Decode(u)) }

// toJSON renders a value for the trace and the recorded run as JSON, as JavaScript's
// JSON.stringify would: a function or undefined in a record is left out, and one in an array or at
// the top is null; a non-finite number is null.
func toJSON(v Value) json.RawMessage {
	var b []byte
	writeJSON(&b, v, map[any]bool{})
	return b
}

func writeJSON(b *[]byte, v Value, active map[any]bool) {
	switch v := v.(type) {
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			*b = append(*b, "null"...)
			return
		}
		*b = append(*b, syntax.FormatNumber(v)...)
	case bool:
		*b = strconv.AppendBool(*b, v)
	case string:
		*b = appendJSONString(*b, v)
	case *Array:
		if active[v] {
			*b = append(*b, "null"...)
			return
		}
		active[v] = true
		defer delete(active, v)
		*b = append(*b, '[')
		for i, e := range v.Elems {
			if i > 0 {
				*b = append(*b, ',')
			}
			writeJSON(b, e, active)
		}
		*b = append(*b, ']')
	case *Record:
		if active[v] {
			*b = append(*b, "null"...)
			return
		}
		active[v] = true
		defer delete(active, v)
		*b = append(*b, '{')
		first := true
		for _, k := range v.keys {
			switch v.fields[k].(type) {
			case undefinedType, *Closure, *Builtin:
				continue
			}
			if !first {
				*b = append(*b, ',')
			}
			first = false
			*b = appendJSONString(*b, k)
			*b = append(*b, ':')
			writeJSON(b, v.fields[k], active)
		}
		*b = append(*b, '}')
	default:
		*b = append(*b, "null"...)
	}
}

// fromJSON turns JSON into a value, keeping each object's key order as written; the value is
// frozen when freeze is set (a recorded result replayed is as frozen as it was live, spec §4.3).
func fromJSON(raw json.RawMessage, freeze bool) (Value, error) {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	v, err := decodeValue(dec, freeze, 0)
	if err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

// maxJSONDepth bounds the nesting of a decoded value.
const maxJSONDepth = 1000

func decodeValue(dec *json.Decoder, freeze bool, depth int) (Value, error) {
	if depth > maxJSONDepth {
		return nil, errors.New("nested deeper than 1000")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return nil, nil
	case bool:
		return t, nil
	case json.Number:
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return nil, err
		}
		return f, nil
	case string:
		return t, nil
	case json.Delim:
		switch t {
		case '[':
			a := &Array{frozen: freeze}
			for dec.More() {
				e, err := decodeValue(dec, freeze, depth+1)
				if err != nil {
					return nil, err
				}
				a.Elems = append(a.Elems, e)
			}
			_, err := dec.Token()
			return a, err
		case '{':
			r := NewRecord()
			r.frozen = freeze
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec, freeze, depth+1)
				if err != nil {
					return nil, err
				}
				r.Set(k, v)
			}
			_, err := dec.Token()
			return r, err
		}
	}
	return nil, fmt.Errorf("unexpected %v", tok)
}

// freeze deep-freezes what crosses an effect boundary (spec §4.3).
func freeze(v Value) {
	switch v := v.(type) {
	case *Array:
		if v.frozen {
			return
		}
		v.frozen = true
		for _, e := range v.Elems {
			freeze(e)
		}
	case *Record:
		if v.frozen {
			return
		}
		v.frozen = true
		for _, k := range v.keys {
			freeze(v.fields[k])
		}
	}
}
