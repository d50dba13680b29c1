package lang

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func sim(t testing.TB, script string) *Sim {
	t.Helper()
	var s Script
	if script != "" {
		if err := json.Unmarshal([]byte(script), &s); err != nil {
			t.Fatal(err)
		}
	}
	h, err := NewSim(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func runSim(t testing.TB, src, script string, o RunOptions) *Result {
	t.Helper()
	if o.RunID == "" {
		o.RunID = "test-run"
	}
	if o.Handler == nil {
		o.Handler = sim(t, script)
	}
	started := int64(1700000000000)
	if o.StartedAt == nil && o.Pins == nil {
		o.StartedAt = &started
	}
	r, err := Run(t.Context(), src, o)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return r
}

// TestRunSequential: a sequential program's effects are journalled with the spec's keys, input
// hashes and request ids; its logs and pure values come out as JavaScript computes them.
func TestRunSequential(t *testing.T) {
	src := "const xs = [1, 2, 3];\nconst n = len(xs);\nlog(\"len of an array was\", n);\nconst b = await spawn(\"b\");\nlog(\"done\");"
	r := runSim(t, src, "", RunOptions{RunID: "v1-len-on-an-array", Seed: "v1-len"})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if len(r.Entries) != 1 {
		t.Fatalf("entries %+v", r.Entries)
	}
	e := r.Entries[0]
	if e.Key() != "/spawn:b#0" || e.InputHash != "sha256:d6c80482a86677fc954aa1263f4419c88b74dde27f07e1c3147fa54551d6da09" ||
		e.RequestID != "Wg7Op8V_GA7YhEdRjrKRNp8sFdIPrtnbws7Vp52ikCY" || string(e.Result) != `{"agent":"sim.b","persona":"b"}` ||
		string(e.External) != `{"simAgent":"sim.b"}` || e.Status != StatusOK || e.State != StateSettled {
		t.Errorf("entry %+v", e)
	}
	if got := logsJSON(r); got != `[["len of an array was",3],["done"]]` {
		t.Errorf("logs %s", got)
	}
}

func logsJSON(r *Result) string {
	var parts []string
	for _, l := range r.Logs {
		parts = append(parts, string(toJSON(&Array{Elems: l})))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// TestRunPure: the pure language computes as JavaScript does.
func TestRunPure(t *testing.T) {
	src := `const xs = [3, 1, 2]
const ys = sort(xs)
let total = 0
for (const x of ys) { total += x }
const { a, b: [c = 7, ...rest] } = { a: 1, b: [undefined, 3, 4] }
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2) }
const o = { ...{ z: 1 }, 2: "two", 1: "one", m() { return "m" } }
let s = ""
switch (total) {
  case 6: { s = "six"; break }
  default: s = "other"
}
const words = "a,b,,c".split(",").filter((w) => w !== "").map((w) => w.toUpperCase())
let caught = null
try { null.x } catch (e) { caught = e.code }
let i = 0
while (true) { i++; if (i > 4) { break } }
log(total, a, c, rest, fib(10), keys(o), o.m(), s, words.join("-"), caught, i, 7 % 3, 2 ** 10, "x".padStart(3, "-"), (0.1 + 0.2).toFixed(2), typeof o, [1, 2, 3].reduce((p, q) => p + q, 0), json.stringify({ b: 1, a: [true, null] }), replace("a.a", ".", "-"), find([1], (x) => x > 1), [1].find((x) => x > 1) === undefined, min(3, 1, 2), unique([1, 1, 2]), merge({ a: 1 }, { b: 2 }), has({ a: 1 }, "a"), range(3), sum([1, 2, 3]), slice([1, 2, 3], 1), concat([1], [2], 3), reverse([1, 2]), entries({ a: 1 }), values({ a: 1 }), trim(" x "), lower("X"), upper("x"), startsWith("ab", "a"), endsWith("ab", "b"), contains("ab", "b"), abs(-1), floor(1.5), ceil(1.5), round(2.5), parseNumber("42"), duration("2m"), ` + "`t${1 + 1}`" + `)`
	r := runSim(t, src, "", RunOptions{})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	want := `[[6,1,7,[3,4],55,["1","2","z","m"],"m","six","A-B-C","L4010",5,1,1024,"--x","0.30","object",6,"{\"a\":[true,null],\"b\":1}","a-a",null,true,1,[1,2],{"a":1,"b":2},true,[0,1,2],6,[2,3],[1,2,3],[2,1],[["a",1]],[1],"x","x","X",true,true,true,1,1,2,3,42,120000,"t2"]]`
	if got := logsJSON(r); got != want {
		t.Errorf("logs\n%s\nwant\n%s", got, want)
	}
}

// TestRunTestdata: each program in testdata/run fails under the simulator with the code its
// first line names ("// fails: Lnnnn"), answered from the script a "// script: JSON" line gives.
func TestRunTestdata(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "run", "*.js"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(raw), "\n")
		code, ok := strings.CutPrefix(lines[0], "// fails: ")
		if !ok {
			t.Fatalf("%s: the first line names no code", file)
		}
		script, _ := strings.CutPrefix(lines[1], "// script: ")
		if script == lines[1] {
			script = ""
		}
		r := runSim(t, string(raw), script, RunOptions{})
		got := ""
		switch e := r.Err.(type) {
		case *Thrown:
			got = e.Code()
		case *Fault:
			got = e.Code
		}
		if got != code {
			t.Errorf("%s: %v, want %s", file, r.Err, code)
		}
	}
}

// TestRunBudgets: a pure loop ends on the step budget (L4013, uncatchable), and the run's
// effects on the ceiling (L4009).
func TestRunBudgets(t *testing.T) {
	r := runSim(t, "try { while (true) { } } catch (e) { log(\"caught\") }", "", RunOptions{StepBudget: 10000})
	if f, ok := r.Err.(*Fault); !ok || f.Code != "L4013" || len(r.Logs) != 0 {
		t.Errorf("an endless loop: %v (logs %v)", r.Err, r.Logs)
	}
	r = runSim(t, "for (const i of range(5)) { await sleep(\"1s\", { name: `nap-${i}` }) }", "", RunOptions{EffectCeiling: 3})
	if th, ok := r.Err.(*Thrown); !ok || th.Code() != "L4009" || len(r.Entries) != 3 {
		t.Errorf("past the ceiling: %v, %d entries", r.Err, len(r.Entries))
	}
}

// TestResume: a resume replays recorded effects without the handler, performs the first
// unrecorded one, and stops at a changed input (L5001) or another run's journal (L5011).
func TestResume(t *testing.T) {
	src := "await sleep(\"1m\", { name: \"a\" })\nlog(now())\nawait sleep(\"2m\", { name: \"b\" })\nlog(\"done\", now())"
	first := runSim(t, src, "", RunOptions{RunID: "r1"})
	if first.Err != nil || len(first.Entries) != 2 {
		t.Fatalf("first: %v %+v", first.Err, first.Entries)
	}
	again := runSim(t, src, "", RunOptions{RunID: "r1", Pins: &first.Pins, Journal: first.Entries[:1], Handler: sim(t, `{"clock":{"start":60000}}`)})
	if again.Err != nil || len(again.Entries) != 2 || string(marshalEntries(again.Entries)) != string(marshalEntries(first.Entries)) || logsJSON(again) != logsJSON(first) {
		t.Errorf("resume:\n%s\n%s\nlogs %s / %s", marshalEntries(again.Entries), marshalEntries(first.Entries), logsJSON(again), logsJSON(first))
	}
	changed := strings.Replace(src, "\"2m\"", "\"3m\"", 1)
	r := runSim(t, changed, "", RunOptions{RunID: "r1", Pins: &first.Pins, Journal: first.Entries})
	if f, ok := r.Err.(*Fault); !ok || f.Code != "L5001" {
		t.Errorf("a changed step: %v", r.Err)
	}
	if _, err := Run(t.Context(), src, RunOptions{RunID: "r2", Handler: sim(t, ""), Pins: &first.Pins, Journal: first.Entries}); err == nil || !strings.Contains(err.Error(), "L5011") {
		t.Errorf("another run's journal: %v", err)
	}
	other := first.Pins
	other.LanguageVersion = "9"
	if _, err := Run(t.Context(), src, RunOptions{RunID: "r1", Handler: sim(t, ""), Pins: &other, Journal: first.Entries}); err == nil || !strings.Contains(err.Error(), "L5023") {
		t.Errorf("an unserved version: %v", err)
	}
}

// TestScopes: parallel, race and fanOut journal their own entries beside their branches'.
func TestScopes(t *testing.T) {
	src := `const both = await parallel({ a: () => sleep("1m"), b: async () => { await sleep("2m"); return 2 } }, { name: "both" })
const first = await race({ slow: () => sleep("1h"), fast: () => sleep("1m") }, { name: "first" })
const each = await fanOut([{ id: "x" }, { id: "y" }], async (it, i) => { await sleep("1s"); return it.id + i }, { name: "each" })
log(both, first.index, each)`
	r := runSim(t, src, "", RunOptions{})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	var keys []string
	for _, e := range r.Entries {
		keys = append(keys, e.Key())
	}
	want := "/parallel:both#0 /parallel:both#0/b:a/sleep#0 /parallel:both#0/b:b/sleep#0 /race:first#0 /race:first#0/b:slow/sleep#0 /race:first#0/b:fast/sleep#0 /fanOut:each#0 /fanOut:each#0/b:x/sleep#0 /fanOut:each#0/b:y/sleep#0"
	if strings.Join(keys, " ") != want {
		t.Errorf("keys %s", strings.Join(keys, " "))
	}
	if got := logsJSON(r); got != `[[{"a":null,"b":2},"slow",["x0","y1"]]]` {
		t.Errorf("logs %s", got)
	}
}

// tenThousand is a program of 10,000 sequential effects, the bound for a simulated run
// and a resume (2 s each).
const tenThousand = "for (const i of range(10000)) {\n  await sleep(\"1ms\")\n}\n"

// BenchmarkSim10000Effects simulates 10,000 sequential effects.
func BenchmarkSim10000Effects(b *testing.B) {
	for b.Loop() {
		r := runSim(b, tenThousand, "", RunOptions{})
		if r.Err != nil || len(r.Entries) != 10000 {
			b.Fatalf("%v, %d entries", r.Err, len(r.Entries))
		}
	}
}

// BenchmarkResume10000Entries resumes a run from a journal of 10,000 entries: every step
// replays.
func BenchmarkResume10000Entries(b *testing.B) {
	first := runSim(b, tenThousand, "", RunOptions{RunID: "bench"})
	if first.Err != nil {
		b.Fatal(first.Err)
	}
	for b.Loop() {
		r := runSim(b, tenThousand, "", RunOptions{RunID: "bench", Pins: &first.Pins, Journal: first.Entries})
		if r.Err != nil || len(r.Entries) != 10000 {
			b.Fatalf("%v, %d entries", r.Err, len(r.Entries))
		}
	}
}

// marshalEntries is the journal as JSON.
func marshalEntries(es []Entry) json.RawMessage {
	raw, _ := json.Marshal(es) // entries always encode
	return raw
}

// TestDeepRecursion: recursion past the host's depth ends the run with a fault no catch sees.
func TestDeepRecursion(t *testing.T) {
	r := runSim(t, "function f(n) { return f(n + 1) }\ntry { f(0) } catch (e) { log(\"caught\") }", "", RunOptions{})
	if f, ok := r.Err.(*Fault); !ok || !strings.Contains(f.Message, "stack") || len(r.Logs) != 0 {
		t.Errorf("%v %v", r.Err, r.Logs)
	}
}

// FuzzRun: no program makes the interpreter panic or run past its budgets.
func FuzzRun(f *testing.F) {
	for _, src := range []string{tenThousand, "let i = 0\nwhile (true) { i++ }", "const f = (n) => n < 1 ? 0 : f(n - 1)\nlog(f(100))",
		"log([3, 1].map((x) => x * 2), json.stringify({ a: [1, { b: null }] }))",
		"await race({ a: () => sleep(\"1m\"), b: async () => { await parallel({ c: () => sleep(\"2s\") }); return 1 } })"} {
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src string) {
		h, _ := NewSim(Script{})
		started := int64(0)
		r, err := Run(t.Context(), src, RunOptions{RunID: "fuzz", Handler: h, StartedAt: &started, StepBudget: 20_000, EffectCeiling: 100})
		if err == nil && r.Steps > 20_001 {
			t.Fatalf("%d steps past a budget of 20000", r.Steps)
		}
	})
}

// TestCheckpointEscalation: an escalating checkpoint whose first attempt expires mints one more
// under the same entry, as attempt 1 with its own request id, addressed to its to; when that
// expires too the program gets { status: "expired" }, and a resume replays it without asking.
func TestCheckpointEscalation(t *testing.T) {
	src := `const r = await checkpoint("ship", "Ship it?", { timeout: "1h", onExpiry: "escalate", to: "lead" })
log(r.status)`
	script := `{"checkpoints": {"ship": [{"status": "expired"}, {"status": "expired"}]}}`
	r := runSim(t, src, script, RunOptions{RunID: "esc"})
	if r.Err != nil || len(r.Entries) != 1 || logsJSON(r) != `[["expired"]]` {
		t.Fatalf("%v %s %s", r.Err, marshalEntries(r.Entries), logsJSON(r))
	}
	e := r.Entries[0]
	second := RequestID("esc", "/checkpoint:ship#0", e.InputHash, 1)
	if *e.Attempt != 1 || e.RequestID != second || !strings.Contains(string(e.Result), `"attempts":[{"attempt":0,`) || !strings.Contains(string(e.Result), `"to":"lead"`) {
		t.Errorf("entry %s", marshalEntries(r.Entries))
	}
	again := runSim(t, src, "", RunOptions{RunID: "esc", Pins: &r.Pins, Journal: r.Entries})
	if again.Err != nil || logsJSON(again) != `[["expired"]]` {
		t.Errorf("resume: %v %s", again.Err, logsJSON(again))
	}
	resolved := runSim(t, src, `{"checkpoints": {"ship": [{"status": "expired"}, {"status": "resolved", "by": "lead"}]}}`, RunOptions{})
	if resolved.Err != nil || logsJSON(resolved) != `[["resolved"]]` {
		t.Errorf("resolved on escalation: %v %s", resolved.Err, logsJSON(resolved))
	}
}

// refusingTurns is the simulator on a host that cannot perform a turn.
type refusingTurns struct{ *Sim }

func (r refusingTurns) Perform(ctx context.Context, req *Request) (*Outcome, error) {
	if req.Kind == "turn" {
		return nil, &CapabilityRefusal{Code: "L5016", Message: "turn is not durable on this host"}
	}
	return r.Sim.Perform(ctx, req)
}

// TestHostRefusals: a refused journal append (L5010), a result over the bound (L5006), a release
// (L5012) and a capability refusal (L5025) end the run past any catch, each leaving the journal
// where the spec says; a resume on a capable host performs the refused step.
func TestHostRefusals(t *testing.T) {
	src := "const a = await spawn(\"a\")\ntry {\n  const r = await turn(a, { name: \"go\" })\n  log(r.status)\n} catch (e) { log(\"caught\", e.code) } finally { log(\"finally\") }"
	script := `{"turns": {"go": {"status": "done"}}}`
	writes := 0
	r := runSim(t, src, script, RunOptions{Store: func(e Entry) error {
		writes++
		if e.Kind == "turn" && e.State == StateSettled {
			return errors.New("disk full")
		}
		return nil
	}})
	if f, ok := r.Err.(*Fault); !ok || f.Code != "L5010" || len(r.Logs) != 0 || writes != 4 {
		t.Errorf("a refused append: %v, logs %v, %d writes", r.Err, r.Logs, writes)
	}
	r = runSim(t, src, script, RunOptions{ResultBound: 10})
	if f, ok := r.Err.(*Fault); !ok || f.Code != "L5006" || r.Entries[0].State != StatePending {
		t.Errorf("a result over the bound: %v %s", r.Err, marshalEntries(r.Entries))
	}
	asked := 0
	r = runSim(t, src, script, RunOptions{ShouldStop: func() string {
		if asked++; asked > 1 {
			return "the driver is stopping"
		}
		return ""
	}})
	if f, ok := r.Err.(*Fault); !ok || f.Code != "L5012" || len(r.Entries) != 1 || len(r.Logs) != 0 {
		t.Errorf("a release: %v %s", r.Err, marshalEntries(r.Entries))
	}
	held := runSim(t, src, script, RunOptions{RunID: "held", Handler: refusingTurns{sim(t, script)}})
	if f, ok := held.Err.(*Fault); !ok || f.Code != "L5025" || held.Entries[1].Status != StatusRefused || held.Entries[1].Error.Code != "L5016" || len(held.Logs) != 0 {
		t.Fatalf("a capability refusal: %v %s", held.Err, marshalEntries(held.Entries))
	}
	healed := runSim(t, src, script, RunOptions{RunID: "held", Pins: &held.Pins, Journal: held.Entries})
	if healed.Err != nil || healed.Entries[1].Status != StatusOK || logsJSON(healed) != `[["done"],["finally"]]` {
		t.Errorf("the resume on a capable host: %v %s %s", healed.Err, marshalEntries(healed.Entries), logsJSON(healed))
	}
}

// noConclaves is the simulator on a host that hosts no conclaves: it is no ConclaveHost.
type noConclaves struct{ s *Sim }

func (n noConclaves) Now() int64 { return n.s.Now() }

func (n noConclaves) Perform(ctx context.Context, req *Request) (*Outcome, error) {
	return n.s.Perform(ctx, req)
}

// TestConclaveRefused: a host that hosts no conclaves refuses one as beyond it: the scope's
// entry settles refused (L5016), its body runs no step and the run is held (L5025); a resume on
// a host that hosts them opens it afresh and completes.
func TestConclaveRefused(t *testing.T) {
	src := "const a = await spawn(\"a\")\nconst said = await conclave([a], async (ch) => { await sleep(\"1m\", { name: \"talk\" }); return ch.channel }, { name: \"room\", channel: \"design\" })\nlog(said)"
	held := runSim(t, src, `{}`, RunOptions{RunID: "held", Handler: noConclaves{sim(t, `{}`)}})
	last := held.Entries[len(held.Entries)-1]
	if f, ok := held.Err.(*Fault); !ok || f.Code != "L5025" || last.Kind != "conclave" || last.Status != StatusRefused || last.Error.Code != "L5016" || last.Closed != nil || len(held.Entries) != 2 {
		t.Fatalf("a conclave on a host with none: %v %s", held.Err, marshalEntries(held.Entries))
	}
	healed := runSim(t, src, `{}`, RunOptions{RunID: "held", Pins: &held.Pins, Journal: held.Entries})
	if healed.Err != nil || logsJSON(healed) != `[["design"]]` {
		t.Errorf("the resume on a host that hosts conclaves: %v %s %s", healed.Err, marshalEntries(healed.Entries), logsJSON(healed))
	}
}

// unopenable is the simulator on a host that cannot open a conclave: its members' grants do
// not cover the channel, say.
type unopenable struct{ noConclaves }

func (unopenable) OpenConclave(context.Context, *Request) (string, error) {
	return "", errors.New("a member may not post on it")
}

func (unopenable) CloseConclave(context.Context, *Request, string) error { return nil }

// TestConclaveNotOpened: a conclave its host cannot open is a failed effect the program
// catches, with the host's reason: the scope settles failed with it, and its body runs nothing.
func TestConclaveNotOpened(t *testing.T) {
	src := "const a = await spawn(\"a\")\ntry {\n  await conclave([a], async (ch) => await sleep(\"1m\", { name: \"talk\" }), { name: \"room\" })\n} catch (e) {\n  log(e.code, e.kind, e.message)\n}"
	res := runSim(t, src, `{}`, RunOptions{RunID: "shut", Handler: unopenable{noConclaves{sim(t, `{}`)}}})
	last := res.Entries[len(res.Entries)-1]
	if res.Err != nil || last.Kind != "conclave" || last.Status != StatusFailed || last.Error.Code != "L4000" || len(res.Entries) != 2 {
		t.Fatalf("a conclave not opened: %v %s", res.Err, marshalEntries(res.Entries))
	}
	if got := logsJSON(res); got != `[["L4000","handler-fault","the conclave could not be opened: a member may not post on it"]]` {
		t.Errorf("what the program caught: %s", got)
	}
}

// TestConcurrency: under the simulator branches run concurrently on one virtual clock, each
// accumulating its own time: a race is won by the arm that lands first and its loser's effect is
// cut (settled cancelled); parallel branches overlap; a fanOut's failure cancels its siblings;
// and the same program gives the same journal every time.
func TestConcurrency(t *testing.T) {
	src := `const first = await race({ slow: () => sleep("1h"), fast: () => sleep("1m") }, { name: "first" })
const both = await parallel({ a: () => sleep("1m"), b: () => sleep("2m") }, { name: "both" })
let caught = null
try {
  await fanOut([{ id: "bad" }, { id: "long" }], async (it) => {
    if (it.id === "bad") { await sleep("1s"); assert(false, "bad item") }
    await sleep("1h")
    return it.id
  }, { name: "each" })
} catch (e) { caught = e.code }
log(first.index, now(), caught)`
	zero := int64(0)
	r := runSim(t, src, "", RunOptions{StartedAt: &zero})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	status := map[string]string{}
	ended := map[string]int64{}
	for _, e := range r.Entries {
		status[e.Key()] = e.Status
		if e.EndedAt != nil {
			ended[e.Key()] = *e.EndedAt
		}
	}
	for key, want := range map[string]string{"/race:first#0/b:slow/sleep#0": StatusCanceled, "/race:first#0/b:fast/sleep#0": StatusOK,
		"/fanOut:each#0/b:long/sleep#0": StatusCanceled, "/fanOut:each#0": StatusFailed} {
		if status[key] != want {
			t.Errorf("%s: %q, want %q", key, status[key], want)
		}
	}
	if ended["/parallel:both#0"] != 180000 || ended["/parallel:both#0/b:a/sleep#0"] != 120000 {
		t.Errorf("the parallel's clocks: %v", ended)
	}
	if got := logsJSON(r); got != `[["fast",181000,"L4012"]]` {
		t.Errorf("logs %s", got)
	}
	again := runSim(t, src, "", RunOptions{StartedAt: &zero})
	if string(marshalEntries(again.Entries)) != string(marshalEntries(r.Entries)) {
		t.Errorf("the same program journalled differently:\n%s\n%s", marshalEntries(again.Entries), marshalEntries(r.Entries))
	}
	resumed := runSim(t, src, "", RunOptions{Pins: &r.Pins, Journal: r.Entries, RunID: r.RunID})
	if resumed.Err != nil || logsJSON(resumed) != logsJSON(r) {
		t.Errorf("the resume: %v %s", resumed.Err, logsJSON(resumed))
	}
}

// TestSimFaults: a scripted fault fails the step it names, by full key or last segment, with
// L4002 unless it names a code; the entry records the failure and a bad fault is refused.
func TestSimFaults(t *testing.T) {
	src := "const a = await spawn(\"coder\")\ntry { await turn(a, { name: \"build\" }) } catch (e) { log(e.code, e.kind, e.message) }\n" +
		"await parallel({ x: async () => await sleep(\"1m\", { name: \"nap\" }) }, { name: \"p\" })"
	r := runSim(t, src, `{"faults": [{"at": "turn:build#0", "kind": "agent-down"}, {"at": "/parallel:p#0/b:x/sleep:nap#0", "kind": "host", "code": "L4025"}]}`, RunOptions{})
	if th, ok := r.Err.(*Thrown); !ok || th.Code() != "L4025" {
		t.Fatalf("the parallel's fault: %v", r.Err)
	}
	if got := logsJSON(r); got != `[["L4002","agent-down","simulated agent-down at /turn:build#0"]]` {
		t.Errorf("logs %s", got)
	}
	if e := r.Entries[1]; e.Status != StatusFailed || e.Error == nil || e.Error.Code != "L4002" {
		t.Errorf("the turn's entry: %+v", e)
	}
	for _, bad := range []string{`{"faults": [{"kind": "x"}]}`, `{"faults": [{"at": "turn:a#0"}]}`, `{"faults": [{"at": "turn:a#0", "kind": "x", "code": "4002"}]}`} {
		var s Script
		if err := json.Unmarshal([]byte(bad), &s); err != nil {
			t.Fatal(err)
		}
		if _, err := NewSim(s); err == nil {
			t.Errorf("NewSim took %s", bad)
		}
	}
}

// TestBranchDigest: a decided race records the digest of its losing arms as the reference's
// parser shapes them; the vectors in testdata/digest were computed with acorn 8 (ECMAScript
// 2023, module) and json-canonicalize. A resume of an edited losing arm diverges at the race
// (L5001); a reformat does not; a race over an array of arms records none.
func TestBranchDigest(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "digest", "*.js"))
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	raceEntry := func(r *Result) *Entry {
		for i := range r.Entries {
			if r.Entries[i].Kind == "race" {
				return &r.Entries[i]
			}
		}
		t.Fatal("no race entry")
		return nil
	}
	for _, file := range files {
		raw, _ := os.ReadFile(file)
		first, _, _ := strings.Cut(string(raw), "\n")
		r := runSim(t, string(raw), "", RunOptions{RunID: "d", StartedAt: new(int64)}) // the simulator's origin
		if r.Err != nil {
			t.Fatalf("%s: %v", file, r.Err)
		}
		if got := raceEntry(r).BranchDigest; "// digest: "+got != first {
			t.Errorf("%s: %s (losers %v)", file, got, raceEntry(r).Cancel)
		}
	}
	src := "const out = await race({\n  quick: () => sleep(\"1m\"),\n  slow: async () => { await sleep(\"1h\"); return 1 },\n}, { name: \"pick\" })\nlog(out.index)"
	rec := runSim(t, src, "", RunOptions{RunID: "d", StartedAt: new(int64)})
	resume := func(src string) error {
		r := runSim(t, src, "", RunOptions{RunID: "d", Pins: &rec.Pins, Journal: rec.Entries})
		return r.Err
	}
	if err := resume("// reformatted\nconst out = await race({ quick: () => sleep(\"1m\"), slow: async () => {\n await sleep(\"1h\")\n return 1\n} }, { name: \"pick\" })\nlog(out.index)"); err != nil {
		t.Errorf("a reformat: %v", err)
	}
	err := resume(strings.Replace(src, "return 1", "return 2", 1))
	if f, ok := err.(*Fault); !ok || f.Code != "L5001" || f.Step != "/race:pick#0" {
		t.Errorf("an edited losing arm: %v", err)
	}
	m, err := Migrate(t.Context(), strings.Replace(src, "return 1", "return 2", 1), Recorded{RunID: "d", Pins: rec.Pins, Entries: rec.Entries}, MigrateOptions{})
	if err != nil || m.Accepted || len(m.Rejections) != 1 || m.Rejections[0].Code != "L5001" {
		t.Errorf("a migration onto an edited losing arm: %+v %v", m, err)
	}
	arr := runSim(t, "await race([() => sleep(\"1m\"), () => sleep(\"1h\")])", "", RunOptions{})
	if d := raceEntry(arr).BranchDigest; d != "" {
		t.Errorf("an array of arms recorded %s", d)
	}
}

