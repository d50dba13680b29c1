package lang

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gocotal/cotal/lang/internal/syntax"
)

// The method tables (spec §5.2). A method is looked up at the call, never read as a value.

type method func(in *interp, f *frame, recv Value, args []Value) (Value, error)

// methodOf returns the method key of v, or nil.
func methodOf(v Value, key string) method {
	switch x := v.(type) {
	case *Array:
		if m := arrayMethods[key]; m != nil {
			return func(in *interp, f *frame, _ Value, args []Value) (Value, error) { return m(in, f, x, args) }
		}
	case string:
		if m := stringMethods[key]; m != nil {
			return func(in *interp, f *frame, _ Value, args []Value) (Value, error) { return m(in, f, x, args) }
		}
	case float64:
		if m := numberMethods[key]; m != nil {
			return func(in *interp, f *frame, _ Value, args []Value) (Value, error) { return m(x, args) }
		}
	}
	return nil
}

// writable refuses a mutator on a frozen array, or one born outside the calling branch.
func (in *interp) writable(f *frame, xs *Array) error {
	if xs.frozen {
		return runtimeFault("L2031", "the array crossed an effect boundary and is frozen: build a new one ([...list, item])")
	}
	return in.owns(f, xs.owner)
}

// relIndex resolves a relative index argument as slice and at do.
func relIndex(v Value, n int, def int) (int, error) {
	if v == Undefined {
		return def, nil
	}
	x, err := toNumber(v, "an index")
	if err != nil {
		return 0, err
	}
	if math.IsNaN(x) {
		x = 0
	}
	x = math.Trunc(x)
	if x < 0 {
		x = math.Max(float64(n)+x, 0)
	}
	return int(math.Min(x, float64(n))), nil
}

var arrayMethods map[string]func(in *interp, f *frame, xs *Array, args []Value) (Value, error)

func init() {
	each := func(in *interp, f *frame, xs *Array, fn Value, visit func(i int, v, r Value) (bool, error)) error {
		n := len(xs.Elems) // read once, before the first call
		for i := 0; i < n && i < len(xs.Elems); i++ {
			r, err := in.callback(f, fn, xs.Elems[i], float64(i), xs)
			if err != nil {
				return err
			}
			stop, err := visit(i, xs.Elems[i], r)
			if err != nil || stop {
				return err
			}
		}
		return nil
	}
	findIndex := func(last bool) func(in *interp, f *frame, xs *Array, a []Value) (int, error) {
		return func(in *interp, f *frame, xs *Array, a []Value) (int, error) {
			idx := make([]int, len(xs.Elems))
			for i := range idx {
				idx[i] = i
			}
			if last {
				slices.Reverse(idx)
			}
			for _, i := range idx {
				r, err := in.callback(f, arg(a, 0), xs.Elems[i], float64(i), xs)
				if err != nil {
					return 0, err
				}
				if truthy(r) {
					return i, nil
				}
			}
			return -1, nil
		}
	}
	arrayMethods = map[string]func(in *interp, f *frame, xs *Array, args []Value) (Value, error){
		"map": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			out := &Array{owner: f}
			return out, each(in, f, xs, arg(a, 0), func(_ int, _, r Value) (bool, error) { out.Elems = append(out.Elems, r); return false, nil })
		},
		"filter": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			out := &Array{owner: f}
			return out, each(in, f, xs, arg(a, 0), func(_ int, v, r Value) (bool, error) {
				if truthy(r) {
					out.Elems = append(out.Elems, v)
				}
				return false, nil
			})
		},
		"forEach": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			return Undefined, each(in, f, xs, arg(a, 0), func(int, Value, Value) (bool, error) { return false, nil })
		},
		"some": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			found := false
			return found, each(in, f, xs, arg(a, 0), func(_ int, _, r Value) (bool, error) { found = truthy(r); return found, nil })
		},
		"every": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			all := true
			err := each(in, f, xs, arg(a, 0), func(_ int, _, r Value) (bool, error) { all = truthy(r); return !all, nil })
			return all, err
		},
		"find": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			i, err := findIndex(false)(in, f, xs, a)
			if err != nil || i < 0 {
				return Undefined, err
			}
			return xs.Elems[i], nil
		},
		"findLast": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			i, err := findIndex(true)(in, f, xs, a)
			if err != nil || i < 0 {
				return Undefined, err
			}
			return xs.Elems[i], nil
		},
		"findIndex": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			i, err := findIndex(false)(in, f, xs, a)
			return float64(i), err
		},
		"findLastIndex": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			i, err := findIndex(true)(in, f, xs, a)
			return float64(i), err
		},
		"reduce": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			start := 0
			var acc Value
			switch {
			case len(a) > 1:
				acc = a[1]
			case len(xs.Elems) == 0:
				return nil, libFail("reduce", "an empty array with no initial value")
			default:
				acc, start = xs.Elems[0], 1
			}
			n := len(xs.Elems)
			for i := start; i < n && i < len(xs.Elems); i++ {
				var err error
				if acc, err = in.callback(f, arg(a, 0), acc, xs.Elems[i], float64(i), xs); err != nil {
					return nil, err
				}
			}
			return acc, nil
		},
		"flatMap": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			out := &Array{owner: f}
			return out, each(in, f, xs, arg(a, 0), func(_ int, _, r Value) (bool, error) {
				if ys, ok := r.(*Array); ok {
					out.Elems = append(out.Elems, ys.Elems...)
				} else {
					out.Elems = append(out.Elems, r)
				}
				return false, nil
			})
		},
	}
	maps.Copy(arrayMethods, arrayReaders())
	maps.Copy(arrayMethods, arrayMutators())
}

