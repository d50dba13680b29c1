package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/cli/endpoints"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// invoke runs `cotal invoke --json` and decodes its one object.
func invoke(t *testing.T, args ...string) (int, endpoints.Result, string) {
	t.Helper()
	code, out, stderr := run(t, append([]string{"invoke", "--json"}, args...)...)
	var res endpoints.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("invoke %v: exit %d, not one JSON object: %q (%v) %s", args, code, out, err, stderr)
	}
	return code, res, stderr
}

// liveManagers polls `cotal endpoints --json` until n manager instances answer, and returns
// them.
func liveManagers(t *testing.T, dir string, n int) []endpoints.Instance {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, out, stderr := run(t, "endpoints", "--dir", dir, "--json")
		if code != exit.OK {
			t.Fatalf("endpoints exit %d: %s", code, stderr)
		}
		var all, live []endpoints.Instance
		if err := json.Unmarshal([]byte(out), &all); err != nil {
			t.Fatalf("endpoints --json %q: %v", out, err)
		}
		for _, r := range all {
			if r.Endpoint == string(wire.ManagerEndpoint) && r.Live {
				live = append(live, r)
			}
		}
		if len(live) == n {
			return live
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d live managers, want %d: %s", len(live), n, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// spawnArgs is manager spawn's args for an agent named name running agentCommand.
func spawnArgs(t *testing.T, name string) string {
	t.Helper()
	cmd := agentCommand(t)
	raw, err := json.Marshal(map[string]any{"name": name, "launchOptions": map[string]any{"command": cmd[2:], "env": []string{cmd[1]}}})
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestEndpointCommands lists, describes and invokes the manager endpoint of `cotal up`: a spawn
// through invoke follows its goal until the agent is present, and a despawn in mode any stops it.
func TestEndpointCommands(t *testing.T) {
	dir := upMesh(t)
	mgr := liveManagers(t, dir, 1)[0]
	if mgr.State != "ready" || !strings.Contains(strings.Join(mgr.Commands, ","), "spawn,despawn") {
		t.Errorf("the manager's registry line: %+v", mgr)
	}
	code, out, stderr := run(t, "endpoints", "--dir", dir)
	if code != exit.OK || !strings.Contains(out, mgr.Instance) || !strings.Contains(out, "yes") {
		t.Errorf("endpoints: exit %d, %s %s", code, out, stderr)
	}

	code, out, stderr = run(t, "describe", "manager", "--dir", dir)
	if code != exit.OK || !strings.Contains(out, "endpoint manager (owner local)") || !strings.Contains(out, "despawn") || !strings.Contains(out, "owner,any") || !strings.Contains(out, "manager.spawn") {
		t.Errorf("describe: exit %d, %s %s", code, out, stderr)
	}
	code, out, stderr = run(t, "describe", "manager", "--dir", dir, "--json", "--instance", mgr.Instance)
	var answer struct {
		Descriptor struct {
			Endpoint string `json:"endpoint"`
			Clusters []struct {
				Commands []string `json:"commands"`
			} `json:"clusters"`
		} `json:"descriptor"`
	}
	if err := json.Unmarshal([]byte(out), &answer); code != exit.OK || err != nil || answer.Descriptor.Endpoint != "manager" || len(answer.Descriptor.Clusters) != 1 {
		t.Errorf("describe --json: exit %d, %s (%v) %s", code, out, err, stderr)
	}

	code, res, stderr := invoke(t, "manager", "ps", "--dir", dir)
	if code != exit.OK || !res.OK || res.Outcome != wire.OutcomeExecuted || string(res.Data) != "[]" || res.V != 1 || res.ID == "" {
		t.Errorf("invoke ps: exit %d, %+v %s", code, res, stderr)
	}
	code, res, stderr = invoke(t, "manager", "status", "--dir", dir, "--instance", mgr.Instance)
	if code != exit.OK || !res.OK || !strings.Contains(string(res.Data), mgr.Instance) {
		t.Errorf("invoke status on the inst rail: exit %d, %+v %s", code, res, stderr)
	}
	code, res, stderr = invoke(t, "manager", "nosuch", "--dir", dir)
	if code != exit.Failed || res.OK || res.Error == nil || res.Error.Code != wire.CodeNotFound || res.Outcome != wire.OutcomeNotExecuted {
		t.Errorf("invoke nosuch: exit %d, %+v %s", code, res, stderr)
	}
	code, res, stderr = invoke(t, "manager", "inspect", "--dir", dir, "--args", `{"name":"nobody"}`)
	if code != exit.Failed || res.Error == nil || res.Error.Code != wire.CodeNotFound {
		t.Errorf("invoke inspect nobody: exit %d, %+v %s", code, res, stderr)
	}

	res = invokeSpawn(t, dir, "carol")
	var acc manager.Acceptance
	if err := json.Unmarshal(res.Data, &acc); err != nil || acc.GoalID != res.GoalID || acc.Name != "carol" {
		t.Errorf("the spawn's data is not its acceptance: %s (%v)", res.Data, err)
	}
	carol := psRows(t, dir)["local.carol"]
	if !carol.Online || carol.Process == nil || carol.Process.Status != string(manager.StateRunning) || carol.Process.LifecycleUID != acc.UID {
		t.Fatalf("ps row of carol: %+v", carol)
	}
	target := "local.carol." + carol.Process.LifecycleUID
	code, res, stderr = invoke(t, "manager", "despawn", "--dir", dir, "--mode", "any", "--target", target) // no --args: an object input gets {}
	if code != exit.OK || !res.OK || !strings.Contains(string(res.Data), `"stopped":true`) {
		t.Fatalf("invoke despawn: exit %d, %+v %s", code, res, stderr)
	}
	if p := psRows(t, dir)["local.carol"].Process; p == nil || p.Status != string(manager.StateStopped) {
		t.Errorf("carol after despawn: %+v", p)
	}

	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"args not JSON", []string{"invoke", "manager", "ps", "--args", "{bad"}, exit.Usage, "--args"},
		{"bad endpoint", []string{"invoke", "Manager", "ps"}, exit.Usage, "ENDPOINT"},
		{"bad command", []string{"invoke", "manager", "P S"}, exit.Usage, "COMMAND"},
		{"bad mode", []string{"invoke", "manager", "despawn", "--mode", "all"}, exit.Usage, "--mode"},
		{"mode without target", []string{"invoke", "manager", "despawn", "--mode", "any"}, exit.Usage, "--target"},
		{"bad target", []string{"invoke", "manager", "despawn", "--mode", "any", "--target", "local.carol"}, exit.Usage, "--target"},
		{"targeted without mode", []string{"invoke", "manager", "despawn"}, exit.Usage, "targeted"},
		{"mode the command does not admit", []string{"invoke", "manager", "despawn", "--mode", "self"}, exit.Usage, "targeted"},
		{"mode on an untargeted command", []string{"invoke", "manager", "ps", "--mode", "any", "--target", target}, exit.Usage, "not targeted"},
		{"bad instance", []string{"invoke", "manager", "ps", "--instance", "x"}, exit.Usage, "--instance"},
		{"no timeout", []string{"invoke", "manager", "ps", "--timeout", "0s"}, exit.Usage, "--timeout"},
		{"cancel without a goal", []string{"invoke", "manager", "cancel"}, exit.Usage, "--goal"},
		{"a goal on another command", []string{"invoke", "manager", "ps", "--goal", "g1"}, exit.Usage, "--goal"},
		{"a bad goal", []string{"invoke", "manager", "cancel", "--goal", "a.b"}, exit.Usage, "--goal"},
		{"describe a bad endpoint", []string{"describe", "a_b"}, exit.Usage, "ENDPOINT"},
		{"describe no endpoint", []string{"describe", "com.acme.none"}, exit.Failed, "no responders"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, stderr := run(t, append(tt.args, "--dir", dir)...)
			if code != tt.code || !strings.Contains(stderr, tt.want) || tt.code == exit.Usage && out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d mentioning %q", code, out, stderr, tt.code, tt.want)
			}
		})
	}
}

