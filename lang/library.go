package lang

import (
	"crypto/sha256"
	"encoding/binary"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gocotal/cotal/lang/internal/syntax"
)

// The library (spec §5): the builtins and the method tables, closed. Callbacks are called one
// element at a time, in order.

func builtin(name string, call func(in *interp, f *frame, args []Value) (Value, error)) *Builtin {
	return &Builtin{name: name, call: call}
}

func arg(args []Value, i int) Value {
	if i < len(args) {
		return args[i]
	}
	return Undefined
}

// libFail is a builtin given inputs it refuses (L4016).
func libFail(name, format string, args ...any) error {
	return runtimeFault("L4016", name+": "+format, args...)
}

func wantRecord(name string, v Value) (*Record, error) {
	if r, ok := v.(*Record); ok {
		return r, nil
	}
	return nil, libFail(name, "takes a record, not %s", describe(v))
}

func wantArray(name string, v Value) (*Array, error) {
	if a, ok := v.(*Array); ok {
		return a, nil
	}
	return nil, libFail(name, "takes an array, not %s", describe(v))
}

func wantString(name string, v Value) (string, error) { return toStringPrimitive(v, name) }

func wantNumber(name string, v Value) (float64, error) { return toNumber(v, name) }

// library returns the builtins by name.
func (in *interp) library() map[string]Value {
	lib := map[string]Value{
		"undefined": Undefined,
		"keys": builtin("keys", func(in *interp, f *frame, a []Value) (Value, error) {
			r, err := wantRecord("keys", arg(a, 0))
			if err != nil {
				return nil, err
			}
			out := &Array{owner: f}
			for _, k := range r.keys {
				out.Elems = append(out.Elems, k)
			}
			return out, nil
		}),
		"values": builtin("values", func(in *interp, f *frame, a []Value) (Value, error) {
			r, err := wantRecord("values", arg(a, 0))
			if err != nil {
				return nil, err
			}
			out := &Array{owner: f}
			for _, k := range r.keys {
				out.Elems = append(out.Elems, r.fields[k])
			}
			return out, nil
		}),
		"entries": builtin("entries", func(in *interp, f *frame, a []Value) (Value, error) {
			r, err := wantRecord("entries", arg(a, 0))
			if err != nil {
				return nil, err
			}
			out := &Array{owner: f}
			for _, k := range r.keys {
				out.Elems = append(out.Elems, &Array{Elems: []Value{k, r.fields[k]}, owner: f})
			}
			return out, nil
		}),
		"has": builtin("has", func(in *interp, f *frame, a []Value) (Value, error) {
			r, err := wantRecord("has", arg(a, 0))
			if err != nil {
				return nil, err
			}
			k, err := propertyKey(arg(a, 1))
			if err != nil {
				return nil, err
			}
			_, ok := r.fields[k]
			return ok, nil
		}),
		"merge": builtin("merge", func(in *interp, f *frame, a []Value) (Value, error) {
			out := NewRecord()
			out.owner = f
			for i := range 2 {
				r, err := wantRecord("merge", arg(a, i))
				if err != nil {
					return nil, err
				}
				for _, k := range r.keys {
					if err := setField(out, k, r.fields[k]); err != nil {
						return nil, err
					}
				}
			}
			return out, nil
		}),
	}
	maps.Copy(lib, arrayBuiltins())
	maps.Copy(lib, textAndNumberBuiltins())
	for _, name := range []string{"map", "filter", "find", "some", "every", "slice", "join"} {
		method := arrayMethods[name]
		lib[name] = builtin(name, func(in *interp, f *frame, a []Value) (Value, error) {
			xs, err := wantArray(name, arg(a, 0))
			if err != nil {
				return nil, err
			}
			v, err := method(in, f, xs, a[1:])
			if name == "find" && v == Undefined && err == nil {
				return nil, nil // the free find answers null where the method answers undefined
			}
			return v, err
		})
	}
	lib["json"] = jsonNamespace()
	return lib
}

