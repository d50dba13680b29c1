package run_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocotal/cotal/internal/cli"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
)

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	io, _, out, errOut := iostreams.Test()
	code := cli.Main(t.Context(), io, args)
	return code, out.String(), errOut.String()
}

// TestRunCheck: `cotal run check` prints ok and exits 0 for an accepted program; for a refused
// one it prints FILE:LINE:COL: CODE message per refusal and exits 1; --json prints the report;
// a missing file is a usage error.
func TestRunCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.js")
	bad := filepath.Join(dir, "bad.js")
	os.WriteFile(good, []byte("const x = await sleep(\"1m\")\nlog(x)\n"), 0o600)
	os.WriteFile(bad, []byte("var a = 1\nconst b = a == 2\n"), 0o600)

	if code, out, _ := run(t, "run", "check", good); code != exit.OK || out != "ok\n" {
		t.Errorf("check good: exit %d %q", code, out)
	}
	code, out, _ := run(t, "run", "check", bad)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exit.Failed || len(lines) != 2 || !strings.HasPrefix(lines[0], bad+":1:1: L1003 ") || !strings.HasPrefix(lines[1], bad+":2:13: L1025 ") {
		t.Errorf("check bad: exit %d %q", code, out)
	}
	code, out, _ = run(t, "run", "check", "--json", bad)
	var r struct {
		Accepted    bool `json:"accepted"`
		Diagnostics []struct {
			Code         string `json:"code"`
			Line, Column int
			Message      string `json:"message"`
		} `json:"diagnostics"`
	}
	if code != exit.Failed || json.Unmarshal([]byte(out), &r) != nil || r.Accepted || len(r.Diagnostics) != 2 || r.Diagnostics[1].Code != "L1025" || r.Diagnostics[1].Column != 13 {
		t.Errorf("check --json bad: exit %d %s", code, out)
	}
	if code, out, _ := run(t, "run", "check", "--json", good); code != exit.OK || !strings.Contains(out, `"accepted":true,"diagnostics":[]`) {
		t.Errorf("check --json good: exit %d %s", code, out)
	}
	if code, _, stderr := run(t, "run", "check", filepath.Join(dir, "missing.js")); code != exit.Usage || !strings.Contains(stderr, "missing.js") {
		t.Errorf("check a missing file: exit %d %s", code, stderr)
	}
	binary := filepath.Join(dir, "binary.js")
	os.WriteFile(binary, []byte{0xff, 0xfe, 0x00}, 0o600)
	if code, _, stderr := run(t, "run", "check", binary); code != exit.Usage || !strings.Contains(stderr, "not UTF-8") {
		t.Errorf("check a binary file: exit %d %s", code, stderr)
	}
}

// TestRunSimAndPlan: `cotal run sim` runs a program under the simulator and prints the
// recorded run with --json; --journal resumes from it with the same entries, and refuses an
// edited step (L5001); `cotal run plan` prints the plan. An unscripted effect fails the run.
func TestRunSimAndPlan(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog.js")
	script := filepath.Join(dir, "script.json")
	os.WriteFile(prog, []byte("const b = await spawn(\"builder\", { worktree: \"wt-1\" })\nconst r = await turn(b, { name: \"build\" })\nawait sleep(\"1m\", { name: \"rest\" })\nlog(\"built\", r.status)\n"), 0o600)
	os.WriteFile(script, []byte(`{"turns": {"build": {"status": "done"}}}`), 0o600)

	code, out, stderr := run(t, "run", "sim", prog, "--script", script, "--json", "--run-id", "r-1", "--seed", "s", "--started-at", "1700000000000")
	var rec struct {
		LanguageVersion string
		RunID           string
		Pins            struct{ Seed string }
		Entries         []struct {
			Scope, Kind, Name, InputHash, RequestID, Status string
		}
		Logs  []json.RawMessage
		Value json.RawMessage
	}
	if code != exit.OK || json.Unmarshal([]byte(out), &rec) != nil || rec.RunID != "r-1" || rec.Pins.Seed != "s" || rec.LanguageVersion != "2" ||
		len(rec.Entries) != 3 || rec.Entries[1].Kind != "turn" || rec.Entries[1].Status != "ok" || len(rec.Logs) != 1 || !sameJSON(rec.Logs[0], `["built","done"]`) {
		t.Fatalf("sim --json: exit %d %s %s", code, out, stderr)
	}
	record := filepath.Join(dir, "record.json")
	os.WriteFile(record, []byte(out), 0o600)
	code, again, stderr := run(t, "run", "sim", prog, "--journal", record, "--json")
	if code != exit.OK || !strings.Contains(again, `"requestId": "`+rec.Entries[1].RequestID+`"`) {
		t.Errorf("sim --journal: exit %d %s %s", code, again, stderr)
	}
	edited := filepath.Join(dir, "edited.js")
	os.WriteFile(edited, []byte(strings.Replace("const b = await spawn(\"builder\", { worktree: \"wt-1\" })\nconst r = await turn(b, { name: \"build\" })\nawait sleep(\"1m\", { name: \"rest\" })\nlog(\"built\", r.status)\n", "\"1m\"", "\"2m\"", 1)), 0o600)
	if code, _, stderr := run(t, "run", "sim", edited, "--journal", record); code != exit.Failed || !strings.Contains(stderr, "L5001") {
		t.Errorf("sim --journal of an edited step: exit %d %s", code, stderr)
	}
	if code, out, stderr := run(t, "run", "sim", prog); code != exit.Failed || !strings.Contains(stderr, "L6001") || !strings.Contains(out, "failed") {
		t.Errorf("sim without a script: exit %d %s %s", code, out, stderr)
	}
	code, out, stderr = run(t, "run", "plan", prog, "--script", script)
	if code != exit.OK || !strings.Contains(out, "Dry run: 3 effects, 1 agents") || !strings.Contains(out, "builder worktree wt-1") || !strings.Contains(out, "/turn:build#0") {
		t.Errorf("plan: exit %d %s %s", code, out, stderr)
	}
	if code, out, _ := run(t, "run", "plan", prog, "--script", script, "--json"); code != exit.OK || !strings.Contains(out, `"elapsedMs": 360000`) {
		t.Errorf("plan --json: exit %d %s", code, out)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"turns": 1}`), 0o600)
	if code, _, stderr := run(t, "run", "sim", prog, "--script", bad); code != exit.Usage || !strings.Contains(stderr, "bad.json") {
		t.Errorf("a bad script: exit %d %s", code, stderr)
	}
}

// sameJSON reports whether raw is the JSON value want, whatever its spacing.
func sameJSON(raw json.RawMessage, want string) bool {
	var b bytes.Buffer
	return json.Compact(&b, raw) == nil && b.String() == want
}