// invokeSpawn spawns an agent named name through `cotal invoke manager spawn` (on instance, when
// one is given), and checks its goal succeeded.
func invokeSpawn(t *testing.T, dir, name string, instance ...string) endpoints.Result {
	t.Helper()
	args := []string{"manager", "spawn", "--dir", dir, "--args", spawnArgs(t, name)}
	for _, in := range instance {
		args = append(args, "--instance", in)
	}
	code, res, stderr := invoke(t, args...)
	if code != exit.OK || !res.OK || res.Outcome != wire.OutcomeExecuted || res.GoalID == "" || res.State != manager.GoalSucceeded {
		t.Fatalf("invoke spawn %s: exit %d, %+v %s", name, code, res, stderr)
	}
	return res
}

// TestTwoSupervisors serves one space from the manager of `cotal up` and a `cotal supervise
// --name second`: each spawns one agent, and one ps shows both agents' processes from both.
func TestTwoSupervisors(t *testing.T) {
	meshtest.Long(t, "two supervisor processes")
	dir := upMesh(t)
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan int, 1)
	supIO, _, _, supErr := iostreams.Test()
	go func() { done <- Main(ctx, supIO, []string{"supervise", "--dir", dir, "--name", "second"}) }()
	t.Cleanup(func() {
		stop()
		select {
		case code := <-done:
			if code != exit.OK {
				t.Errorf("supervise --name second exit %d: %s", code, supErr)
			}
		case <-time.After(30 * time.Second):
			t.Error("supervise --name second did not stop")
		}
	})
	managers := liveManagers(t, dir, 2)
	for i, m := range managers {
		invokeSpawn(t, dir, fmt.Sprintf("agent%d", i), m.Instance)
	}
	rows := psRows(t, dir)
	for i, m := range managers {
		r := rows[fmt.Sprintf("local.agent%d", i)]
		if !r.Online || r.Process == nil || r.Process.InstanceID != m.Instance || r.Process.Status != string(manager.StateRunning) {
			t.Errorf("agent%d, spawned by %s: %+v (process %+v)", i, m.Instance, r, r.Process)
		}
	}
	if code, _, stderr := run(t, "supervise", "--dir", dir, "--name", "second"); code != exit.Failed || !strings.Contains(stderr, mesh.ErrSupervisorRunning.Error()) {
		t.Errorf("a second supervisor named second: exit %d, %s", code, stderr)
	}
	if code, _, stderr := run(t, "supervise", "--dir", dir, "--name", "bad.name"); code != exit.Usage || !strings.Contains(stderr, "--name") {
		t.Errorf("supervise --name bad.name: exit %d, %s", code, stderr)
	}
}