// arrayBuiltins are the free array builtins that are not also methods.
func arrayBuiltins() map[string]Value {
	return map[string]Value{
		"len": builtin("len", func(in *interp, f *frame, a []Value) (Value, error) {
			switch v := arg(a, 0).(type) {
			case *Array:
				return float64(len(v.Elems)), nil
			case string:
				return float64(len(utf16Units(v))), nil
			}
			return nil, libFail("len", "counts an array or a string, not %s: for a record's size, len(keys(r))", describe(arg(a, 0)))
		}),
		"range": builtin("range", func(in *interp, f *frame, a []Value) (Value, error) {
			n, err := wantNumber("range", arg(a, 0))
			if err != nil {
				return nil, err
			}
			if n != math.Trunc(n) || n < 0 || n > 1e7 {
				return nil, libFail("range", "takes a whole number from 0 to 10000000, not %s", syntax.FormatNumber(n))
			}
			out := &Array{owner: f}
			for i := range int(n) {
				out.Elems = append(out.Elems, float64(i))
			}
			return out, nil
		}),
		"sum": builtin("sum", func(in *interp, f *frame, a []Value) (Value, error) {
			xs, err := wantArray("sum", arg(a, 0))
			if err != nil {
				return nil, err
			}
			var acc Value = 0.0
			for _, x := range xs.Elems {
				if acc, err = arith("+", acc, x); err != nil {
					return nil, err
				}
			}
			return acc, nil
		}),
		"concat": builtin("concat", func(in *interp, f *frame, a []Value) (Value, error) {
			xs, err := wantArray("concat", arg(a, 0))
			if err != nil {
				return nil, err
			}
			return arrayConcat(f, xs, a[1:])
		}),
		"unique": builtin("unique", func(in *interp, f *frame, a []Value) (Value, error) {
			xs, err := wantArray("unique", arg(a, 0))
			if err != nil {
				return nil, err
			}
			out := &Array{owner: f}
			for _, x := range xs.Elems {
				if !slices.ContainsFunc(out.Elems, func(y Value) bool { return sameValueZero(x, y) }) {
					out.Elems = append(out.Elems, x)
				}
			}
			return out, nil
		}),
		"reverse": builtin("reverse", func(in *interp, f *frame, a []Value) (Value, error) {
			xs, err := wantArray("reverse", arg(a, 0))
			if err != nil {
				return nil, err
			}
			out := &Array{owner: f, Elems: slices.Clone(xs.Elems)}
			slices.Reverse(out.Elems)
			return out, nil
		}),
		"sort": builtin("sort", func(in *interp, f *frame, a []Value) (Value, error) {
			xs, err := wantArray("sort", arg(a, 0))
			if err != nil {
				return nil, err
			}
			return in.sortArray(f, xs, arg(a, 1))
		}),
	}
}

// textAndNumberBuiltins are the string, number, control and tamed-nondeterminism builtins.
func textAndNumberBuiltins() map[string]Value {
	return map[string]Value{
		"split": builtin("split", func(in *interp, f *frame, a []Value) (Value, error) {
			s, err := wantString("split", arg(a, 0))
			if err != nil {
				return nil, err
			}
			return stringMethods["split"](in, f, s, a[1:])
		}),
		"trim":       stringBuiltin("trim", "trim"),
		"lower":      stringBuiltin("lower", "toLowerCase"),
		"upper":      stringBuiltin("upper", "toUpperCase"),
		"startsWith": stringBuiltin("startsWith", "startsWith"),
		"endsWith":   stringBuiltin("endsWith", "endsWith"),
		"contains":   stringBuiltin("contains", "includes"),
		"replace":    stringBuiltin("replace", "replaceAll"),
		"min":        mathBuiltin("min", math.Inf(1), func(a, b float64) float64 { return jsMin(a, b) }),
		"max":        mathBuiltin("max", math.Inf(-1), func(a, b float64) float64 { return -jsMin(-a, -b) }),
		"abs":        numberBuiltin("abs", math.Abs),
		"floor":      numberBuiltin("floor", math.Floor),
		"ceil":       numberBuiltin("ceil", math.Ceil),
		"round":      numberBuiltin("round", func(x float64) float64 { return math.Floor(x + 0.5) }),
		"parseNumber": builtin("parseNumber", func(in *interp, f *frame, a []Value) (Value, error) {
			return toNumber(arg(a, 0), "parseNumber")
		}),
		"assert": builtin("assert", func(in *interp, f *frame, a []Value) (Value, error) {
			if truthy(arg(a, 0)) {
				return Undefined, nil
			}
			msg := "assertion failed"
			if len(a) > 1 {
				s, err := toStringPrimitive(a[1], "assert's message")
				if err != nil {
					return nil, err
				}
				msg = s
			}
			return nil, runtimeFault("L4012", "%s", msg)
		}),
		"log": builtin("log", func(in *interp, f *frame, a []Value) (Value, error) {
			if in.pins.LanguageVersion != "1" {
				for i, v := range a {
					if path, ok := codeIn(v, ""); ok {
						return nil, libFail("log", "argument %d carries code at %q: log is data", i+1, path)
					}
				}
			}
			in.logs = append(in.logs, logLine{scope: f.path, values: slices.Clone(a)})
			return Undefined, nil
		}),
		"random": builtin("random", func(in *interp, f *frame, a []Value) (Value, error) { return in.draw(f), nil }),
		"randomInt": builtin("randomInt", func(in *interp, f *frame, a []Value) (Value, error) {
			n, err := wantNumber("randomInt", arg(a, 0))
			if err != nil {
				return nil, err
			}
			if n != math.Trunc(n) || n < 1 {
				return nil, libFail("randomInt", "takes a whole number of at least 1, not %s", syntax.FormatNumber(n))
			}
			return math.Floor(in.draw(f) * n), nil
		}),
		"pick": builtin("pick", func(in *interp, f *frame, a []Value) (Value, error) {
			xs, err := wantArray("pick", arg(a, 0))
			if err != nil {
				return nil, err
			}
			if len(xs.Elems) == 0 {
				return nil, libFail("pick", "takes a non-empty array")
			}
			return xs.Elems[int(math.Floor(in.draw(f)*float64(len(xs.Elems))))], nil
		}),
		"now": builtin("now", func(in *interp, f *frame, a []Value) (Value, error) { return float64(f.clock), nil }),
		"duration": builtin("duration", func(in *interp, f *frame, a []Value) (Value, error) {
			s, err := wantString("duration", arg(a, 0))
			if err != nil {
				return nil, err
			}
			ms, err := ParseDuration(s)
			if err != nil {
				return nil, libFail("duration", "%v", err)
			}
			return float64(ms), nil
		}),
	}
}