// TestSpawnPlacement: a placement pins a spawn to one manager instance and is in its input hash;
// a spawn without one keeps the hash it had before placements existed.
func TestSpawnPlacement(t *testing.T) {
	plain := runSim(t, `await spawn("coder")`, "", RunOptions{})
	pinned := runSim(t, `await spawn("coder", { placement: { endpoint: "manager", instanceId: "m-1" } })`, "", RunOptions{})
	if plain.Err != nil || pinned.Err != nil || plain.Entries[0].InputHash == pinned.Entries[0].InputHash {
		t.Fatalf("%v %v %+v", plain.Err, pinned.Err, pinned.Entries)
	}
	want, _ := digest(projection("persona", "coder", "model", nil, "variant", nil, "worktree", nil, "role", nil, "join", &Array{}))
	if plain.Entries[0].InputHash != want {
		t.Errorf("a spawn without a placement hashes %s, want %s", plain.Entries[0].InputHash, want)
	}
	for _, bad := range []string{`null`, `[]`, `{}`, `{ endpoint: "manager", instanceId: "" }`, `"manager"`} {
		r := runSim(t, `await spawn("coder", { placement: `+bad+` })`, "", RunOptions{})
		if th, ok := r.Err.(*Thrown); !ok || th.Code() != "L3048" || len(r.Entries) != 0 {
			t.Errorf("placement %s: %v", bad, r.Err)
		}
	}
}