// TestInvokeCancel follows a spawn goal that never becomes ready past --timeout, then cancels it
// with the reserved cancel command: the goal ends cancelled, and a second cancel is refused with
// the outcome it reached.
func TestInvokeCancel(t *testing.T) {
	dir := upMesh(t)
	args := `{"name":"slow","launchOptions":{"command":["sleep","600"]}}`
	code, res, stderr := invoke(t, "manager", "spawn", "--dir", dir, "--args", args, "--timeout", "2s")
	if code != exit.Failed || !res.OK || res.GoalID == "" || res.State != "" {
		t.Fatalf("a spawn still open at --timeout: exit %d, %+v %s", code, res, stderr)
	}
	code, res, stderr = invoke(t, "manager", "cancel", "--dir", dir, "--goal", res.GoalID, "--args", `{"mode":"terminate"}`)
	if code != exit.OK || !res.OK || res.State != manager.GoalCancelled {
		t.Fatalf("cancel: exit %d, %+v %s", code, res, stderr)
	}
	code, again, stderr := invoke(t, "manager", "cancel", "--dir", dir, "--goal", res.GoalID)
	if code != exit.Failed || again.OK || again.Error == nil || again.Error.Code != wire.CodeFailedPrecondition || !again.Error.HasDetail(wire.DetailGoalOutcome) {
		t.Fatalf("a second cancel: exit %d, %+v %s", code, again, stderr)
	}
	if rows := psRows(t, dir); rows["local.slow"].Process != nil && rows["local.slow"].Process.Status == string(manager.StateRunning) {
		t.Fatalf("the cancelled spawn's agent still runs: %+v", rows["local.slow"].Process)
	}
}

// TestInvokeSpawnUncertain spawns a command that never joins the space: its goal settles
// uncertain at the manager's 30 s readiness deadline, and invoke exits 1 naming it.
func TestInvokeSpawnUncertain(t *testing.T) {
	meshtest.Long(t, "waits out the manager's readiness deadline")
	dir := upMesh(t)
	args := `{"name":"mute","launchOptions":{"command":["sleep","600"]}}`
	code, res, stderr := invoke(t, "manager", "spawn", "--dir", dir, "--args", args, "--timeout", "45s")
	if code != exit.Failed || !res.OK || res.GoalID == "" || res.State != manager.GoalUncertain || !strings.Contains(stderr, "uncertain") {
		t.Fatalf("a spawn that never becomes ready: exit %d, %+v %s", code, res, stderr)
	}
}
