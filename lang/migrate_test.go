package lang

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

const migrated = `const a = await spawn("a")
await sleep("1m", { name: "nap" })
const r = await turn(a, { name: "work" })
await notify([a], { decision: "work", outcome: "done" })
const ok = await checkpoint("ship", "Ship it?", { timeout: "1h", onExpiry: "proceed" })
log(r.status, ok.status)`

func recorded(t *testing.T, src, script string) Recorded {
	t.Helper()
	r := runSim(t, src, script, RunOptions{RunID: "m1"})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	return Recorded{RunID: "m1", Pins: r.Pins, Entries: r.Entries}
}

// TestMigrate: an edit that keeps every recorded step is accepted; one that changes a step's
// inputs is rejected with L5001 naming it; removed steps are judged by the orphan table.
func TestMigrate(t *testing.T) {
	script := `{"turns": {"work": {"status": "done"}}, "checkpoints": {"ship": {"status": "resolved", "value": true}}}`
	rec := recorded(t, migrated, script)
	m, err := Migrate(t.Context(), migrated+"\nlog(\"more\")", rec, MigrateOptions{})
	if err != nil || !m.Accepted || len(m.Reached) != 5 || len(m.Orphans) != 0 || m.ID == "" {
		t.Fatalf("an unchanged history: %+v %v", m, err)
	}
	again, _ := Migrate(t.Context(), migrated+"\nlog(\"more\")", rec, MigrateOptions{})
	if again.ID != m.ID {
		t.Errorf("the same walk filed another id: %s %s", again.ID, m.ID)
	}
	m, _ = Migrate(t.Context(), strings.Replace(migrated, `"1m"`, `"2m"`, 1), rec, MigrateOptions{})
	if m.Accepted || len(m.Rejections) != 1 || m.Rejections[0].Code != "L5001" || m.Rejections[0].Step != "/sleep:nap#0" {
		t.Errorf("an edited sleep: %+v", m)
	}
	// Everything after the spawn removed: the sleep is ignored, the turn kept, the notice and
	// the resolved checkpoint rejected.
	m, _ = Migrate(t.Context(), `const a = await spawn("a")`, rec, MigrateOptions{})
	verdicts := map[string]string{}
	for _, o := range m.Orphans {
		verdicts[o.Step] = o.Verdict + " " + o.Code
	}
	want := map[string]string{"/sleep:nap#0": "ignored ", "/turn:work#0": "kept ", "/notify#0": "rejected L5013", "/checkpoint:ship#0": "rejected L5004"}
	for k, v := range want {
		if verdicts[k] != v {
			t.Errorf("orphan %s: %q, want %q", k, verdicts[k], v)
		}
	}
	if m.Accepted {
		t.Error("a migration with rejected orphans was accepted")
	}
	m, _ = Migrate(t.Context(), `log("nothing")`, rec, MigrateOptions{Release: []string{"/spawn:a#0"}, Discard: []string{"/checkpoint:ship#0"}})
	for _, o := range m.Orphans {
		if o.Step == "/spawn:a#0" && o.Verdict != VerdictIgnored || o.Step == "/checkpoint:ship#0" && o.Verdict != VerdictIgnored {
			t.Errorf("an override: %+v", o)
		}
	}
}

// TestMigrateScopes: a scope's recorded branch removed from the source is L5022.
func TestMigrateScopes(t *testing.T) {
	src := `await parallel({ a: () => sleep("1m"), b: () => sleep("2m") }, { name: "both" })`
	rec := recorded(t, src, "")
	if m, _ := Migrate(t.Context(), src, rec, MigrateOptions{}); !m.Accepted || len(m.Reached) != 3 {
		t.Errorf("the same scope: %+v", m)
	}
	m, _ := Migrate(t.Context(), `await parallel({ a: () => sleep("1m") }, { name: "both" })`, rec, MigrateOptions{})
	if m.Accepted || len(m.Rejections) == 0 || m.Rejections[0].Code != "L5022" {
		t.Errorf("a removed branch: %+v", m)
	}
}

