package manager_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/manifest"
	"github.com/gocotal/cotal/internal/persona"
	"github.com/gocotal/cotal/wire"
)

// TestCatalogCommands drives the persona catalog, models and resolve-cwd as the operator.
func TestCatalogCommands(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	dir := t.TempDir()
	f.serve(t, "cotal_manager", 0, func(c *manager.ServiceConfig) { c.Personas = dir })
	mc, _, _ := operator(t, f.m)
	ctx := t.Context()

	var def map[string]string
	if err := mc.Ask(ctx, manager.CommandDefinePersona, manager.PersonaArgs{Name: "reviewer", Persona: "Review every change.", Role: "review",
		Agent: "cotal", Subscribe: []string{"general"}}, &def); err != nil {
		t.Fatalf("define-persona: %v", err)
	}
	if def["path"] != filepath.Join(dir, "reviewer.md") {
		t.Fatalf("define-persona wrote %q", def["path"])
	}
	file, err := persona.Load(dir, "reviewer")
	if err != nil || file.Role != "review" || file.Persona != "Review every change." || len(file.AllowPublish) != 0 {
		t.Fatalf("the file defined: %+v, %v", file, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken.md"), []byte("---\nname: [\n---\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var list struct {
		Personas []manager.PersonaRow `json:"personas"`
	}
	if err := mc.Ask(ctx, manager.CommandListPersonas, nil, &list); err != nil {
		t.Fatalf("list-personas: %v", err)
	}
	if len(list.Personas) != 2 || list.Personas[0].Name != "broken" || list.Personas[0].Error == "" ||
		list.Personas[1].Name != "reviewer" || list.Personas[1].Role != "review" || list.Personas[1].Persona != "" {
		t.Fatalf("list-personas: %+v", list.Personas)
	}
	var show manager.PersonaRow
	if err := mc.Ask(ctx, manager.CommandShowPersona, map[string]string{"name": "reviewer"}, &show); err != nil || show.Persona != "Review every change." {
		t.Fatalf("show-persona: %+v, %v", show, err)
	}
	if err := mc.Ask(ctx, manager.CommandShowPersona, map[string]string{"name": "nobody"}, &show); codeOf(err) != wire.CodeNotFound {
		t.Fatalf("show-persona of no persona: %v", err)
	}
	if err := mc.Ask(ctx, manager.CommandDefinePersona, manager.PersonaArgs{Name: "bad name", Persona: "x"}, &def); codeOf(err) != wire.CodeBadRequest {
		t.Fatalf("define-persona of a bad name: %v", err)
	}

	var models struct {
		Catalogs []manager.Catalog `json:"catalogs"`
	}
	if err := mc.Ask(ctx, manager.CommandModels, map[string]string{"agent": "claude"}, &models); err != nil ||
		len(models.Catalogs) != 1 || !models.Catalogs[0].Supported || len(models.Catalogs[0].Models) == 0 {
		t.Fatalf("models of claude: %+v, %v", models, err)
	}
	if err := mc.Ask(ctx, manager.CommandModels, map[string]string{"agent": "emacs"}, &models); codeOf(err) != wire.CodeBadRequest {
		t.Fatalf("models of no harness: %v", err)
	}

	var cwd map[string]string
	real, _ := filepath.EvalSymlinks(dir)
	if err := mc.Ask(ctx, manager.CommandResolveCwd, map[string]string{"cwd": dir}, &cwd); err != nil || cwd["cwd"] != real || cwd["host"] == "" {
		t.Fatalf("resolve-cwd: %v, %v", cwd, err)
	}
	for _, bad := range []string{"relative/dir", filepath.Join(dir, "reviewer.md"), filepath.Join(dir, "missing")} {
		if err := mc.Ask(ctx, manager.CommandResolveCwd, map[string]string{"cwd": bad}, &cwd); codeOf(err) == "" {
			t.Errorf("resolve-cwd %s answered %v", bad, cwd)
		}
	}
}

// TestLaunchRefusals shows launch refusing a run it does not hold, an agent the run does not
// launch, an inline spec of another run or space, one whose hash is not its fields', and a
// kickoff message for cotal's own agent, which reads none.
func TestLaunchRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	runs := t.TempDir()
	f.serve(t, "cotal_manager", 0, func(c *manager.ServiceConfig) { c.Runs = runs })
	mc, _, _ := operator(t, f.m)
	ctx := t.Context()
	id, spec := launchSpec(t, "ann", "instructions: Hello.")
	raw, _ := json.Marshal(spec)
	other := *spec
	other.Space = "elsewhere"
	otherRaw, _ := json.Marshal(other)
	tampered := *spec
	tampered.Agents = []manifest.LaunchAgent{spec.Agents[0]}
	tampered.Agents[0].AllowPublish = []string{"general"}
	tamperedRaw, _ := json.Marshal(tampered)
	kickoffID, kickoffSpec := launchSpec(t, "kim", "instructions: Hello.\n    prompt: Say hello in general.")
	kickoffRaw, _ := json.Marshal(kickoffSpec)
	personsID, persons := launchSpec(t, "pat", "instructions: Hello.")
	persons.Owner = "u_" + strings.Repeat("a", 26)
	personsRaw, _ := json.Marshal(persons)
	badOwner := *persons
	badOwner.Owner = "local"
	badOwnerRaw, _ := json.Marshal(badOwner)
	for _, tc := range []struct {
		name string
		args manager.LaunchArgs
		code wire.ErrorCode
	}{
		{"a bad run id", manager.LaunchArgs{RunID: "x", Name: "ann"}, wire.CodeBadRequest},
		{"an unknown run", manager.LaunchArgs{RunID: id, Name: "ann"}, wire.CodeNotFound},
		{"an agent the run does not launch", manager.LaunchArgs{RunID: id, Name: "bob", Spec: raw}, wire.CodeNotFound},
		{"a spec of another run", manager.LaunchArgs{RunID: manifest.NewRunID(), Name: "ann", Spec: raw}, wire.CodeBadRequest},
		{"a spec of another space", manager.LaunchArgs{RunID: id, Name: "ann", Spec: otherRaw}, wire.CodeFailedPrecondition},
		{"a spec whose hash is not its fields'", manager.LaunchArgs{RunID: id, Name: "ann", Spec: tamperedRaw}, wire.CodeBadRequest},
		{"a kickoff for cotal's agent", manager.LaunchArgs{RunID: kickoffID, Name: "kim", Spec: kickoffRaw}, wire.CodeBadRequest},
		{"a person's run, by the operator", manager.LaunchArgs{RunID: personsID, Name: "pat", Spec: personsRaw}, wire.CodePermissionDenied},
		{"a run of an owner that is no person's", manager.LaunchArgs{RunID: personsID, Name: "pat", Spec: badOwnerRaw}, wire.CodeBadRequest},
	} {
		if _, err := mc.Launch(ctx, "", tc.args); codeOf(err) != tc.code {
			t.Errorf("launch with %s: %v, want %s", tc.name, err, tc.code)
		}
	}
	if _, err := manifest.LoadLaunchSpec(runs, id); err != nil {
		t.Errorf("the inline spec of the run was not kept: %v", err)
	}
}

// TestLaunchLeavesTheClassRail: a manager with no run directory launches no manifest, so it does
// not take launch on the class rail, where a deploy's launch goes: every class-rail launch reaches
// the manager that keeps runs, while the other still answers on its own rail.
func TestLaunchLeavesTheClassRail(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.serve(t, "cotal_manager", 0, func(c *manager.ServiceConfig) { c.Runs = t.TempDir() })
	runless := f.serve(t, "cotal_runless", 0)
	mc, _, _ := operator(t, f.m)
	ctx := t.Context()
	args := manager.LaunchArgs{RunID: manifest.NewRunID(), Name: "ann"}
	for i := range 12 {
		if _, err := mc.Launch(ctx, "", args); codeOf(err) != wire.CodeNotFound {
			t.Fatalf("class-rail launch %d: %v, want the run-keeping manager's not-found", i, err)
		}
	}
	if _, err := mc.Launch(ctx, runless.instance, args); codeOf(err) != wire.CodeUnimplemented {
		t.Errorf("launch on the run-less manager's own rail: %v, want unimplemented", err)
	}
}

// launchSpec returns a new run id and the launch spec of a one-agent team of cotal's own agent,
// name, given the agent's keys (fields, indented as the manifest nests them) and #general.
func launchSpec(t *testing.T, name, fields string) (string, *manifest.LaunchSpec) {
	t.Helper()
	m, err := manifest.Parse("cotal.yaml", []byte("apiVersion: cotal/v1\nkind: Mesh\nspace: main\nagent: cotal\n"+
		"agents:\n  "+name+":\n    "+fields+"\nchannels:\n  general:\n    subscribe: ["+name+"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	id := manifest.NewRunID()
	spec, err := m.Launch(id)
	if err != nil {
		t.Fatal(err)
	}
	return id, spec
}
