package mcptools_test

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/meshtest"
)

// harnessEnv makes the test binary act as a spawned agent harness: it joins the mesh on its
// launch material and stays present until SIGTERM.
const harnessEnv = "COTAL_MCPTOOLS_TEST_HARNESS"

func TestMain(m *testing.M) {
	if os.Getenv(harnessEnv) == "1" {
		os.Exit(harness())
	}
	os.Exit(m.Run())
}

func harness() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	m, err := manager.ReadMaterial(os.Getenv(manager.LaunchMaterialEnv))
	if err != nil {
		return 2
	}
	c, err := cotal.Connect(ctx, m.URL, cotal.WithCreds(m.Creds))
	if err != nil {
		return 4
	}
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_ = c.Close(cctx) // exiting either way
	return 0
}

// fakeClaude puts a "claude" first on PATH that runs this test binary as a harness, so the
// manager's claude preset starts something that joins the mesh.
func fakeClaude(t *testing.T) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	script := "#!/bin/sh\n" + harnessEnv + "=1 exec '" + exe + "'\n"
	if err := os.WriteFile(filepath.Join(bin, "claude"), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// TestMCPSpawn drives cotal_spawn and cotal_despawn against the manager of a real mesh: an agent
// without the spawn capability is refused by the broker when it stops another, one with it spawns an agent that comes
// up, stops it, and may not stop itself when no manager spawned it.
func TestMCPSpawn(t *testing.T) {
	fakeClaude(t)
	m := meshtest.Start(t, meshtest.WithDaemons())

	// Without the capability cotal_spawn is not offered (TestToolSchemas), and stopping another
	// agent is refused by the broker.
	plain, _ := sessionAs(t, m, ledger.Request{Name: "plain"})
	if got := call(t, plain, "cotal_despawn", map[string]any{"name": "helper"}, true); !strings.Contains(got, "permission-denied: the broker refused") {
		t.Errorf("cotal_despawn without the spawn capability: %s", got)
	}
	general := []string{"general"}
	boss, _ := sessionAs(t, m, ledger.Request{Name: "boss", Capabilities: []string{authority.CapabilitySpawn}, Subscribe: general, AllowPublish: general})
	if got := call(t, boss, "cotal_orientation", nil, false); !strings.Contains(got, "Capabilities: spawn") {
		t.Errorf("orientation: %s", got)
	}
	// The spawned agent gets no more than its spawner holds.
	for _, args := range []map[string]any{
		{"name": "snoop", "agent": "claude", "subscribe": []string{"secret"}},
		{"name": "snoop", "agent": "claude", "subscribe": []string{">"}},
		{"name": "snoop", "agent": "claude", "role": "reviewer"},
	} {
		if got := call(t, boss, "cotal_spawn", args, true); !strings.Contains(got, "permission-denied") || !strings.Contains(got, "its caller") {
			t.Errorf("cotal_spawn(%v) beyond the spawner's grant: %s", args, got)
		}
	}
	got := call(t, boss, "cotal_spawn", map[string]any{"name": "helper", "agent": "claude", "subscribe": general}, false)
	if !strings.Contains(got, "spawned local.helper") || !strings.Contains(got, manager.GoalSucceeded) {
		t.Fatalf("cotal_spawn: %s", got)
	}
	if got := call(t, boss, "cotal_spawn", map[string]any{"name": "helper", "agent": "claude"}, true); !strings.Contains(got, "already-exists") {
		t.Errorf("a second spawn of a running name: %s", got)
	}
	if got := call(t, boss, "cotal_despawn", map[string]any{"name": "helper"}, false); !strings.Contains(got, "stopped helper (local.helper") {
		t.Errorf("cotal_despawn helper: %s", got)
	}
	if got := call(t, boss, "cotal_despawn", nil, true); !strings.Contains(got, "not-found") {
		t.Errorf("cotal_despawn of an agent no manager spawned: %s", got)
	}
	meshtest.Eventually(t, wait, "helper's credential to be retired", func() bool {
		rows, err := m.Ledger("").Credentials(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Principal == "local.helper" && r.State == authstore.CredActive {
				return false
			}
		}
		return true
	})
}

// TestMCPPersonas drives cotal_persona and cotal_personas against a real manager: an agent with
// the spawn capability defines a persona within its own grant (the manager refuses one beyond
// it), lists and shows it, and spawns an agent from it.
func TestMCPPersonas(t *testing.T) {
	fakeClaude(t)
	m := meshtest.Start(t, meshtest.WithDaemons())
	general := []string{"general"}
	boss, _ := sessionAs(t, m, ledger.Request{Name: "boss", Capabilities: []string{authority.CapabilitySpawn}, Subscribe: general, AllowPublish: general})
	if got := call(t, boss, "cotal_persona", map[string]any{"name": "scribe", "prompt": "Write it down.", "allowPublish": []string{"secret"}}, true); !strings.Contains(got, "permission-denied") {
		t.Errorf("cotal_persona beyond the caller's grant: %s", got)
	}
	if got := call(t, boss, "cotal_persona", map[string]any{"name": "scribe", "prompt": "Write it down.", "agent": "claude", "subscribe": general}, false); !strings.Contains(got, "defined persona scribe") {
		t.Fatalf("cotal_persona: %s", got)
	}
	if got := call(t, boss, "cotal_personas", nil, false); !strings.Contains(got, "- scribe owner=local.boss") {
		t.Errorf("cotal_personas: %s", got)
	}
	if got := call(t, boss, "cotal_personas", map[string]any{"name": "scribe"}, false); !strings.Contains(got, "Write it down.") {
		t.Errorf("cotal_personas of scribe: %s", got)
	}
	if got := call(t, boss, "cotal_spawn", map[string]any{"name": "scribe", "persona": "scribe"}, false); !strings.Contains(got, "spawned local.scribe") {
		t.Errorf("cotal_spawn of the persona: %s", got)
	}
}
