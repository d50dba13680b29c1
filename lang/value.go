package lang

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/gocotal/cotal/lang/internal/syntax"
)

// A program's values (spec §4.1): null is nil, undefined is Undefined, a boolean is bool, a
// number is float64, a string is string, an array is *Array, a record is *Record, and a function
// is *Closure (one the program wrote) or *Builtin.
type Value = any

// undefinedType is the type of Undefined.
type undefinedType struct{}

// Undefined is JavaScript's undefined: what a missing field, an index out of range and a
// function that returns nothing produce. It cannot cross an effect boundary.
var Undefined = undefinedType{}

// Array is an array value. A frozen one crossed an effect boundary (L2031); owner is the frame
// that built it, the one branch that may write it (L2032).
type Array struct {
	Elems  []Value
	frozen bool
	owner  *frame
}

// Record is a record value: own string-keyed fields, in JavaScript's order (integer-like keys
// ascending, then the others as they were added).
type Record struct {
	keys   []string
	fields map[string]Value
	frozen bool
	owner  *frame
}

// NewRecord returns an empty record.
func NewRecord() *Record { return &Record{fields: map[string]Value{}} }

// Get returns a field, and whether the record has it.
func (r *Record) Get(k string) (Value, bool) {
	v, ok := r.fields[k]
	return v, ok
}

// Set sets a field, adding its key in order when new.
func (r *Record) Set(k string, v Value) {
	if _, ok := r.fields[k]; !ok {
		r.keys = append(r.keys, k)
		if isIndexKey(k) {
			slices.SortStableFunc(r.keys, compareKeys)
		}
	}
	r.fields[k] = v
}

// Keys returns the record's keys in JavaScript's order.
func (r *Record) Keys() []string { return slices.Clone(r.keys) }

// Len returns the number of fields.
func (r *Record) Len() int { return len(r.keys) }

// isIndexKey reports whether k is an array index as JavaScript spells one: a canonical
// non-negative integer below 2^32-1.
func isIndexKey(k string) bool {
	if k == "" || len(k) > 10 || k != "0" && k[0] == '0' {
		return false
	}
	n, err := strconv.ParseUint(k, 10, 64)
	return err == nil && n < math.MaxUint32
}