// jsonNamespace is the json namespace: parse and stringify.
func jsonNamespace() *Record {
	json := NewRecord()
	json.Set("parse", builtin("json.parse", jsonParse))
	json.Set("stringify", builtin("json.stringify", func(in *interp, f *frame, a []Value) (Value, error) {
		c, err := Canonical(arg(a, 0))
		if err != nil {
			return nil, libFail("json.stringify", "%v", err)
		}
		return string(c), nil
	}))
	json.frozen = true
	return json
}

func stringBuiltin(name, method string) *Builtin {
	m := stringMethods[method]
	return builtin(name, func(in *interp, f *frame, a []Value) (Value, error) {
		s, err := wantString(name, arg(a, 0))
		if err != nil {
			return nil, err
		}
		return m(in, f, s, a[1:])
	})
}

func numberBuiltin(name string, op func(float64) float64) *Builtin {
	return builtin(name, func(in *interp, f *frame, a []Value) (Value, error) {
		n, err := wantNumber(name, arg(a, 0))
		if err != nil {
			return nil, err
		}
		return op(n), nil
	})
}

func mathBuiltin(name string, start float64, op func(a, b float64) float64) *Builtin {
	return builtin(name, func(in *interp, f *frame, a []Value) (Value, error) {
		acc := start
		for _, v := range a {
			n, err := wantNumber(name, v)
			if err != nil {
				return nil, err
			}
			if math.IsNaN(n) {
				acc = math.NaN()
				continue
			}
			if !math.IsNaN(acc) {
				acc = op(acc, n)
			}
		}
		return acc, nil
	})
}

func jsMin(a, b float64) float64 {
	if a == b && a == 0 {
		if math.Signbit(a) {
			return a
		}
		return b
	}
	return math.Min(a, b)
}

// codeIn reports whether a logged value carries a function, and where.
func codeIn(v Value, path string) (string, bool) {
	switch v := v.(type) {
	case *Closure, *Builtin:
		return path, true
	case *Array:
		for i, e := range v.Elems {
			if p, ok := codeIn(e, path+"["+strconv.Itoa(i)+"]"); ok {
				return p, true
			}
		}
	case *Record:
		for _, k := range v.keys {
			if p, ok := codeIn(v.fields[k], path+"."+k); ok {
				return p, true
			}
		}
	}
	return "", false
}

