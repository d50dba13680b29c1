package mcptools_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// TestMCPRun drives cotal_run against the manager of a real mesh: it is offered only to an
// agent holding the run capability, which starts a program, reads its open checkpoint, answers
// it and sees the run complete. An agent without the capability is refused by the broker when it
// starts a run, and by the manager when it answers one; its cotal_yield reaches the manager,
// which holds no turn for it.
func TestMCPRun(t *testing.T) {
	m := meshtest.Start(t, meshtest.WithDaemons())
	plain, plainClient := sessionAs(t, m, ledger.Request{Name: "plain"})
	runner, _ := sessionAs(t, m, ledger.Request{Name: "runner", Capabilities: []string{authority.CapabilityRun}})
	res, err := plain.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name == "cotal_run" {
			t.Error("cotal_run is offered to an agent without the run capability")
		}
	}

	got := call(t, runner, "cotal_run", map[string]any{"action": "start", "program": "const ok = await checkpoint(\"approve\", \"Go on?\")\nlog(ok.value)"}, false)
	id := regexp.MustCompile(`run-[0-9a-f]{32}`).FindString(got)
	if id == "" {
		t.Fatalf("start: %s", got)
	}
	meshtest.Eventually(t, 10*time.Second, "the open checkpoint", func() bool {
		return strings.Contains(call(t, runner, "cotal_run", map[string]any{"action": "status", "runId": id}, false), `/checkpoint:approve#0 pending asks "Go on?"`)
	})

	// An agent without the capability: the broker refuses its run-start; its baseline self-mode
	// answer reaches the manager, which refuses it.
	g := plainClient.Grant()
	mc := manager.NewClient(plainClient.Conn(), m.Space, wire.Lifecycle{Principal: g.Principal, UID: g.Lifecycle}, "plain")
	if _, err := mc.RunStart(t.Context(), "log(1)", ""); err == nil || !strings.Contains(err.Error(), "the broker refused") {
		t.Errorf("run-start without the run capability: %v", err)
	}
	if _, err := mc.RunAnswer(t.Context(), id, "/checkpoint:approve#0", json.RawMessage(`"no"`)); err == nil || !strings.Contains(err.Error(), "permission-denied") {
		t.Errorf("run-answer without the run capability: %v", err)
	}
	if got := call(t, runner, "cotal_run", map[string]any{"action": "ps"}, false); !strings.Contains(got, id+" running") {
		t.Errorf("ps: %s", got)
	}
	if got := call(t, runner, "cotal_run", map[string]any{"action": "answer", "runId": id, "step": "/checkpoint:approve#0", "value": "yes"}, false); !strings.Contains(got, "answered /checkpoint:approve#0") {
		t.Fatalf("answer: %s", got)
	}
	meshtest.Eventually(t, 10*time.Second, "the run to complete", func() bool {
		return strings.Contains(call(t, runner, "cotal_run", map[string]any{"action": "status", "runId": id}, false), "completed")
	})
	// cotal_yield asks the manager for the caller's pending turns, on its baseline self rows.
	if got := call(t, plain, "cotal_yield", map[string]any{"status": "done"}, true); !strings.Contains(got, "no workflow run has asked you for a turn") {
		t.Errorf("cotal_yield with no turn: %s", got)
	}
	if got := call(t, plain, "cotal_yield", map[string]any{"status": "done", "goalId": "g-1"}, true); !strings.Contains(got, "no workflow run has asked you for a turn") {
		t.Errorf("cotal_yield of a turn the agent does not hold: %s", got)
	}
	if got := call(t, runner, "cotal_run", map[string]any{"action": "launch"}, true); !strings.Contains(got, "does not equal any of") {
		t.Errorf("an unknown action: %s", got)
	}
}