// arrayReaders are the array methods that take no callback and change nothing.
func arrayReaders() map[string]func(in *interp, f *frame, xs *Array, args []Value) (Value, error) {
	return map[string]func(in *interp, f *frame, xs *Array, args []Value) (Value, error){
		"includes": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			return slices.ContainsFunc(xs.Elems, func(v Value) bool { return sameValueZero(v, arg(a, 0)) }), nil
		},
		"indexOf": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			return float64(slices.IndexFunc(xs.Elems, func(v Value) bool { return strictEqual(v, arg(a, 0)) })), nil
		},
		"lastIndexOf": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			for i := len(xs.Elems) - 1; i >= 0; i-- {
				if strictEqual(xs.Elems[i], arg(a, 0)) {
					return float64(i), nil
				}
			}
			return -1.0, nil
		},
		"slice": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			n := len(xs.Elems)
			s, err := relIndex(arg(a, 0), n, 0)
			if err != nil {
				return nil, err
			}
			e, err := relIndex(arg(a, 1), n, n)
			if err != nil {
				return nil, err
			}
			out := &Array{owner: f}
			if s < e {
				out.Elems = slices.Clone(xs.Elems[s:e])
			}
			return out, nil
		},
		"concat": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) { return arrayConcat(f, xs, a) },
		"join": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			sep := ","
			if s := arg(a, 0); s != Undefined {
				var err error
				if sep, err = toStringPrimitive(s, "join's separator"); err != nil {
					return nil, err
				}
			}
			parts := make([]string, len(xs.Elems))
			for i, v := range xs.Elems {
				if v == nil || v == Undefined {
					continue
				}
				s, err := toStringPrimitive(v, "join")
				if err != nil {
					return nil, err
				}
				parts[i] = s
			}
			return strings.Join(parts, sep), nil
		},
		"flat": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			depth := 1.0
			if d := arg(a, 0); d != Undefined {
				var err error
				if depth, err = toNumber(d, "flat"); err != nil {
					return nil, err
				}
			}
			out := &Array{owner: f}
			var flat func(ys []Value, d float64)
			flat = func(ys []Value, d float64) {
				for _, y := range ys {
					if inner, ok := y.(*Array); ok && d >= 1 {
						flat(inner.Elems, d-1)
					} else {
						out.Elems = append(out.Elems, y)
					}
				}
			}
			flat(xs.Elems, depth)
			return out, nil
		},
		"at": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			i, err := indexArg(a, "at", len(xs.Elems), true)
			if err != nil || i < 0 {
				return Undefined, err
			}
			return xs.Elems[i], nil
		},
		"toReversed": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			out := &Array{owner: f, Elems: slices.Clone(xs.Elems)}
			slices.Reverse(out.Elems)
			return out, nil
		},
	}
}