// draw is the n-th draw of the frame's scope path (spec §8.2): the first 48 bits of
// SHA-256(seed NUL path NUL n), over 2^48.
func (in *interp) draw(f *frame) float64 {
	sum := sha256.Sum256([]byte(in.pins.Seed + "\x00" + f.path + "\x00" + strconv.Itoa(f.draws)))
	f.draws++
	var b [8]byte
	copy(b[2:], sum[:6])
	return float64(binary.BigEndian.Uint64(b[:])) / (1 << 48)
}

func jsonParse(in *interp, f *frame, a []Value) (Value, error) {
	s, err := wantString("json.parse", arg(a, 0))
	if err != nil {
		return nil, err
	}
	v, err := fromJSON([]byte(s), false)
	if err != nil {
		return nil, libFail("json.parse", "%v", err)
	}
	if path, ok := protoIn(v, ""); ok {
		return nil, libFail("json.parse", "a \"__proto__\" key at %q", path)
	}
	own(v, f)
	return v, nil
}

// own makes the values of a fresh result the frame's.
func own(v Value, f *frame) {
	switch v := v.(type) {
	case *Array:
		v.owner = f
		for _, e := range v.Elems {
			own(e, f)
		}
	case *Record:
		v.owner = f
		for _, k := range v.keys {
			own(v.fields[k], f)
		}
	}
}

func protoIn(v Value, path string) (string, bool) {
	switch v := v.(type) {
	case *Array:
		for i, e := range v.Elems {
			if p, ok := protoIn(e, path+"["+strconv.Itoa(i)+"]"); ok {
				return p, true
			}
		}
	case *Record:
		for _, k := range v.keys {
			if k == "__proto__" {
				return path, true
			}
			if p, ok := protoIn(v.fields[k], path+"."+k); ok {
				return p, true
			}
		}
	}
	return "", false
}

func sameValueZero(a, b Value) bool {
	if x, ok := a.(float64); ok {
		if y, ok := b.(float64); ok && math.IsNaN(x) && math.IsNaN(y) {
			return true
		}
	}
	return strictEqual(a, b)
}

func arrayConcat(f *frame, xs *Array, rest []Value) (Value, error) {
	out := &Array{owner: f, Elems: slices.Clone(xs.Elems)}
	for _, r := range rest {
		if ys, ok := r.(*Array); ok {
			out.Elems = append(out.Elems, ys.Elems...)
		} else {
			out.Elems = append(out.Elems, r)
		}
	}
	return out, nil
}

// sortArray sorts a copy of xs by the total order (spec §5.3), over keyFn(item, index) when it
// is a function.
func (in *interp) sortArray(f *frame, xs *Array, keyFn Value) (Value, error) {
	type item struct {
		v, key Value
		i      int
	}
	items := make([]item, len(xs.Elems))
	for i, v := range xs.Elems {
		items[i] = item{v: v, key: v, i: i}
		if keyFn != Undefined {
			k, err := in.callback(f, keyFn, v, float64(i))
			if err != nil {
				return nil, err
			}
			items[i].key = k
		}
	}
	slices.SortStableFunc(items, func(a, b item) int {
		if c := totalOrder(a.key, b.key); c != 0 {
			return c
		}
		if c := totalOrder(a.v, b.v); c != 0 {
			return c
		}
		return a.i - b.i
	})
	out := &Array{owner: f}
	for _, it := range items {
		out.Elems = append(out.Elems, it.v)
	}
	return out, nil
}

// totalOrder orders values by kind (undefined, null, false, true, numbers, strings, arrays,
// records, and functions last), numbers by value with NaN after them, strings by code unit, and
// arrays and records by canonical form.
func totalOrder(a, b Value) int {
	ra, rb := kindRank(a), kindRank(b)
	if ra != rb {
		return ra - rb
	}
	switch x := a.(type) {
	case float64:
		y := b.(float64)
		switch {
		case math.IsNaN(x) && math.IsNaN(y):
			return 0
		case math.IsNaN(x):
			return 1
		case math.IsNaN(y):
			return -1
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	case string:
		return compareUTF16(x, b.(string))
	case *Array, *Record:
		ca, _ := Canonical(a)
		cb, _ := Canonical(b)
		return strings.Compare(string(ca), string(cb))
	}
	return 0
}

func kindRank(v Value) int {
	switch v := v.(type) {
	case undefinedType:
		return 0
	case nil:
		return 1
	case bool:
		if v {
			return 3
		}
		return 2
	case float64:
		return 4
	case string:
		return 5
	case *Array:
		return 6
	case *Record:
		return 7
	}
	return 8
}
