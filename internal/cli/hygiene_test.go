package cli

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/status"
	"github.com/gocotal/cotal/internal/meshtest"
)

// activeRows returns the principals of the active rows `creds list --json --state active`
// prints, with the keys the issue pins checked on every row.
func activeRows(t *testing.T, dir string) []string {
	t.Helper()
	code, out, stderr := run(t, "creds", "list", "--json", "--state", "active", "--dir", dir)
	if code != exit.OK {
		t.Fatalf("creds list: exit %d, %s", code, stderr)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("creds list --json %q: %v", out, err)
	}
	var principals []string
	for _, r := range rows {
		for _, k := range []string{"principal", "credentialId", "state", "profile", "lifecycleUid", "expiresAt"} {
			if _, ok := r[k]; !ok {
				t.Errorf("a row lacks %q: %v", k, r)
			}
		}
		if r["state"] != "active" {
			t.Errorf("--state active printed a %v row", r["state"])
		}
		if exp, ok := r["expiresAt"]; ok && exp != nil {
			if _, isNum := exp.(float64); !isNum {
				t.Errorf("expiresAt is %v: want a number, or null for no expiry", exp)
			}
		}
		principals = append(principals, r["principal"].(string))
	}
	return principals
}

// TestCommandsLeaveNoActiveRows runs the commands that issue their own one-shot credential
// (ps, status, channels, send) many times: the ledger's active rows stay where they were, since
// each lets its credential go when it ends. 10 runs of ps here; 100 under COTAL_SOAK=1.
func TestCommandsLeaveNoActiveRows(t *testing.T) {
	t.Parallel()
	dir := upMesh(t)
	before := activeRows(t, dir)
	runs := 10
	if os.Getenv("COTAL_SOAK") == "1" {
		runs = 100
	}
	for range runs {
		if code, _, stderr := run(t, "ps", "--dir", dir); code != exit.OK {
			t.Fatalf("ps: exit %d, %s", code, stderr)
		}
	}
	for _, args := range [][]string{{"status"}, {"channels", "list"}, {"send", "msg", "general", "hi"}} {
		if code, _, stderr := run(t, append(args, "--dir", dir)...); code != exit.OK {
			t.Fatalf("%s: exit %d, %s", args, code, stderr)
		}
	}
	if after := activeRows(t, dir); len(after) != len(before) {
		t.Errorf("active rows went from %d to %d after %d runs of ps and one of status, channels and send:\n%q\n%q", len(before), len(after), runs, before, after)
	}
	if code, _, stderr := run(t, "creds", "list", "--state", "bogus", "--dir", dir); code != exit.Usage || !strings.Contains(stderr, "--state") {
		t.Errorf("creds list --state bogus: exit %d, %q; want a usage error naming --state", code, stderr)
	}
}

// TestStatusShowsDaemonCredentials shows `cotal status` listing each daemon's credential and
// when it expires, in text and JSON.
func TestStatusShowsDaemonCredentials(t *testing.T) {
	t.Parallel()
	dir := upMesh(t)
	code, out, stderr := run(t, "status", "--json", "--dir", dir)
	if code != exit.OK {
		t.Fatalf("status: exit %d, %s", code, stderr)
	}
	var rep status.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, d := range rep.Spaces[0].Daemons {
		if d.Expires.IsZero() {
			t.Errorf("%s credential of %s has no expiry", d.Profile, d.Principal)
		}
		got[d.Profile] = true
	}
	for _, p := range []string{"delivery", "warden", "supervisor"} {
		if !got[p] {
			t.Errorf("status lists no %s credential: %+v", p, rep.Spaces[0].Daemons)
		}
	}
	if _, out, _ = run(t, "status", "--dir", dir); !strings.Contains(out, "delivery credential of local.cotal_delivery expires") {
		t.Errorf("status text lacks the delivery credential's expiry:\n%s", out)
	}
}

// TestSupervisorPerSpace runs a mesh of two spaces: each has its own supervisor, so an agent is
// spawned into the second space, listed by `ps --space`, and stopped there, and the manager
// plane of both spaces is bound.
func TestSupervisorPerSpace(t *testing.T) {
	meshtest.Long(t, "a supervisor per space")
	t.Parallel()
	dir := upMesh(t, "--space", "main,ops")
	code, out, stderr := run(t, append([]string{"spawn", "--dir", dir, "--space", "ops", "--name", "sleeper", "--detach", "--json", "--"}, agentCommand(t)...)...)
	if code != exit.OK {
		t.Fatalf("spawn into ops: exit %d, %s", code, stderr)
	}
	if !strings.Contains(out, `"state":"succeeded"`) {
		t.Fatalf("spawn into ops = %s", out)
	}
	if _, out, _ = run(t, "ps", "--dir", dir, "--space", "ops", "--json"); !strings.Contains(out, `"process":{"name":"sleeper"`) {
		t.Errorf("ps --space ops does not list the spawned agent: %s", out)
	}
	if _, out, _ = run(t, "ps", "--dir", dir, "--json"); strings.Contains(out, `"process":{"name":"sleeper"`) {
		t.Errorf("ps of main lists the agent spawned into ops: %s", out)
	}
	code, out, stderr = run(t, "status", "--json", "--dir", dir)
	if code != exit.OK {
		t.Fatalf("status: exit %d, %s", code, stderr)
	}
	var rep status.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Spaces {
		if got := s.Planes["manager"]; got != "bound" {
			t.Errorf("the manager plane of %s is %q, want bound", s.Space, got)
		}
	}
	if code, out, stderr = run(t, "stop", "--dir", dir, "--space", "ops", "--name", "sleeper", "--json"); code != exit.OK || !strings.Contains(out, `"status":"stopped"`) {
		t.Errorf("stop in ops: exit %d, %s %s", code, out, stderr)
	}
}