// compareKeys orders index keys first, ascending, and leaves the others where they are.
func compareKeys(a, b string) int {
	ai, bi := isIndexKey(a), isIndexKey(b)
	switch {
	case ai && bi:
		x, _ := strconv.ParseUint(a, 10, 64)
		y, _ := strconv.ParseUint(b, 10, 64)
		return cmpUint(x, y)
	case ai:
		return -1
	case bi:
		return 1
	}
	return 0
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Closure is a function the program wrote, with the environment it closes over.
type Closure struct {
	fn  *syntax.Function
	env *env
}

// Builtin is a builtin function or method.
type Builtin struct {
	name string
	call func(in *interp, f *frame, args []Value) (Value, error)
}

// typeOf is JavaScript's typeof.
func typeOf(v Value) string {
	switch v.(type) {
	case undefinedType:
		return "undefined"
	case nil:
		return "object"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case *Closure, *Builtin:
		return "function"
	}
	return "object"
}

// ---- the canonical form (RFC 8785) ----

// crossError is a value without a canonical form: the path inside the value, and why.
type crossError struct {
	path     string
	function bool // a function (L3042), rather than undefined, a non-finite number or a hole (L3041)
	why      string
}

func (e *crossError) Error() string {
	if e.path == "" {
		return e.why
	}
	return e.why + " at " + e.path
}

// Canonical returns the RFC 8785 canonical form of v: null, booleans, finite numbers, strings,
// and arrays and records of these. Anything else (undefined, a non-finite number, a function, a
// cycle) has none.
func Canonical(v Value) ([]byte, error) {
	var b []byte
	if err := canonical(&b, v, "", map[any]bool{}); err != nil {
		return nil, err
	}
	return b, nil
}

func canonical(b *[]byte, v Value, path string, active map[any]bool) error {
	switch v := v.(type) {
	case nil:
		*b = append(*b, "null"...)
	case bool:
		*b = strconv.AppendBool(*b, v)
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return &crossError{path: path, why: "a non-finite number has no canonical form"}
		}
		*b = append(*b, syntax.FormatNumber(v)...)
	case string:
		*b = appendJSONString(*b, v)
	case *Array:
		if active[v] {
			return &crossError{path: path, why: "a cycle has no canonical form"}
		}
		active[v] = true
		defer delete(active, v)
		*b = append(*b, '[')
		for i, e := range v.Elems {
			if i > 0 {
				*b = append(*b, ',')
			}
			if err := canonical(b, e, fmt.Sprintf("%s[%d]", path, i), active); err != nil {
				return err
			}
		}
		*b = append(*b, ']')
	case *Record:
		if active[v] {
			return &crossError{path: path, why: "a cycle has no canonical form"}
		}
		active[v] = true
		defer delete(active, v)
		keys := v.Keys()
		slices.SortFunc(keys, compareUTF16)
		*b = append(*b, '{')
		for i, k := range keys {
			if k == "__proto__" {
				return &crossError{path: path, why: "a record with an own __proto__ field has no canonical form"}
			}
			if i > 0 {
				*b = append(*b, ',')
			}
			*b = appendJSONString(*b, k)
			*b = append(*b, ':')
			if err := canonical(b, v.fields[k], path+"."+k, active); err != nil {
				return err
			}
		}
		*b = append(*b, '}')
	case undefinedType:
		return &crossError{path: path, why: "undefined has no canonical form"}
	case *Closure, *Builtin:
		return &crossError{path: path, function: true, why: "a function has no canonical form"}
	default:
		return &crossError{path: path, why: fmt.Sprintf("a %T has no canonical form", v)}
	}
	return nil
}

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785 sorts keys.
func compareUTF16(a, b string) int {
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	return slices.Compare(ua, ub)
}

// appendJSONString writes s as RFC 8785 writes a string: the escapes JSON requires, lowercase
// hex for the other control characters, everything else as UTF-8.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for _, r := range s {
		switch r {
		case '"':
			b = append(b, `\"`...)
		case '\\':
			b = append(b, `\\`...)
		case '\b':
			b = append(b, `\b`...)
		case '\f':
			b = append(b, `\f`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		default:
			if r < 0x20 {
				b = append(b, fmt.Sprintf(`\u%04x`, r)...)
			} else {
				b = append(b, string(r)...)
			}
		}
	}
	return append(b, '"')
}

// digest is "sha256:" and the hex SHA-256 of the canonical form (spec §10.3).
func digest(v Value) (string, error) {
	c, err := Canonical(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// ProgramHash is a program's hash, the digest of { source } (spec §2.1).
func ProgramHash(source string) string {
	r := NewRecord()
	r.Set("source", source)
	h, _ := digest(r) // a string always has a canonical form
	return h
}

// RequestID is the identity a handler submits a step under (spec §10.4): base64url, unpadded,
// of the SHA-256 of the canonical [runId, stepKey, inputHash, attempt].
func RequestID(runID, stepKey, inputHash string, attempt int) string {
	c, _ := Canonical(&Array{Elems: []Value{runID, stepKey, inputHash, float64(attempt)}}) // all primitives
	sum := sha256.Sum256(c)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// StepKey is a step's key string (spec §10.2): the scope path, then /kind[:name]#occurrence.
func StepKey(scope, kind, name string, occurrence int) string {
	var b strings.Builder
	b.WriteString(scope)
	b.WriteString("/")
	b.WriteString(kind)
	if name != "" {
		b.WriteString(":")
		b.WriteString(name)
	}
	b.WriteString("#")
	b.WriteString(strconv.Itoa(occurrence))
	return b.String()
}
