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
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// codexBin returns the Codex binary the Codex tests drive: it skips the test without one, unless
// COTAL_REQUIRE_CODEX (set by .ci/run once it installed Codex) makes that a failure.
func codexBin(t *testing.T) string {
	t.Helper()
	codex, err := exec.LookPath("codex")
	if err != nil {
		if os.Getenv("COTAL_REQUIRE_CODEX") != "" {
			t.Fatal("no codex on PATH: .ci/run installs it")
		}
		t.Skip("no codex on PATH: the Codex hooks test needs one (npm install -g @openai/codex)")
	}
	return codex
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

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	bin := filepath.Join(work, "cotal")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec env "+envRunCLI+"=1 '"+self+"' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
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