// arrayMutators are the array methods that change the array (spec §4.3).
func arrayMutators() map[string]func(in *interp, f *frame, xs *Array, args []Value) (Value, error) {
	return map[string]func(in *interp, f *frame, xs *Array, args []Value) (Value, error){
		"push": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			if err := in.writable(f, xs); err != nil {
				return nil, err
			}
			xs.Elems = append(xs.Elems, a...)
			return float64(len(xs.Elems)), nil
		},
		"pop": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			if err := in.writable(f, xs); err != nil {
				return nil, err
			}
			if len(xs.Elems) == 0 {
				return Undefined, nil
			}
			v := xs.Elems[len(xs.Elems)-1]
			xs.Elems = xs.Elems[:len(xs.Elems)-1]
			return v, nil
		},
		"shift": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			if err := in.writable(f, xs); err != nil {
				return nil, err
			}
			if len(xs.Elems) == 0 {
				return Undefined, nil
			}
			v := xs.Elems[0]
			xs.Elems = slices.Delete(xs.Elems, 0, 1)
			return v, nil
		},
		"unshift": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			if err := in.writable(f, xs); err != nil {
				return nil, err
			}
			xs.Elems = slices.Insert(xs.Elems, 0, a...)
			return float64(len(xs.Elems)), nil
		},
		"splice": func(in *interp, f *frame, xs *Array, a []Value) (Value, error) {
			if err := in.writable(f, xs); err != nil {
				return nil, err
			}
			n := len(xs.Elems)
			s, err := relIndex(arg(a, 0), n, 0)
			if err != nil {
				return nil, err
			}
			count := n - s
			if len(a) > 1 {
				c, err := toNumber(a[1], "splice")
				if err != nil {
					return nil, err
				}
				if math.IsNaN(c) {
					c = 0
				}
				count = int(math.Max(0, math.Min(math.Trunc(c), float64(n-s))))
			}
			removed := &Array{owner: f, Elems: slices.Clone(xs.Elems[s : s+count])}
			var insert []Value
			if len(a) > 2 {
				insert = a[2:]
			}
			xs.Elems = slices.Concat(xs.Elems[:s:s], insert, xs.Elems[s+count:])
			return removed, nil
		},
	}
}

var stringMethods map[string]func(in *interp, f *frame, s string, args []Value) (Value, error)

func init() {
	str := func(a []Value, i int, name string) (string, error) {
		return toStringPrimitive(arg(a, i), name)
	}
	stringMethods = map[string]func(in *interp, f *frame, s string, args []Value) (Value, error){
		"trim": func(_ *interp, _ *frame, s string, _ []Value) (Value, error) {
			return strings.TrimFunc(s, isJSSpace), nil
		},
		"trimStart": func(_ *interp, _ *frame, s string, _ []Value) (Value, error) {
			return strings.TrimLeftFunc(s, isJSSpace), nil
		},
		"trimEnd": func(_ *interp, _ *frame, s string, _ []Value) (Value, error) {
			return strings.TrimRightFunc(s, isJSSpace), nil
		},
		"toLowerCase": func(_ *interp, _ *frame, s string, _ []Value) (Value, error) { return strings.ToLower(s), nil },
		"toUpperCase": func(_ *interp, _ *frame, s string, _ []Value) (Value, error) { return strings.ToUpper(s), nil },
		"startsWith": func(_ *interp, _ *frame, s string, a []Value) (Value, error) {
			p, err := str(a, 0, "startsWith")
			return strings.HasPrefix(s, p), err
		},
		"endsWith": func(_ *interp, _ *frame, s string, a []Value) (Value, error) {
			p, err := str(a, 0, "endsWith")
			return strings.HasSuffix(s, p), err
		},
		"includes": func(_ *interp, _ *frame, s string, a []Value) (Value, error) {
			p, err := str(a, 0, "includes")
			return strings.Contains(s, p), err
		},
		"indexOf": func(_ *interp, _ *frame, s string, a []Value) (Value, error) {
			p, err := str(a, 0, "indexOf")
			return float64(unitIndex(s, p, false)), err
		},
		"lastIndexOf": func(_ *interp, _ *frame, s string, a []Value) (Value, error) {
			p, err := str(a, 0, "lastIndexOf")
			return float64(unitIndex(s, p, true)), err
		},
		"slice": func(_ *interp, _ *frame, s string, a []Value) (Value, error) {
			u := utf16Units(s)
			b, err := relIndex(arg(a, 0), len(u), 0)
			if err != nil {
				return nil, err
			}
			e, err := relIndex(arg(a, 1), len(u), len(u))
			if err != nil || b >= e {
				return "", err
			}
			return unitsString(u[b:e]), nil
		},
		"substring": func(_ *interp, _ *frame, s string, a []Value) (Value, error) {
			u := utf16Units(s)
			clamp := func(v Value, def int) (int, error) {
				if v == Undefined {
					return def, nil
				}
				x, err := toNumber(v, "substring")
				if math.IsNaN(x) {
					x = 0
				}
				return int(math.Max(0, math.Min(math.Trunc(x), float64(len(u))))), err
			}
			b, err := clamp(arg(a, 0), 0)
			if err != nil {
				return nil, err
			}
			e, err := clamp(arg(a, 1), len(u))
			if err != nil {
				return nil, err
			}
			if b > e {
				b, e = e, b
			}
			return unitsString(u[b:e]), nil
		},
	}
	maps.Copy(stringMethods, stringEditors())
}