// TestCancelledScope: a scope inside a losing arm is cut with it: it settles cancelled (a
// conclave's membership is not recorded closed), its arm is no candidate, and a resume of a race
// the run died inside replays the same decision.
func TestCancelledScope(t *testing.T) {
	src := `const a = await spawn("a")
const out = await race({
  quick: () => sleep("1m"),
  slow: async () => await parallel({ x: () => sleep("1h"), y: () => sleep("2h") }, { name: "inner" }),
  talk: async () => await conclave([a], async (ch) => await sleep("3h", { name: "chat" }), { name: "room" }),
}, { name: "pick" })
log(out.index)`
	rec := runSim(t, src, "", RunOptions{RunID: "c", StartedAt: new(int64)})
	if rec.Err != nil || logsJSON(rec) != `[["quick"]]` {
		t.Fatalf("%v %s", rec.Err, logsJSON(rec))
	}
	byKind := map[string]Entry{}
	for _, e := range rec.Entries {
		byKind[e.Kind] = e
	}
	if e := byKind["parallel"]; e.State != StateSettled || e.Status != StatusCanceled {
		t.Errorf("the cut parallel: %+v", e)
	}
	if e := byKind["conclave"]; e.Status != StatusCanceled || e.Closed == nil || *e.Closed {
		t.Errorf("the cut conclave: %+v", e)
	}
	// The run died after the arms settled and before the race did.
	journal := slices.Clone(rec.Entries)
	for i, e := range journal {
		if e.Kind == "race" {
			journal[i] = Entry{V: 1, Seq: e.Seq, Run: e.Run, Scope: e.Scope, Kind: e.Kind, Name: e.Name, InputHash: e.InputHash, State: StatePending, StartedAt: e.StartedAt}
		}
	}
	again := runSim(t, src, "", RunOptions{RunID: "c", Pins: &rec.Pins, Journal: journal})
	if again.Err != nil || logsJSON(again) != `[["quick"]]` {
		t.Errorf("the resumed race: %v %s", again.Err, logsJSON(again))
	}
}

