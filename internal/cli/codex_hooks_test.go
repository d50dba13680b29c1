package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// codexBin returns the Codex binary the Codex tests drive.
func codexBin(t *testing.T) string {
	t.Helper()
	return toolOrSkip(t, "codex", "COTAL_REQUIRE_CODEX", "npm install -g @openai/codex")
}

// modelStub is a stand-in for the model behind Codex's Responses API: it answers every turn with
// one short message and keeps each request's body. Before answering the first, it runs during.
type modelStub struct {
	mu       sync.Mutex
	requests []string
	during   func()
}

func (m *modelStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	m.requests = append(m.requests, string(body))
	n := len(m.requests)
	m.mu.Unlock()
	if n == 1 && m.during != nil {
		m.during()
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, ev := range []map[string]any{
		{"type": "response.created", "response": map[string]any{"id": fmt.Sprint("resp_", n)}},
		{"type": "response.output_item.done", "item": map[string]any{"type": "message", "role": "assistant", "id": fmt.Sprint("msg_", n),
			"content": []map[string]any{{"type": "output_text", "text": fmt.Sprint("done ", n)}}}},
		{"type": "response.completed", "response": map[string]any{"id": fmt.Sprint("resp_", n),
			"usage": map[string]int{"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}},
	} {
		raw, _ := json.Marshal(ev)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev["type"], raw)
	}
}

func (m *modelStub) bodies() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.requests...)
}

// TestCodexHooksPush runs the real Codex with the hooks `cotal spawn --agent codex` configures,
// against an agent's cotal mcp on a real mesh and a stand-in model. A DM that arrives while the
// turn runs is handed in when the turn would end: Codex does not stop but asks the model again
// with the DM in its input, then stops with nothing left waiting, and the agent is idle.
func TestCodexHooksPush(t *testing.T) {
	codex := codexBin(t)
	ctx := t.Context()
	agent := newHookedAgent(t, "cx")
	bob := agent.start("bob", func(context.Context, *cotal.Delivery) error { return nil })
	const dm = "the build is red on main"
	model := &modelStub{during: func() {
		if _, err := bob.DirectMessage(ctx, agent.Principal(), []wire.Part{wire.TextPart(dm)}); err != nil {
			t.Error(err)
			return
		}
		meshtest.Eventually(t, 10*time.Second, "the DM in the agent's inbox", func() bool { return agent.inbox.Unread() == 1 })
	}}
	srv := httptest.NewServer(model)
	defer srv.Close()

	work := t.TempDir()
	bin := cotalScript(t, work)
	args := []string{"exec", "--skip-git-repo-check",
		"-c", `model_providers.stub={name="stub",base_url="` + srv.URL + `/v1",wire_api="responses"}`,
		"-c", "model_provider=stub", "-c", "model=gpt-5"}
	args = append(args, manager.CodexHookArgs(bin, string(agent.Space()), agent.Principal().String())...)
	cmd := exec.CommandContext(ctx, codex, append(args, "check the build")...)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "CODEX_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("codex: %v\n%s", err, out)
	}
	bodies := model.bodies()
	if len(bodies) != 2 {
		t.Fatalf("codex asked the model %d times, want 2 (the turn, then the turn going on with the DM):\n%s", len(bodies), out)
	}
	if strings.Contains(bodies[0], dm) || !strings.Contains(bodies[1], dm) {
		t.Errorf("the DM is not what the second request added:\n%s", out)
	}
	if !strings.Contains(string(out), "Stop Blocked") {
		t.Errorf("codex did not report its Stop hook blocking:\n%s", out)
	}
	if n := agent.inbox.Unread(); n != 0 {
		t.Errorf("%d messages left in the inbox", n)
	}
	agent.status(t, wire.StatusIdle, "")
}

// TestCodexIdleWake runs `cotal spawn --agent codex` with the real Codex in its manager's
// terminal, against a stand-in model. Once the session is idle, a DM wakes it: the manager types
// the wake line into its terminal, Codex starts a turn, and the prompt hook hands the DM in, so
// the model's request carries it.
func TestCodexIdleWake(t *testing.T) {
	codexBin(t)
	ctx := t.Context()
	model := &modelStub{}
	srv := httptest.NewServer(model)
	defer srv.Close()
	dir := upMesh(t)
	st := waitUp(t, dir, nil)
	// The agent works in a directory of its own: in a checkout, Codex would first ask whether to
	// trust it.
	t.Chdir(t.TempDir())
	home := t.TempDir()
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(home, "log", "*"))
			for _, l := range logs {
				raw, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", l, raw[max(0, len(raw)-4000):])
			}
		}
	})
	args := []string{"spawn", "--dir", dir, "--name", "cx", "--agent", "codex", "--detach",
		"--env", envRunCLI + "=1", "--env", "CODEX_HOME=" + home, "--",
		"-c", `model_providers.stub={name="stub",base_url="` + srv.URL + `/v1",wire_api="responses"}`,
		"-c", "model_provider=stub", "-c", "model=gpt-5",
		// Codex starts an MCP server with a few variables of its own only; this one makes the test
		// binary, which `cotal up` here names as its cotal, act as cotal.
		"-c", `mcp_servers.cotal.env={` + envRunCLI + `="1"}`}
	if code, out, stderr := run(t, args...); code != exit.OK {
		t.Logf("spawn: exit %d %s %s (its readiness is waited for below)", code, out, stderr)
	}
	l := openLedger(t, dir, st.URL)
	cred, retire, err := l.StartAgent(ctx, ledger.Request{Name: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = retire(context.Background()) })
	bob, err := cotal.Connect(ctx, st.URL, cotal.WithCredsData(cred.Creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bob.Close(context.Background()) })
	roster, err := bob.Roster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(roster.Stop)
	cx := wire.Principal{}
	meshtest.Eventually(t, 90*time.Second, "cx present and idle", func() bool {
		for _, p := range roster.Peers() {
			if p.Presence != nil && strings.HasSuffix(p.Key, ".cx") && p.Online && p.Presence.Status == wire.StatusIdle {
				cx, err = wire.ParsePrincipal(p.Key)
				return err == nil
			}
		}
		return false
	})
	const dm = "please rebase onto main"
	if _, err := bob.DirectMessage(ctx, cx, []wire.Part{wire.TextPart(dm)}); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 60*time.Second, "a model request carrying the DM", func() bool {
		for _, b := range model.bodies() {
			if strings.Contains(b, dm) && strings.Contains(b, "Cotal mesh") {
				return true
			}
		}
		return false
	})
	if code, out, stderr := run(t, "stop", "--dir", dir, "--name", "cx"); code != exit.OK {
		t.Errorf("stop: exit %d %s %s", code, out, stderr)
	}
}
