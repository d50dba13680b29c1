package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

const approveProgram = `const ok = await checkpoint("approve", "Ship the release?", { timeout: "1h" })
await sleep("200ms", { name: "settle" })
log("answered", ok.value)
`

// runState returns run id's state as `cotal run ps --json` prints it.
func runState(t *testing.T, dir, id string) string {
	t.Helper()
	code, out, stderr := run(t, "run", "ps", "--json", "--dir", dir)
	if code != exit.OK {
		t.Fatalf("run ps: exit %d %s", code, stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var row struct {
			RunID string `json:"runId"`
			State string `json:"state"`
		}
		if json.Unmarshal([]byte(line), &row) == nil && row.RunID == id {
			return row.State
		}
	}
	return ""
}

// awaitQuestion waits until `cotal run journal` shows run id's open checkpoint question.
func awaitQuestion(t *testing.T, dir, id string) string {
	t.Helper()
	var out string
	meshtest.Eventually(t, 20*time.Second, "the open checkpoint in the journal", func() bool {
		_, out, _ = run(t, "run", "journal", id, "--dir", dir)
		return strings.Contains(out, "asks        Ship the release?")
	})
	return out
}

// startRestartAnswer brings a mesh up in dir, starts prog there and waits for its question,
// stops the mesh and brings it up again (until the test ends), waits for the question again and
// answers it; it returns the run's id.
func startRestartAnswer(t *testing.T, dir, prog string) string {
	t.Helper()
	up := func() (context.CancelFunc, chan int) {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan int, 1)
		upIO, _, _, _ := iostreams.Test()
		go func() { done <- Main(ctx, upIO, []string{"up", "--dir", dir, "--port", "0"}) }()
		waitUp(t, dir, done)
		return cancel, done
	}
	stop, done := up()
	code, out, stderr := run(t, "run", "start", "--file", prog, "--json", "--dir", dir)
	var started struct {
		RunID string `json:"runId"`
	}
	if code != exit.OK || json.Unmarshal([]byte(out), &started) != nil {
		t.Fatalf("run start: exit %d %q %s", code, out, stderr)
	}
	awaitQuestion(t, dir, started.RunID)
	stop()
	<-done
	stop, done = up()
	t.Cleanup(func() { stop(); <-done })
	awaitQuestion(t, dir, started.RunID)
	if code, _, stderr := run(t, "run", "answer", started.RunID, "/checkpoint:approve#0", "--value", `"yes"`, "--dir", dir); code != exit.OK {
		t.Fatalf("answer after the restart: exit %d %s", code, stderr)
	}
	return started.RunID
}