// clockedHandler answers a sleep named "early" after a while of real time and any other at once,
// each stamping the clock its name gives: the early one lands after "late" but ends before it.
type clockedHandler struct{ now atomic.Int64 }

func (h *clockedHandler) Now() int64 { return h.now.Load() }

func (h *clockedHandler) Perform(_ context.Context, req *Request) (*Outcome, error) {
	if req.Name == "early" {
		time.Sleep(30 * time.Millisecond)
	}
	h.now.Store(map[string]int64{"early": 100, "late": 200, "later": 300}[req.Name])
	return &Outcome{}, nil
}

// TestLoserCutInPureWork: under a live handler, an arm looping in pure work yields at its yield
// points; once another arm settles earlier, the looping arm can no longer win and is cut there,
// where without the yield point it would run to its step budget.
func TestLoserCutInPureWork(t *testing.T) {
	src := `const out = await race({
  a: async () => { await sleep("1m", { name: "early" }); return "a" },
  b: async () => { await sleep("1m", { name: "late" }); while (true) { } },
}, { name: "pick" })
log(out.index)`
	r := runSim(t, src, "", RunOptions{RunID: "y", Handler: &clockedHandler{}, StepBudget: 50_000_000, StartedAt: new(int64)})
	if r.Err != nil || logsJSON(r) != `[["a"]]` {
		t.Fatalf("%v %s", r.Err, logsJSON(r))
	}
	// An arm that could still win is not cut: it runs to the step budget.
	src = strings.Replace(src, `return "a"`, `await sleep("1m", { name: "later" }); return "a"`, 1)
	start := time.Now()
	r = runSim(t, src, "", RunOptions{RunID: "y", Handler: &clockedHandler{}, StepBudget: 5_000_000, StartedAt: new(int64)})
	if f, ok := r.Err.(*Fault); !ok || f.Code != "L4013" || time.Since(start) < 30*time.Millisecond {
		t.Errorf("an arm that could still win: %v after %v", r.Err, time.Since(start))
	}
}
