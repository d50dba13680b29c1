package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/personas"
	"github.com/gocotal/cotal/internal/meshtest"
)

// TestPersonas drives `cotal personas` on a mesh directory with no mesh running: new writes
// .cotal/agents/NAME.md, list and show read it, edit checks what the editor left, rm removes it.
func TestPersonas(t *testing.T) {
	dir := t.TempDir()
	code, out, stderr := run(t, "personas", "new", "reviewer", "--dir", dir)
	path := filepath.Join(dir, ".cotal", "agents", "reviewer.md")
	if code != exit.OK || !strings.Contains(out, path) {
		t.Fatalf("personas new reviewer (exit %d): %s %s", code, out, stderr)
	}
	raw, err := os.ReadFile(path)
	if err != nil || !strings.HasPrefix(string(raw), "---\nname: reviewer\nsubscribe: []\n") {
		t.Fatalf("the written file: %q, %v", raw, err)
	}
	if code, _, stderr := run(t, "personas", "new", "builder", "--dir", dir, "--role", "builder", "--agent", "cotal", "--subscribe", "general",
		"--allow-publish", "general", "--prompt", "Build it."); code != exit.OK {
		t.Fatalf("personas new builder (exit %d): %s", code, stderr)
	}
	code, out, stderr = run(t, "personas", "list", "--dir", dir, "--json")
	var list []personas.Summary
	if err := json.Unmarshal([]byte(out), &list); code != exit.OK || err != nil || len(list) != 2 || list[0].Name != "builder" || list[1].Name != "reviewer" || list[0].Agent != "cotal" {
		t.Fatalf("personas list --json (exit %d): %s %s", code, out, stderr)
	}
	code, out, _ = run(t, "personas", "show", "builder", "--dir", dir, "--json")
	var d personas.Detail
	if err := json.Unmarshal([]byte(out), &d); code != exit.OK || err != nil || d.Persona != "Build it." || d.AllowPublish[0] != "general" || d.Role != "builder" {
		t.Fatalf("personas show --json (exit %d): %s", code, out)
	}
	if code, _, stderr := run(t, "personas", "new", "reviewer", "--dir", dir); code == exit.OK || !strings.Contains(stderr, "--force") {
		t.Errorf("a second new (exit %d): %s", code, stderr)
	}
	for _, bad := range [][]string{
		{"personas", "new", "a.b", "--dir", dir},
		{"personas", "new", "x", "--dir", dir, "--subscribe", "a", "--allow-subscribe", "b"},
		{"personas", "new", "x", "--dir", dir, "--prompt", "p", "--from", "f"},
	} {
		if code, _, stderr := run(t, bad...); code != exit.Usage {
			t.Errorf("%q: exit %d, want usage: %s", bad, code, stderr)
		}
	}
	if code, _, stderr := run(t, "personas", "show", "nobody", "--dir", dir); code == exit.OK || !strings.Contains(stderr, "no persona nobody") {
		t.Errorf("show nobody (exit %d): %s", code, stderr)
	}

	// An editor that leaves the file broken is reported.
	editor := filepath.Join(t.TempDir(), "editor")
	if err := os.WriteFile(editor, []byte("#!/bin/sh\nprintf 'no front matter' > \"$1\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VISUAL", editor)
	if code, _, stderr := run(t, "personas", "edit", "builder", "--dir", dir); code == exit.OK || !strings.Contains(stderr, "no longer reads as a persona") {
		t.Errorf("an edit that broke the file (exit %d): %s", code, stderr)
	}
	if code, out, _ := run(t, "personas", "rm", "builder", "--dir", dir); code != exit.OK || !strings.Contains(out, "removed") {
		t.Errorf("rm builder (exit %d): %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, ".cotal", "agents", "builder.md")); !os.IsNotExist(err) {
		t.Errorf("builder's file after rm: %v", err)
	}
}

// TestSpawnPersona: `cotal spawn PERSONA --agent cotal --detach` starts cotal's own agent under the
// persona's name, role, grants and capabilities, which the manager of `cotal up` reads from its
// catalog; a flag may narrow the persona's grants but not widen them.
func TestSpawnPersona(t *testing.T) {
	meshtest.Long(t, "runs a mesh and a spawned agent")
	t.Setenv(envRunCLI, "1") // the manager runs this test binary as cotal, for the cotal harness
	dir := upMesh(t)
	if code, _, stderr := run(t, "personas", "new", "reviewer", "--dir", dir, "--role", "reviewer", "--subscribe", "general", "--allow-publish", "general"); code != exit.OK {
		t.Fatalf("personas new (exit %d): %s", code, stderr)
	}
	if code, _, stderr := run(t, "spawn", "reviewer", "--dir", dir, "--agent", "cotal", "--allow-publish", "elsewhere", "--detach"); code != exit.NotAuthorized || !strings.Contains(stderr, "never widen") {
		t.Errorf("a spawn widening the persona (exit %d): %s", code, stderr)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--cwd", missing}, "--cwd " + missing},
		{[]string{"--resume"}, "resume"},
		{[]string{"--variant", "high"}, "variant"},
	} {
		args := append([]string{"spawn", "reviewer", "--dir", dir, "--agent", "cotal", "--detach"}, bad.args...)
		if code, _, stderr := run(t, args...); code == exit.OK || !strings.Contains(stderr, bad.want) {
			t.Errorf("spawn reviewer %q (exit %d): %s", bad.args, code, stderr)
		}
	}
	code, out, stderr := run(t, "spawn", "reviewer", "--dir", dir, "--agent", "cotal", "--detach", "--json", "--cwd", t.TempDir())
	if code != exit.OK {
		t.Fatalf("spawn reviewer (exit %d): %s %s", code, out, stderr)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		row, ok := psRows(t, dir)["local.reviewer"]
		if ok && row.Online {
			if row.Role != "reviewer" {
				t.Errorf("reviewer joined as %+v", row)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reviewer never came online: %+v", psRows(t, dir))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code, _, stderr := run(t, "stop", "reviewer", "--dir", dir); code != exit.OK {
		t.Errorf("stop reviewer (exit %d): %s", code, stderr)
	}
}

// TestTopologyView: `cotal topology view -f` resolves a manifest with no broker, and refuses a bad
// one with exit 1 and FILE:LINE:COL naming the key.
func TestTopologyView(t *testing.T) {
	file := filepath.Join("..", "manifest", "testdata", "cotal.yaml")
	code, out, stderr := run(t, "topology", "view", "-f", file, "--json")
	if code != exit.OK {
		t.Fatalf("topology view (exit %d): %s", code, stderr)
	}
	var top struct {
		Agents   map[string]struct{ Read, Post, Subscribe []string }
		Channels map[string]struct{ Read, Post, Subscribe []string }
	}
	if err := json.Unmarshal([]byte(out), &top); err != nil || len(top.Agents) != 3 || len(top.Channels["general"].Post) != 3 || top.Agents["lead"].Read[0] != "decisions" {
		t.Fatalf("topology view --json: %s (%v)", out, err)
	}
	bad := filepath.Join(t.TempDir(), "cotal.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: cotal/v1\nkind: Mesh\nspace: main\nchannels:\n  general:\n    allowPublish: [ghost]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = run(t, "topology", "view", "-f", bad)
	if code != exit.Failed || !strings.Contains(stderr, bad+":6:20:") || !strings.Contains(stderr, `allowPublish names "ghost"`) {
		t.Errorf("a manifest naming an undeclared agent (exit %d): %s", code, stderr)
	}
}