// TestFork: a fork copies the prefix before the cut under the parent's pins, for the child's id;
// a resume of the child performs the cut step again. A cut outside the journal is L5017, one in a
// race's losing arm L5020.
func TestFork(t *testing.T) {
	src := `await sleep("1m", { name: "a" })
await sleep("2m", { name: "b" })
const w = await race({ slow: () => sleep("1h"), fast: () => sleep("1m") }, { name: "r" })
await sleep("3m", { name: "c" })`
	rec := recorded(t, src, "")
	child, err := Fork(t.Context(), src, rec, "/sleep:b#0", "m2")
	if err != nil || len(child) != 1 || child[0].Key() != "/sleep:a#0" || child[0].Run != "m2" {
		t.Fatalf("fork: %+v %v", child, err)
	}
	r := runSim(t, src, "", RunOptions{RunID: "m2", Pins: &rec.Pins, Journal: child})
	if r.Err != nil || len(r.Entries) != len(rec.Entries) {
		t.Errorf("the child's resume: %v %d entries", r.Err, len(r.Entries))
	}
	if _, err := Fork(t.Context(), src, rec, "/sleep:zz#0", "m3"); err == nil || !strings.Contains(err.Error(), "L5017") {
		t.Errorf("a cut not in the journal: %v", err)
	}
	if _, err := Fork(t.Context(), src, rec, "/race:r#0/b:fast/sleep#0", "m3"); err == nil || !strings.Contains(err.Error(), "L5020") {
		t.Errorf("a cut in a losing arm: %v", err)
	}
}

// TestDurabilityRefusals: each journal and pin refusal a resume, a migration or a fork raises,
// with its code.
func TestDurabilityRefusals(t *testing.T) {
	src := "const a = await spawn(\"a\")\nawait conclave([a], async (ch) => await sleep(\"1m\", { name: \"talk\" }), { name: \"room\" })\nif (false) { await sleep(\"1m\", { name: \"never\" }) }"
	rec := recorded(t, src, "")
	faultCode := func(err error) string {
		if f, ok := err.(*Fault); ok {
			return f.Code
		}
		return fmt.Sprint(err)
	}
	resume := func(o RunOptions) string {
		o.RunID, o.Handler = "m1", sim(t, "")
		if o.Journal == nil {
			o.Journal = rec.Entries
		}
		r, err := Run(t.Context(), src, o)
		if err != nil {
			return faultCode(err)
		}
		return faultCode(r.Err)
	}
	if got := resume(RunOptions{}); got != "L5021" {
		t.Errorf("a journal without pins: %s, want L5021", got)
	}
	if got := resume(RunOptions{Pins: &rec.Pins, Seed: "other"}); got != "L5009" {
		t.Errorf("another seed: %s, want L5009", got)
	}
	for _, result := range []string{`{"agent":"sim.a","__proto__":1}`, `{"agent":"sim.a","n":1e400}`} {
		bad := slices.Clone(rec.Entries)
		bad[0].Result = json.RawMessage(result)
		if got := resume(RunOptions{Pins: &rec.Pins, Journal: bad}); got != "L5024" {
			t.Errorf("the result %s: %s, want L5024", result, got)
		}
	}

	// Orphans: the spawn (L5003) and the conclave, once its membership is recorded open (L5014);
	// an entry of a kind with no policy (L5015).
	open := slices.Clone(rec.Entries)
	for i, e := range open {
		if e.Kind == "conclave" {
			no := false
			open[i].Closed = &no
		}
	}
	open = append(open, Entry{V: 1, Seq: 99, Run: "m1", Scope: "", Kind: "teleport", Name: "x", InputHash: "sha256:00", State: StateSettled, Status: StatusOK})
	m, err := Migrate(t.Context(), `log("nothing")`, Recorded{RunID: "m1", Pins: rec.Pins, Entries: open}, MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]string{}
	for _, o := range m.Orphans {
		codes[o.Kind] = o.Code
	}
	if codes["spawn"] != "L5003" || codes["conclave"] != "L5014" || codes["teleport"] != "L5015" || m.Accepted {
		t.Errorf("orphans %+v", m.Orphans)
	}

	// A fork's cut the parent's own path does not reach: the recorded sleep inside the conclave,
	// walked by a program that no longer opens it.
	if _, err := Fork(t.Context(), "const a = await spawn(\"a\")", rec, "/conclave:room#0/b:in/sleep:talk#0", "m2"); faultCode(err) != "L5018" {
		t.Errorf("a cut never reached: %v, want L5018", err)
	}
}