// stringEditors are the string methods that build a new string or split one.
func stringEditors() map[string]func(in *interp, f *frame, s string, args []Value) (Value, error) {
	str := func(a []Value, i int, name string) (string, error) {
		return toStringPrimitive(arg(a, i), name)
	}
	return map[string]func(in *interp, f *frame, s string, args []Value) (Value, error){
		"split": func(_ *interp, f *frame, s string, a []Value) (Value, error) {
			out := &Array{owner: f}
			if arg(a, 0) == Undefined {
				out.Elems = []Value{s}
				return out, nil
			}
			sep, err := str(a, 0, "split")
			if err != nil {
				return nil, err
			}
			var parts []string
			if sep == "" {
				for _, c := range utf16Units(s) {
					parts = append(parts, unitsString([]uint16{c}))
				}
			} else {
				parts = strings.Split(s, sep)
			}
			for _, p := range parts {
				out.Elems = append(out.Elems, p)
			}
			return out, nil
		},
		"replace": func(_ *interp, _ *frame, s string, a []Value) (Value, error) {
			return replaceString(s, a, false)
		},
		"replaceAll": func(_ *interp, _ *frame, s string, a []Value) (Value, error) {
			return replaceString(s, a, true)
		},
		"repeat": func(_ *interp, _ *frame, s string, a []Value) (Value, error) {
			n, err := toNumber(arg(a, 0), "repeat")
			if err != nil {
				return nil, err
			}
			if n < 0 || math.IsInf(n, 0) || float64(len(s))*n > 1<<24 {
				return nil, libFail("repeat", "a count of %s", syntax.FormatNumber(n))
			}
			return strings.Repeat(s, int(n)), nil
		},
		"padStart": func(_ *interp, _ *frame, s string, a []Value) (Value, error) { return pad(s, a, true) },
		"padEnd":   func(_ *interp, _ *frame, s string, a []Value) (Value, error) { return pad(s, a, false) },
		"at": func(_ *interp, _ *frame, s string, a []Value) (Value, error) {
			u := utf16Units(s)
			i, err := indexArg(a, "at", len(u), true)
			if err != nil || i < 0 {
				return Undefined, err
			}
			return unitsString(u[i : i+1]), nil
		},
		"charAt": func(_ *interp, _ *frame, s string, a []Value) (Value, error) {
			u := utf16Units(s)
			i, err := indexArg(a, "charAt", len(u), false)
			if err != nil || i < 0 {
				return "", err
			}
			return unitsString(u[i : i+1]), nil
		},
		"concat": func(_ *interp, _ *frame, s string, a []Value) (Value, error) {
			var b strings.Builder
			b.WriteString(s)
			for i := range a {
				p, err := str(a, i, "concat")
				if err != nil {
					return nil, err
				}
				b.WriteString(p)
			}
			return b.String(), nil
		},
	}
}

// indexArg reads the index argument of at and charAt over n elements: a whole number (NaN is
// 0), counted from the end when negative and fromEnd; -1 when out of range.
func indexArg(a []Value, name string, n int, fromEnd bool) (int, error) {
	x, err := toNumber(arg(a, 0), name)
	if err != nil {
		return -1, err
	}
	i := int(math.Trunc(x))
	if math.IsNaN(x) {
		i = 0
	}
	if i < 0 && fromEnd {
		i += n
	}
	if i < 0 || i >= n {
		return -1, nil
	}
	return i, nil
}

// unitIndex is indexOf and lastIndexOf in UTF-16 units.
func unitIndex(s, p string, last bool) int {
	u, q := utf16Units(s), utf16Units(p)
	idx := -1
	for i := 0; i+len(q) <= len(u); i++ {
		if slices.Equal(u[i:i+len(q)], q) {
			idx = i
			if !last {
				return i
			}
		}
	}
	return idx
}

// replaceString is String.prototype.replace and replaceAll with a string pattern and a
// substitution string ($$, $&, $`, $').
func replaceString(s string, a []Value, all bool) (Value, error) {
	from, err := toStringPrimitive(arg(a, 0), "replace")
	if err != nil {
		return nil, err
	}
	to, err := toStringPrimitive(arg(a, 1), "replace")
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	rest := 0
	for pos := 0; pos <= len(s); {
		i := strings.Index(s[pos:], from)
		if i < 0 {
			break
		}
		at := pos + i
		b.WriteString(s[rest:at])
		b.WriteString(substitute(to, s, at, at+len(from)))
		rest = at + len(from)
		if !all {
			break
		}
		pos = rest
		if from == "" {
			if pos >= len(s) {
				break
			}
			_, size := firstRune(s[pos:])
			b.WriteString(s[pos : pos+size])
			pos += size
			rest = pos
		}
	}
	b.WriteString(s[rest:])
	return b.String(), nil
}

