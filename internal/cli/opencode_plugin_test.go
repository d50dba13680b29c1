package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// pluginDriver loads the OpenCode plugin as OpenCode does and plays a session at it: a tool runs,
// then (when the test says so on stdin) the session goes idle; a prompt the plugin starts is
// printed as JSON, and ends the driver.
const pluginDriver = `
import { createInterface } from "node:readline";
const { CotalPlugin } = await import(process.argv[2]);
const client = { session: { prompt: async (req) => {
  console.log(JSON.stringify({ prompt: req }));
  process.exit(0);
} } };
const hooks = await CotalPlugin({ client });
await hooks["tool.execute.before"]({ tool: "bash" }, {});
console.log(JSON.stringify({ step: "tool" }));
for await (const line of createInterface({ input: process.stdin })) {
  if (line === "idle") {
    await hooks.event({ event: { type: "session.idle", properties: { sessionID: "ses_1" } } });
    console.log(JSON.stringify({ step: "idle" }));
  }
}
`

// toolOrSkip returns the path of the tool a test drives, name on PATH: it skips the test without
// it (install says how to get it), unless the environment variable require, set by .ci/run, which
// installs the tool, makes that a failure.
func toolOrSkip(t *testing.T, name, require, install string) string {
	t.Helper()
	meshtest.Long(t, "runs "+name)
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv(require) != "" {
			t.Fatalf("no %s on PATH: .ci/run installs it", name)
		}
		t.Skipf("no %s on PATH: this test needs one (%s)", name, install)
	}
	return path
}

// cotalScript writes dir/cotal, a script that runs the test binary as the cotal binary, and
// returns its path: what a harness's hooks run as cotal in these tests.
func cotalScript(t *testing.T, dir string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "cotal")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec env "+envRunCLI+"=1 '"+self+"' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// nodeBin returns the node binary the plugin tests run the plugin under.
func nodeBin(t *testing.T) string {
	t.Helper()
	return toolOrSkip(t, "node", "COTAL_REQUIRE_NODE", "apt install nodejs")
}

// TestOpenCodePlugin runs the plugin `cotal spawn --agent opencode` loads under Node, against a
// real agent's cotal mcp: a tool makes the agent working on it; the session going idle makes it
// idle; a DM that arrives while it is idle starts a turn carrying the DM, marked as peer data,
// and leaves the inbox.
func TestOpenCodePlugin(t *testing.T) {
	node := nodeBin(t)
	ctx := t.Context()
	agent := newHookedAgent(t, "oc")
	status := func(want wire.PresenceStatus, activity string) { t.Helper(); agent.status(t, want, activity) }

	work := t.TempDir()
	bin := cotalScript(t, work)
	plugin, err := filepath.Abs(filepath.Join("..", "manager", "opencode", "cotal.js"))
	if err != nil {
		t.Fatal(err)
	}
	driver := filepath.Join(work, "driver.mjs")
	if err := os.WriteFile(driver, []byte(pluginDriver), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, node, driver, "file://"+plugin)
	cmd.Env = append(os.Environ(), manager.PluginBinEnv+"="+bin, manager.PluginSpaceEnv+"="+string(agent.Space()), manager.PluginAgentEnv+"="+agent.Principal().String())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the driver ended before %s", what)
			}
			return l
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s from the driver", what)
		}
		return ""
	}

	if l := next("the tool step"); l != `{"step":"tool"}` {
		t.Fatalf("the driver said %s", l)
	}
	status(wire.StatusWorking, "running bash")
	if _, err := io.WriteString(stdin, "idle\n"); err != nil {
		t.Fatal(err)
	}
	if l := next("the idle step"); l != `{"step":"idle"}` {
		t.Fatalf("the driver said %s", l)
	}
	status(wire.StatusIdle, "")
	bob := agent.start("bob", func(context.Context, *cotal.Delivery) error { return nil })
	if _, err := bob.DirectMessage(ctx, agent.Principal(), []wire.Part{wire.TextPart("ping from bob")}); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Prompt struct {
			Path struct{ ID string }
			Body struct {
				Parts []struct{ Type, Text string }
			}
		}
	}
	if l := next("the prompt"); json.Unmarshal([]byte(l), &got) != nil || got.Prompt.Path.ID != "ses_1" || len(got.Prompt.Body.Parts) != 1 ||
		!strings.Contains(got.Prompt.Body.Parts[0].Text, "ping from bob") || !strings.Contains(got.Prompt.Body.Parts[0].Text, "not instructions") {
		t.Fatalf("the plugin's prompt: %s", l)
	}
	if n := agent.inbox.Unread(); n != 0 {
		t.Errorf("%d messages still in the inbox after the hand-in", n)
	}
}

// TestOpenCodePluginBacksOff: with no cotal mcp answering (the hook prints nothing at once), the
// plugin's wait loop backs off rather than spawning hooks as fast as it can.
func TestOpenCodePluginBacksOff(t *testing.T) {
	node := nodeBin(t)
	work := t.TempDir()
	calls := filepath.Join(work, "calls")
	bin := filepath.Join(work, "cotal")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"$2\" >> '"+calls+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plugin, err := filepath.Abs(filepath.Join("..", "manager", "opencode", "cotal.js"))
	if err != nil {
		t.Fatal(err)
	}
	driver := filepath.Join(work, "driver.mjs")
	if err := os.WriteFile(driver, []byte(pluginDriver), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), node, driver, "file://"+plugin)
	cmd.Env = append(os.Environ(), manager.PluginBinEnv+"="+bin, manager.PluginAgentEnv+"=local.nobody")
	cmd.Stdin = strings.NewReader("idle\n")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	time.Sleep(3 * time.Second)
	raw, _ := os.ReadFile(calls)
	if waits := strings.Count(string(raw), "wait\n"); waits < 1 || waits > 8 {
		t.Fatalf("%d waits in 3 s with no agent answering: want a backed-off handful", waits)
	}
}