// TestWorkflowRunOnTheMesh: `cotal run start` hands a program to the mesh's manager, `cotal run
// journal` shows its open checkpoint and question, `cotal run answer` resumes it, and `cotal
// run ps --json` shows it completed. A bad program and bad answers are refused with what is
// wrong.
func TestWorkflowRunOnTheMesh(t *testing.T) {
	meshtest.Long(t, "starts a mesh")
	dir := upMesh(t)
	prog := filepath.Join(t.TempDir(), "approve.cotal.js")
	os.WriteFile(prog, []byte(approveProgram), 0o600)
	bad := filepath.Join(t.TempDir(), "bad.cotal.js")
	os.WriteFile(bad, []byte("var x = 1\n"), 0o600)

	if code, out, _ := run(t, "run", "start", "--file", bad, "--dir", dir); code != exit.Failed || !strings.Contains(out, bad+":1:1: L1003") {
		t.Errorf("start a refused program: exit %d %q", code, out)
	}
	code, out, stderr := run(t, "run", "start", "--file", prog, "--json", "--dir", dir)
	var started struct {
		RunID string `json:"runId"`
	}
	if code != exit.OK || json.Unmarshal([]byte(out), &started) != nil || !strings.HasPrefix(started.RunID, "run-") {
		t.Fatalf("run start: exit %d %q %s", code, out, stderr)
	}
	id := started.RunID
	journal := awaitQuestion(t, dir, id)
	if !strings.Contains(journal, "/checkpoint:approve#0  pending") || !strings.Contains(journal, "activation  holder=") {
		t.Errorf("the journal:\n%s", journal)
	}
	if code, _, stderr := run(t, "run", "answer", id, "/checkpoint:approve#0", "--value", "yes", "--dir", dir); code != exit.Usage || !strings.Contains(stderr, "not valid JSON") {
		t.Errorf("an answer that is not JSON: exit %d %s", code, stderr)
	}
	if code, _, _ := run(t, "run", "answer", id, "/checkpoint:other#0", "--value", `"yes"`, "--dir", dir); code == exit.OK {
		t.Error("an answer to a step the run does not wait on was taken")
	}
	if code, out, stderr := run(t, "run", "answer", id, "/checkpoint:approve#0", "--value", `"yes"`, "--dir", dir); code != exit.OK || !strings.Contains(out, `"answerId"`) {
		t.Fatalf("run answer: exit %d %s %s", code, out, stderr)
	}
	meshtest.Eventually(t, 20*time.Second, "the run to complete", func() bool { return runState(t, dir, id) == "completed" })
	_, journal, _ = run(t, "run", "journal", id, "--dir", dir)
	if !strings.Contains(journal, `answered    value="yes"`) || !strings.Contains(journal, "completed") {
		t.Errorf("the journal of the completed run:\n%s", journal)
	}
	if code, _, stderr := run(t, "run", "journal", "run-none", "--dir", dir); code == exit.OK || !strings.Contains(stderr, "no such run") {
		t.Errorf("the journal of no run: exit %d %s", code, stderr)
	}

	// A migration check: the same program is accepted; one whose sleep changed is rejected there.
	if code, out, stderr := run(t, "run", "migrate", id, "--file", prog, "--dir", dir); code != exit.OK || !strings.Contains(out, "accepted") {
		t.Errorf("migrate onto the same program: exit %d %s %s", code, out, stderr)
	}
	edited := filepath.Join(t.TempDir(), "edited.cotal.js")
	os.WriteFile(edited, []byte(strings.Replace(approveProgram, `"200ms"`, `"300ms"`, 1)), 0o600)
	if code, out, _ := run(t, "run", "migrate", id, "--file", edited, "--dir", dir); code != exit.Failed || !strings.Contains(out, "rejected  /sleep:settle#0  L5001") {
		t.Errorf("migrate onto an edited sleep: exit %d %s", code, out)
	}
	// A fork before the checkpoint asks it again, in a new run that names its lineage.
	code, out, stderr = run(t, "run", "fork", id, "--at", "/checkpoint:approve#0", "--json", "--dir", dir)
	var forked struct {
		RunID string `json:"runId"`
	}
	if code != exit.OK || json.Unmarshal([]byte(out), &forked) != nil || forked.RunID == id {
		t.Fatalf("run fork: exit %d %q %s", code, out, stderr)
	}
	awaitQuestion(t, dir, forked.RunID)
	if code, _, stderr := run(t, "run", "fork", id, "--at", "/checkpoint:none#0", "--dir", dir); code == exit.OK || !strings.Contains(stderr, "L5017") {
		t.Errorf("a fork at a step not in the journal: exit %d %s", code, stderr)
	}

	// The fork, waiting on its checkpoint, is revoked: its manager stops it, and no resume takes
	// it back.
	if code, _, stderr := run(t, "run", "revoke", forked.RunID, "--reason", " ", "--dir", dir); code != exit.Usage || !strings.Contains(stderr, "--reason is empty") {
		t.Errorf("a revoke with a blank reason: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(t, "run", "revoke", "run-none", "--reason", "typo", "--dir", dir); code == exit.OK || !strings.Contains(stderr, "no such run") {
		t.Errorf("a revoke of no run: exit %d %s", code, stderr)
	}
	if code, out, stderr := run(t, "run", "revoke", forked.RunID, "--reason", "the release was pulled", "--by", "ann", "--dir", dir); code != exit.OK || !strings.Contains(out, "revoked run "+forked.RunID) {
		t.Fatalf("run revoke: exit %d %s %s", code, out, stderr)
	}
	meshtest.Eventually(t, 20*time.Second, "the revoked run to fail", func() bool { return runState(t, dir, forked.RunID) == "failed" })
	if code, _, _ := run(t, "run", "resume", forked.RunID, "--dir", dir); code == exit.OK {
		t.Error("a revoked run was resumed")
	}
	// The bare form revokes too, recording that no reason was given: the first run, still
	// recorded completed, keeps its state; its marker stands.
	if code, out, stderr := run(t, "run", "revoke", id, "--dir", dir); code != exit.OK || !strings.Contains(out, "revoked run "+id) {
		t.Errorf("cotal run revoke ID: exit %d %s %s", code, out, stderr)
	}
}

// TestWorkflowRunSurvivesARestart: a mesh stopped while its run waits on a checkpoint takes the
// run back when it comes up again; the answer given then completes it, and the journal shows the
// checkpoint written pending once.
func TestWorkflowRunSurvivesARestart(t *testing.T) {
	meshtest.Long(t, "starts a mesh twice")
	dir := t.TempDir()
	prog := filepath.Join(t.TempDir(), "approve.cotal.js")
	os.WriteFile(prog, []byte(approveProgram), 0o600)
	id := startRestartAnswer(t, dir, prog)
	meshtest.Eventually(t, 20*time.Second, "the run to complete", func() bool { return runState(t, dir, id) == "completed" })
	_, journal, _ := run(t, "run", "journal", id, "--dir", dir)
	if n := strings.Count(journal, "/checkpoint:approve#0  pending"); n != 1 || strings.Count(journal, "activation") != 2 {
		t.Errorf("after the restart, %d pending writes of the checkpoint:\n%s", n, journal)
	}
}

// writePersonas writes the agent: cotal personas builder and reviewer into the mesh's catalog.
func writePersonas(t *testing.T, dir string) {
	t.Helper()
	agents := filepath.Join(dir, ".cotal", "agents")
	if err := os.MkdirAll(agents, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, hint := range map[string]string{"builder": "", "reviewer": "onAsk: '{\"approved\": true}'\n"} {
		writeFile(t, agents, name+".md", "---\nname: "+name+"\nagent: cotal\n"+hint+"---\nYou are the "+name+".\n")
	}
}

// awaitCompleted waits until run id ends, fails the test unless it completed, and returns its
// journal.
func awaitCompleted(t *testing.T, dir, id string) string {
	t.Helper()
	var state string
	meshtest.Eventually(t, 60*time.Second, "the run to end", func() bool {
		state = runState(t, dir, id)
		return state == "completed" || state == "failed" || state == "released"
	})
	_, journal, _ := run(t, "run", "journal", id, "--dir", dir)
	if state != "completed" {
		_, ps, _ := run(t, "run", "ps", "--dir", dir)
		t.Fatalf("the run ended %s:\n%s\n%s", state, ps, journal)
	}
	return journal
}

// TestWorkflowRunWithAgents: a program spawns two agent: cotal agents from the mesh's persona
// catalog, takes a turn from each and asks the reviewer for a verdict (its persona's onAsk); the
// run completes with the yields and the value the agents gave, the
// journal shows one spawn per agent, and each agent is online once.
func TestWorkflowRunWithAgents(t *testing.T) {
	meshtest.Long(t, "a mesh running agent processes")
	t.Setenv(envRunCLI, "1") // the cotal harness is this test binary, acting as cotal
	dir := upMesh(t)
	writePersonas(t, dir)
	prog := writeFile(t, t.TempDir(), "team.cotal.js", `const a = await spawn("builder")
const b = await spawn("reviewer")
const built = await turn(a, { name: "build", deadline: "2m" })
const reviewed = await turn(b, { name: "review", deadline: "2m" })
const verdict = await ask(b, { name: "verdict", schema: { approved: "boolean" }, deadline: "2m" })
assert(verdict.approved === true, "the reviewer's persona answers asks with approved: true")
log(built.status, reviewed.status, built.note)
`)
	code, out, stderr := run(t, "run", "start", "--file", prog, "--json", "--dir", dir)
	var started struct {
		RunID string `json:"runId"`
	}
	if code != exit.OK || json.Unmarshal([]byte(out), &started) != nil {
		t.Fatalf("run start: exit %d %q %s", code, out, stderr)
	}
	id := started.RunID
	journal := awaitCompleted(t, dir, id)
	code, out, _ = run(t, "run", "journal", id, "--json", "--dir", dir)
	settled := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var row struct {
			Step, State, Outcome string
		}
		if json.Unmarshal([]byte(line), &row) == nil && row.State == "settled" {
			settled[row.Step] = row.Outcome
		}
	}
	for _, step := range []string{"/spawn:builder#0", "/spawn:reviewer#0", "/turn:build#0", "/turn:review#0", "/ask:verdict#0"} {
		if settled[step] != "ok" {
			t.Errorf("step %s settled %q:\n%s", step, settled[step], journal)
		}
	}
	if n := strings.Count(journal, "/spawn:builder#0  pending"); n != 1 {
		t.Errorf("the builder was spawned %d times:\n%s", n, journal)
	}
}

// TestWorkflowConclaveWithAgents: a conclave of two agent: cotal agents opens the run's conclave
// channel, which the manager granted each seat at its spawn; the builder's turn inside it joins
// it and speaks there, and the body hears it. A conclave on a channel the member's grant does
// not cover is a failure the program catches.
func TestWorkflowConclaveWithAgents(t *testing.T) {
	meshtest.Long(t, "a mesh running agent processes")
	t.Setenv(envRunCLI, "1")
	dir := upMesh(t)
	writePersonas(t, dir)
	prog := writeFile(t, t.TempDir(), "conclave.cotal.js", `const a = await spawn("builder")
const b = await spawn("reviewer")
const heard = await conclave([a, b], async (ch) => {
  const r = await parallel({
    heard: () => wait(message(ch, { from: a.agent }), { name: "heard", timeout: "2m" }),
    spoke: () => turn(a, { name: "speak", deadline: "2m" }),
  })
  return r.heard
}, { name: "room" })
assert(heard !== null && contains(heard.text, "takes step"), "the builder spoke in the conclave: " + json.stringify(heard))
let refused = ""
try {
  await conclave([b], async (ch) => ch.channel, { name: "secret", channel: "secret" })
} catch (e) {
  refused = e.message
}
assert(contains(refused, "may not read and post"), "a channel beyond the member's grant: " + refused)
`)
	code, out, stderr := run(t, "run", "start", "--file", prog, "--json", "--dir", dir)
	var started struct {
		RunID string `json:"runId"`
	}
	if code != exit.OK || json.Unmarshal([]byte(out), &started) != nil {
		t.Fatalf("run start: exit %d %q %s", code, out, stderr)
	}
	journal := awaitCompleted(t, dir, started.RunID)
	if !strings.Contains(journal, "/conclave:room#0") {
		t.Errorf("no conclave in the journal:\n%s", journal)
	}
}

// TestWorkflowRunWithAgentsSurvivesARestart: a mesh stopped while its run waits on a
// checkpoint between two agents' turns stops their agents with it; when it comes up again it
// takes the run back, the answer given then lets it go on, and the second agent's turn starts
// that agent again from its persona. The journal shows one spawn per agent and one turn each.
func TestWorkflowRunWithAgentsSurvivesARestart(t *testing.T) {
	meshtest.Long(t, "a mesh running agent processes, started twice")
	t.Setenv(envRunCLI, "1")
	dir := t.TempDir()
	writePersonas(t, dir)
	prog := writeFile(t, t.TempDir(), "team.cotal.js", `const a = await spawn("builder")
const b = await spawn("reviewer")
await turn(a, { name: "build", deadline: "2m" })
const ok = await checkpoint("approve", "Ship the release?")
const reviewed = await turn(b, { name: "review", deadline: "2m" })
log(ok.value, reviewed.status)
`)
	id := startRestartAnswer(t, dir, prog)
	journal := awaitCompleted(t, dir, id)
	for _, step := range []string{"/spawn:builder#0", "/spawn:reviewer#0", "/turn:build#0", "/turn:review#0"} {
		if n := strings.Count(journal, step+"  pending"); n != 1 {
			t.Errorf("%s written pending %d times:\n%s", step, n, journal)
		}
	}
}

// TestInvokeTurn: the manager's turn command wakes a seat for one turn on the operator's
// behalf: an agent: cotal seat takes it and yields done, and the goal settles succeeded; a seat
// that takes no turns lets its deadline pass, and the goal fails; a lifecycle the seat no
// longer is is refused as expired.
func TestInvokeTurn(t *testing.T) {
	meshtest.Long(t, "a mesh running agent processes")
	t.Setenv(envRunCLI, "1")
	dir := upMesh(t)
	code, res, stderr := invoke(t, "manager", "spawn", "--dir", dir, "--args", `{"name":"taker","agent":"cotal"}`, "--timeout", "30s")
	if code != exit.OK || res.State != manager.GoalSucceeded {
		t.Fatalf("spawn taker: exit %d, %+v %s", code, res, stderr)
	}
	// A process that never joins the mesh: its spawn goal stays open, and it takes no turns.
	code, res, stderr = invoke(t, "manager", "spawn", "--dir", dir, "--args", `{"name":"mute","launchOptions":{"command":["sleep","600"]}}`, "--timeout", "5s")
	if code == exit.Usage || !res.OK {
		t.Fatalf("spawn mute: exit %d, %+v %s", code, res, stderr)
	}
	target := func(name string) string {
		t.Helper()
		row := psRows(t, dir)["local."+name]
		if row.Process == nil {
			t.Fatalf("no process row for %s", name)
		}
		return "local." + name + "." + row.Process.LifecycleUID
	}
	turn := `{"payload":"{\"run\":\"run-x\",\"step\":\"/turn:go#0\"}","deadlineMs":60000}`
	code, res, stderr = invoke(t, "manager", "turn", "--dir", dir, "--mode", "any", "--target", target("taker"), "--args", turn)
	var acc manager.TurnAcceptance
	if code != exit.OK || res.State != manager.GoalSucceeded || json.Unmarshal(res.Data, &acc) != nil || acc.GoalID != res.GoalID || acc.Name != "taker" || acc.DeadlineAt == 0 {
		t.Fatalf("a turn of a cotal agent: exit %d, %+v %s", code, res, stderr)
	}
	var yield struct{ Status, Note string }
	if json.Unmarshal(res.GoalData, &yield) != nil || yield.Status != "done" || yield.Note == "" {
		t.Errorf("the turn's yield: %s", res.GoalData)
	}
	short := `{"payload":"{\"run\":\"run-x\",\"step\":\"/turn:go#1\"}","deadlineMs":1500}`
	code, res, stderr = invoke(t, "manager", "turn", "--dir", dir, "--mode", "any", "--target", target("mute"), "--args", short, "--timeout", "20s")
	if code != exit.Failed || res.State != manager.GoalFailed || !strings.Contains(string(res.GoalData), `"reason":"turn-deadline"`) {
		t.Errorf("a turn nobody takes: exit %d, %+v %s", code, res, stderr)
	}
	stale := "local.taker." + string(wire.NewLifecycleUID())
	code, res, stderr = invoke(t, "manager", "turn", "--dir", dir, "--mode", "any", "--target", stale, "--args", turn)
	if code == exit.OK || res.OK || res.Error == nil || res.Error.Code != wire.CodeExpired {
		t.Errorf("a turn of a lifecycle the seat no longer is: exit %d, %+v %s", code, res, stderr)
	}
}