func firstRune(s string) (rune, int) {
	for i, r := range s {
		_ = i
		return r, len(string(r))
	}
	return 0, 0
}

func substitute(to, s string, start, end int) string {
	if !strings.Contains(to, "$") {
		return to
	}
	var b strings.Builder
	for i := 0; i < len(to); i++ {
		if to[i] != '$' || i+1 >= len(to) {
			b.WriteByte(to[i])
			continue
		}
		switch to[i+1] {
		case '$':
			b.WriteByte('$')
		case '&':
			b.WriteString(s[start:end])
		case '`':
			b.WriteString(s[:start])
		case '\'':
			b.WriteString(s[end:])
		default:
			b.WriteByte('$')
			continue
		}
		i++
	}
	return b.String()
}

func pad(s string, a []Value, start bool) (Value, error) {
	n, err := toNumber(arg(a, 0), "pad")
	if err != nil {
		return nil, err
	}
	filler := " "
	if v := arg(a, 1); v != Undefined {
		if filler, err = toStringPrimitive(v, "pad"); err != nil {
			return nil, err
		}
	}
	u := utf16Units(s)
	if math.IsNaN(n) || int(n) <= len(u) || filler == "" {
		return s, nil
	}
	if n > 1<<24 {
		return nil, libFail("pad", "a length of %s", syntax.FormatNumber(n))
	}
	fu := utf16Units(filler)
	var fill []uint16
	for len(fill) < int(n)-len(u) {
		fill = append(fill, fu...)
	}
	fill = fill[:int(n)-len(u)]
	if start {
		return unitsString(append(fill, u...)), nil
	}
	return unitsString(append(u, fill...)), nil
}

var numberMethods = map[string]func(n float64, args []Value) (Value, error){
	"toFixed": func(n float64, a []Value) (Value, error) {
		d := 0.0
		if v := arg(a, 0); v != Undefined {
			var err error
			if d, err = toNumber(v, "toFixed"); err != nil {
				return nil, err
			}
		}
		if d < 0 || d > 100 || math.IsNaN(d) {
			return nil, libFail("toFixed", "%s digits", syntax.FormatNumber(d))
		}
		if math.Abs(n) >= 1e21 || math.IsNaN(n) || math.IsInf(n, 0) {
			return syntax.FormatNumber(n), nil
		}
		return strconv.FormatFloat(n, 'f', int(d), 64), nil
	},
	"toString": func(n float64, a []Value) (Value, error) {
		if r := arg(a, 0); r != Undefined {
			radix, err := toNumber(r, "toString")
			if err != nil {
				return nil, err
			}
			if radix != 10 {
				if radix < 2 || radix > 36 || radix != math.Trunc(radix) {
					return nil, libFail("toString", "a radix of %s", syntax.FormatNumber(radix))
				}
				if n == math.Trunc(n) && math.Abs(n) < 1<<53 {
					return strconv.FormatInt(int64(n), int(radix)), nil
				}
				return nil, libFail("toString", "a fractional number in radix %s", syntax.FormatNumber(radix))
			}
		}
		return syntax.FormatNumber(n), nil
	},
	"toPrecision": func(n float64, a []Value) (Value, error) {
		if arg(a, 0) == Undefined {
			return syntax.FormatNumber(n), nil
		}
		p, err := toNumber(arg(a, 0), "toPrecision")
		if err != nil {
			return nil, err
		}
		if p < 1 || p > 100 || math.IsNaN(p) {
			return nil, libFail("toPrecision", "%s digits", syntax.FormatNumber(p))
		}
		if math.IsNaN(n) || math.IsInf(n, 0) {
			return syntax.FormatNumber(n), nil
		}
		e := 0
		if n != 0 {
			e = int(math.Floor(math.Log10(math.Abs(n))))
		}
		if e < -6 || e >= int(p) {
			s := strconv.FormatFloat(n, 'e', int(p)-1, 64)
			mant, exp, _ := strings.Cut(s, "e")
			x, _ := strconv.Atoi(exp)
			sign := "+"
			if x < 0 {
				sign = "-"
			}
			return mant + "e" + sign + strconv.Itoa(abs(x)), nil
		}
		return strconv.FormatFloat(n, 'f', max(int(p)-1-e, 0), 64), nil
	},
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
