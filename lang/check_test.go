package lang

import (
	"strings"
	"testing"
)

// TestCheckSpecExamples: the spec's own examples of refusals are refused with the code they
// name, and its example programs are accepted.
func TestCheckStaticRules(t *testing.T) {
	for _, tc := range []struct {
		name, src, code string
	}{
		{"unknown identifier", "const a = b + 1", "L2001"},
		{"shadowing a builtin", "const keys = [1]", "L2002"},
		{"shadowing a primitive by a parameter", "function f(spawn) { return spawn }", "L2002"},
		{"assigning a const", "const a = 1\na = 2", "L2003"},
		{"assigning a function", "function f() {}\nf = 1", "L2003"},
		{"assigning a builtin", "len = 1", "L2003"},
		{"use before declaration", "log(a)\nconst a = 1", "L2004"},
		{"a default reaching a later parameter", "function f(a = b, b = 1) { return a }", "L2004"},
		{"Promise", "const p = Promise.all([])", "L2011"},
		{"a host global", "const x = Math.floor(1.5)", "L2012"},
		{"eval", "eval(\"1\")", "L2012"},
		{"an effect not awaited", "async function work(n) { return await sleep(\"1m\") }\nconst pa = work(1)\nconst pb = work(2)", "L2013"},
		{"a primitive not awaited", "const a = spawn(\"a\")", "L2013"},
		{"a branch writing outside", "let winner = null\nconst a = await spawn(\"a\")\nconst b = await spawn(\"b\")\nawait parallel({\n  first: async () => { const r = await turn(a, { name: \"go\" }); winner = r },\n  second: async () => { const r = await turn(b, { name: \"go\" }); winner = r },\n})", "L2032"},
		{"a fan-out writing outside", "let n = 0\nawait fanOut([{ id: \"a\" }], async (x) => { n++ }, { name: \"each\" })", "L2032"},
		{"a fall-through", "switch (x()) { case 1: log(1)\ncase 2: break }\nfunction x() { return 1 }", "L1010"},
		{"an unknown option", "await sleep(\"1m\", { nmae: \"nap\" })", "L3011"},
		{"a missing step name", "const a = await spawn(\"a\")\nawait turn(a, {})", "L3012"},
		{"a missing option bag", "const a = await spawn(\"a\")\nawait turn(a)", "L3012"},
		{"a computed required name", "const a = await spawn(\"a\")\nconst n = \"go\"\nawait turn(a, { name: n })", "L3013"},
		{"a malformed step name", "await sleep(\"1m\", { name: \"Nap Time\" })", "L3014"},
		{"a branch key with a slash", "await parallel({ \"a/b\": () => sleep(\"1s\") })", "L3025"},
		{"a function as data", "const a = await spawn(\"a\")\nawait ask(a, { name: \"q\", schema: () => 1 })", "L3042"},
		{"undefined as data", "await sleep(undefined)", "L3041"},
		{"a fact beyond the bound", "const a = await spawn(\"a\")\nawait notify([a], { decision: \"build\", outcome: \"Blocked\" })", "L3043"},
		{"a fact with another key", "const a = await spawn(\"a\")\nawait notify([a], { decision: \"build\", outcome: \"ok\", note: \"x\" })", "L3043"},
		{"to without escalate", "await checkpoint(\"approve\", \"Ship it?\", { to: \"lead\" })", "L3044"},
		{"a probe that is not a function", "await waitUntil(5, { name: \"ci\", every: \"1m\", deadline: \"1h\" })", "L3045"},
		{"a wait with no deadline", "await waitUntil(async () => null, { name: \"ci\", every: \"1m\" })", "L3046"},
		{"a cadence longer than the deadline", "await waitUntil(async () => null, { name: \"ci\", every: \"2h\", deadline: \"1h\" })", "L3047"},
	} {
		r := Check(tc.src)
		if r.Accepted || !hasCode(r.Diagnostics, tc.code) {
			t.Errorf("%s: %+v, want %s", tc.name, r.Diagnostics, tc.code)
		}
	}
}

func hasCode(ds []Diagnostic, code string) bool {
	for _, d := range ds {
		if d.Code == code {
			return true
		}
	}
	return false
}

// TestCheckAccepts: programs the spec presents as valid are accepted, with no diagnostic.
func TestCheckAccepts(t *testing.T) {
	for _, src := range []string{
		"const planner = await spawn(\"planner\")\nconst builder = await spawn(\"builder\", { worktree: \"wt-1\" })\nconst r = await turn(builder, { name: \"build\", deadline: \"30m\" })\nif (r.status === \"blocked\") {\n  await notify([planner], { decision: \"build\", outcome: \"blocked\", detail: { note: r.note ?? \"\" } })\n  await turn(planner, { name: \"unblock\" })\n}",
		"const builder = await spawn(\"builder\")\nconst outcome = await race({\n  reply: () => wait(replied(builder), { timeout: \"20m\" }),\n  giveUp: () => sleep(\"1h\"),\n}, { name: \"await-or-move-on\" })\nif (outcome.index === \"giveUp\") {\n  await notify([builder], { decision: \"await-reply\", outcome: \"gave-up\" })\n}",
		"const builder = await spawn(\"builder\")\ntry {\n  await turn(builder, { name: \"build\", deadline: \"10m\" })\n} catch (e) {\n  if (e.code === \"L4003\") {\n    await notify([builder], { decision: \"build\", outcome: \"timed-out\" })\n  } else {\n    throw e\n  }\n}",
		"const xs = [3, 1, 2]\nconst ys = sort(xs)\nlet total = 0\nfor (const x of ys) { total += x }\nlog(`total ${total}`, keys({ a: 1 }), len(xs))\nfunction twice(n) { return n * 2 }\nconst t = twice(total)\nswitch (t) {\n  case 12: { log(\"twelve\"); break }\n  default: log(\"other\")\n}",
		"const rs = await fanOut([{ id: \"a\" }, { id: \"b\" }], async (item) => {\n  const agent = await spawn(\"worker\", { name: `w-${item.id}` })\n  return await turn(agent, { name: \"work\" })\n}, { name: \"each\" })\nlog(rs)",
		"const ok = await checkpoint(\"approve\", \"Ship it?\", { timeout: \"1d\", onExpiry: \"escalate\", to: \"lead\" })\nconst seen = await waitUntil(async () => null, { name: \"ci\", every: \"1m\", deadline: \"1h\" })\nlog(ok, seen, now(), random(), run().id)",
		"const a = await spawn(\"a\")\nconst r = await conclave([a], async (room) => {\n  return await turn(a, { name: \"talk\" })\n}, { name: \"huddle\" })\nlog(r, channel(\"general\"))",
	} {
		if r := Check(src); !r.Accepted {
			t.Errorf("%s\nrefused: %+v", src, r.Diagnostics)
		}
	}
}

// TestCheckCollectsEveryError: one check reports every refusal, in source order.
func TestCheckCollectsEveryError(t *testing.T) {
	r := Check("var a = 1\nconst b = a == 2\nlog(c)\n")
	var codes []string
	for _, d := range r.Diagnostics {
		codes = append(codes, d.Code)
	}
	if got := strings.Join(codes, " "); got != "L1003 L1025 L2001" {
		t.Errorf("codes %s, want L1003 L1025 L2001", got)
	}
}
