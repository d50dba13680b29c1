package syntax

import (
	"strings"
	"testing"
)

// TestParseRefusals: each construct the language refuses is reported with its code at the
// place it starts, and the parse goes on past it.
func TestParseRefusals(t *testing.T) {
	for _, tc := range []struct {
		src, code, at string
	}{
		{"class Plan { constructor(days) { this.days = days } }", "L1001", "1:1"},
		{"const f = () => this", "L1002", "1:17"},
		{"var x = 1", "L1003", "1:1"},
		{"for (const k in o) {}", "L1004", "1:14"},
		{"const b = has in o", "L1004", "1:15"},
		{"function* g() {}", "L1005", "1:9"},
		{"const r = /ab+c/g", "L1007", "1:11"},
		{"function f() {\n  return\n  42\n}", "L1008", "3:3"},
		{"const a = b\n(c)", "L1008", "2:1"},
		{"const a = b\n[1, 2].length", "L1008", "2:1"},
		{"if (x) y()", "L1009", "1:8"},
		{"while (x) y()", "L1009", "1:11"},
		{"const o = { [k]: 1 }", "L1011", "1:13"},
		{"const xs = [1, , 3]", "L1012", "1:16"},
		{"with (o) { x }", "L1013", "1:1"},
		{"const o = { get x() { return 1 } }", "L1015", "1:13"},
		{"const b = x instanceof Y", "L1016", "1:13"},
		{"outer: for (const x of xs) { break outer }", "L1017", "1:1"},
		{"const s = tag`x`", "L1018", "1:14"},
		{"const d = new Date()", "L1019", "1:11"},
		{"import x from \"y\"", "L1020", "1:1"},
		{"export const z = 1", "L1020", "1:1"},
		{"const m = import.meta", "L1020", "1:11"},
		{"delete o.x", "L1021", "1:1"},
		{"do { x() } while (y)", "L1022", "1:1"},
		{"function f() { await g() }", "L1023", "1:16"},
		{"return 1", "L1024", "1:1"},
		{"const z = 0 == \"\"", "L1025", "1:13"},
		{"const z = (a, b)", "L1026", "1:13"},
		{"const u = void 0", "L1027", "1:11"},
		{"const o = { __proto__: null }", "L1028", "1:13"},
		{"debugger", "L1029", "1:1"},
		{"const b = 10n", "L1030", "1:11"},
		{"const a = 'unterminated", "L1029", "1:11"},
		{"const x = 1 +", "L1029", "1:14"},
	} {
		_, diags := Parse(tc.src)
		found := false
		for _, d := range diags {
			if d.Code == tc.code && d.Pos.String() == tc.at {
				found = true
			}
		}
		if !found {
			t.Errorf("%q: %+v, want %s at %s", tc.src, diags, tc.code, tc.at)
		}
	}
}

// TestParseAdmitted: the admitted syntax parses with no refusal.
func TestParseAdmitted(t *testing.T) {
	src := strings.Join([]string{
		"const a = await sleep(\"1m\")",
		"let { x, y: [z = 1, ...zs], ...rest } = r",
		"const f = async (p, { q } = {}, ...more) => { return p ?? q }",
		"const g = x => x * 2",
		"function h(a, b = a) { if (a) { return b } else if (b) { return a } else { return null } }",
		"for (let i = 0; i < 10; i++) { continue }",
		"for (const [k, v] of entries(r)) { log(k, v) }",
		"while (a) { break }",
		"try { throw { code: \"x\" } } catch (e) { log(e) } finally { log(1) }",
		"try { a() } catch { b() }",
		"switch (a) { case 1: { break } case 2: return1(); break; default: throw 1 }",
		"const t = `a${b + `c${d}`}e`",
		"const o = { a, 'b': 2, 3: 4, ...c, m() { return 1 }, async n() { await sleep(\"1s\") } }",
		"x ??= 1; x ||= 2; x &&= 3; x **= 2; x >>>= 1",
		"const c = a?.b?.[c]?.(d) ?? e",
		"const n = (-x) ** 2 === 1 ? typeof y : !z;",
		"[a, b] = [b, a];",
		"({ a, b } = r)",
		"const big = 1_000_000 + 0x1f + 0o7 + 0b1 + .5 + 1e3",
		";",
		"const r2 = await race({ reply: () => wait(replied(b), { timeout: \"20m\" }), giveUp: () => sleep(\"1h\") }, { name: \"x\" })",
	}, "\n")
	prog, diags := Parse(src)
	if prog == nil || len(diags) != 0 {
		t.Fatalf("refused: %+v", diags)
	}
}

func TestFormatNumber(t *testing.T) {
	for v, want := range map[float64]string{
		1: "1", -1.5: "-1.5", 0.1: "0.1", 1e21: "1e+21", 1e20: "100000000000000000000", 1e-7: "1e-7",
		1.5e-7: "1.5e-7", 0.000001: "0.000001", 123456789012: "123456789012", 4.35: "4.35", 2e-7: "2e-7",
	} {
		if got := FormatNumber(v); got != want {
			t.Errorf("FormatNumber(%v) = %s, want %s", v, got, want)
		}
	}
}

// TestParseNesting: a program nested past the bound is refused, not a stack overflow.
func TestParseNesting(t *testing.T) {
	for _, src := range []string{strings.Repeat("(", 100000) + "1", strings.Repeat("[", 100000), strings.Repeat("{", 100000), strings.Repeat("-", 100000) + "1",
		"const " + strings.Repeat("[", 100000) + "a"} {
		if _, diags := Parse(src); len(diags) == 0 || diags[len(diags)-1].Code != "L1029" {
			t.Errorf("%.10s...: %v", src, diags)
		}
	}
}
