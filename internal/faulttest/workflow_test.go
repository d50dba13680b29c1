package faulttest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/meshtest"
)

// workflowTeam is a run with two agent: cotal agents, a race won by a turn, a checkpoint, and a
// fanOut of five turns, paced by sleeps of up to 4 s so the scope is in flight for a while.
const workflowTeam = `const a = await spawn("builder")
const b = await spawn("reviewer")
const first = await race({
  build: async () => await turn(a, { name: "build", deadline: "2m" }),
  giveUp: async () => await sleep("10m", { name: "give-up" }),
}, { name: "first" })
const ok = await checkpoint("approve", "Ship the release?")
const reviews = await fanOut([{ id: "r1", pace: "100ms" }, { id: "r2", pace: "1s" }, { id: "r3", pace: "2s" }, { id: "r4", pace: "3s" }, { id: "r5", pace: "4s" }], async (item) => {
  await sleep(item.pace, { name: "pace" })
  return await turn(b, { name: "review", deadline: "2m" })
}, { name: "reviews" })
log(first.index, ok.value, reviews.length)
`

// TestWorkflowRunManagerKilled kills `cotal up`, which hosts the run's manager, with SIGKILL at
// each of several points of a run (right after it starts, before an agent's spawn settles, in
// the middle of an agent's turn, at its pause, right after the answer, in the middle of its
// fanOut) and brings it up again on the
// same directory and port: the manager takes the run back from its journal and it completes.
// The journal writes each spawn and each turn pending once, and holds one activation per host
// incarnation; the agents the killed manager ran go with it, and a turn asks its agent's
// persona again (the turn cut in the middle is asked again under the same goal). The agents' own
// logs agree: each turn was yielded once.
func TestWorkflowRunManagerKilled(t *testing.T) {
	meshtest.Long(t, "kills and restarts real processes")
	t.Parallel()
	for _, point := range []string{"started", "spawning", "turn", "pause", "answered", "scope"} {
		t.Run(point, func(t *testing.T) { runKilledAt(t, point) })
	}
}

func runKilledAt(t *testing.T, point string) {
	ctx := bounded(t, 3*time.Minute)
	m := startMesh(t)
	agents := filepath.Join(m.root, ".cotal", "agents")
	if err := os.MkdirAll(agents, 0o700); err != nil {
		t.Fatal(err)
	}
	// The builder's turn takes six seconds, and the reviewer six to start (a spawn settles once
	// its agent is present): the time to see either under way and kill their manager then.
	for name, hint := range map[string]string{"builder": "turnTakes: 6s\n", "reviewer": "startTakes: 6s\n"} {
		if err := os.WriteFile(filepath.Join(agents, name+".md"), []byte("---\nname: "+name+"\nagent: cotal\n"+hint+"---\nYou are the "+name+".\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	prog := filepath.Join(m.root, "team.cotal.js")
	if err := os.WriteFile(prog, []byte(workflowTeam), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := m.cotal(ctx, "run", "start", "--file", prog, "--json", "--dir", m.root)
	var started struct {
		RunID string `json:"runId"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &started) != nil {
		t.Fatalf("run start: exit %d %q %s", code, out, stderr)
	}
	journal := func() string {
		_, out, _ := m.cotal(ctx, "run", "journal", started.RunID, "--dir", m.root)
		return out
	}
	asking := func() bool { return strings.Contains(journal(), "asks        Ship the release?") }
	answer := func() {
		t.Helper()
		if !waitFor(ctx, 200*time.Millisecond, asking) {
			t.Fatalf("the run never reached its checkpoint:\n%s", journal())
		}
		if code, _, stderr := m.cotal(ctx, "run", "answer", started.RunID, "/checkpoint:approve#0", "--value", `"yes"`, "--dir", m.root); code != 0 {
			t.Fatalf("answer: exit %d %s", code, stderr)
		}
	}
	switch point {
	case "spawning":
		spawning := func() bool {
			j := journal()
			return strings.Contains(j, "/spawn:reviewer#0  pending") && !strings.Contains(j, "/spawn:reviewer#0  ok")
		}
		if !waitFor(ctx, 50*time.Millisecond, spawning) {
			t.Fatalf("the run never was in the middle of the reviewer's spawn:\n%s", journal())
		}
	case "turn":
		midTurn := func() bool {
			j := journal()
			return strings.Contains(j, "/race:first#0/b:build/turn:build#0  pending") && !strings.Contains(j, "/race:first#0/b:build/turn:build#0  ok")
		}
		if !waitFor(ctx, 50*time.Millisecond, midTurn) {
			t.Fatalf("the run never was in the middle of the builder's turn:\n%s", journal())
		}
	case "pause":
		if !waitFor(ctx, 100*time.Millisecond, asking) {
			t.Fatalf("the run never reached its checkpoint:\n%s", journal())
		}
	case "answered":
		answer()
	case "scope":
		answer()
		inScope := func() bool {
			j := journal()
			return strings.Contains(j, "/fanOut:reviews#0/b:r1/turn:review#0  ok") && !strings.Contains(j, "/fanOut:reviews#0  ok")
		}
		if !waitFor(ctx, 50*time.Millisecond, inScope) {
			t.Fatalf("the run never was in the middle of its fanOut:\n%s", journal())
		}
	}
	m.kill()
	m.restart()
	if point == "started" || point == "spawning" || point == "turn" || point == "pause" {
		answer()
	}
	var state string
	ended := func() bool {
		_, out, _ := m.cotal(ctx, "run", "ps", "--json", "--dir", m.root)
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var row struct{ RunID, State string }
			if json.Unmarshal([]byte(line), &row) == nil && row.RunID == started.RunID {
				state = row.State
			}
		}
		return state == "completed" || state == "failed" || state == "released"
	}
	if !waitFor(ctx, 300*time.Millisecond, ended) || state != "completed" {
		t.Fatalf("the run ended %q:\n%s\nmesh log:\n%s", state, journal(), m.logTail(m.runs))
	}
	j := journal()
	steps := []string{"/spawn:builder#0", "/spawn:reviewer#0", "/race:first#0/b:build/turn:build#0", "/checkpoint:approve#0"}
	for _, r := range []string{"r1", "r2", "r3", "r4", "r5"} {
		steps = append(steps, "/fanOut:reviews#0/b:"+r+"/turn:review#0")
	}
	for _, step := range steps {
		if n := strings.Count(j, step+"  pending"); n != 1 {
			t.Errorf("%s written pending %d times:\n%s", step, n, j)
		}
	}
	if n := strings.Count(j, "activation"); n != 2 {
		t.Errorf("%d activations, want one per incarnation:\n%s", n, j)
	}
	// The agents' own logs agree: each of the six turns was yielded once, whichever incarnation
	// of its agent took it.
	yields := map[string]int{}
	logs, _ := filepath.Glob(filepath.Join(m.root, ".cotal", "logs", "main", "*.log"))
	for _, path := range logs {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if goal, ok := strings.CutSuffix(strings.TrimSpace(line), ": done"); ok && strings.HasPrefix(goal, "turn ") {
				yields[goal]++
			}
		}
	}
	if len(yields) != len(steps)-3 {
		t.Errorf("the agents' logs yield %d turns, want %d: %v", len(yields), len(steps)-3, yields)
	}
	for goal, n := range yields {
		if n != 1 {
			t.Errorf("%s yielded %d times in the agents' logs", goal, n)
		}
	}
}
