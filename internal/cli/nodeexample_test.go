package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/cli/mint"
)

// nodeExample is the Node agent written from docs/clients.md.
var nodeExample = filepath.Join("..", "..", "examples", "node")

// TestNodeExample runs the Node agent against a real mesh: it is present, posts, passes a DM
// through its guard and answers it, as a Go agent on the mesh sees.
func TestNodeExample(t *testing.T) {
	node := nodeBin(t)
	if _, err := os.Stat(filepath.Join(nodeExample, "node_modules")); err != nil {
		install := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		install.Dir = nodeExample
		if out, err := install.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", nodeExample, err, out)
		}
	}
	dir := upMesh(t)
	code, out, stderr := run(t, "mint", "nodey", "--dir", dir, "--subscribe", "general", "--provision", "--json")
	if code != exit.OK {
		t.Fatalf("mint nodey (exit %d): %s", code, stderr)
	}
	var res mint.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}

	// A Go agent watches #general.
	seen, watchErr, stopWatching := background(t, "agent", "--dir", dir, "--name", "watcher", "--subscribe", "general", "--json")
	waitFor := func(what string, in interface{ String() string }) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(in.String(), what) {
			if time.Now().After(deadline) {
				t.Fatalf("%q never came:\n%s", what, in.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("Ctrl-C to stop", watchErr)

	nctx, ncancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer ncancel()
	var nodeOut iostreams.Buffer
	agent := exec.CommandContext(nctx, node, "agent.mjs")
	agent.Dir = nodeExample
	agent.Env = append(os.Environ(), "COTAL_SERVERS="+res.Servers, "COTAL_CREDS="+res.Creds, "COTAL_INBOX_PREFIX="+res.InboxPrefix,
		"COTAL_LIFECYCLE="+res.LifecycleUID, "COTAL_PRINCIPAL="+res.Principal)
	agent.Stdout, agent.Stderr = &nodeOut, &nodeOut
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- agent.Wait() }()
	waitFor("hello from node nodey", seen)
	if !strings.Contains(seen.String(), `"sender":"local.nodey"`) {
		t.Errorf("the Node agent's post did not come from local.nodey:\n%s", seen)
	}
	if rows := psRows(t, dir); rows["local.nodey"].Status != "idle" {
		t.Errorf("the Node agent's presence: %+v", rows["local.nodey"])
	}
	if code, _, stderr := run(t, "send", "dm", "nodey", "ping from go", "--dir", dir); code != exit.OK {
		t.Fatalf("send dm nodey (exit %d): %s", code, stderr)
	}
	waitFor("echo: ping from go (from local.operator)", seen)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the Node agent: %v\n%s", err, nodeOut.String())
		}
	case <-nctx.Done():
		t.Fatalf("the Node agent did not finish:\n%s", nodeOut.String())
	}
	if !strings.Contains(nodeOut.String(), "answered 1 direct message") {
		t.Errorf("the Node agent's output:\n%s", nodeOut.String())
	}
	stopWatching()
}
