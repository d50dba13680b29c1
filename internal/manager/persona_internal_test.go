package manager

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gocotal/cotal/internal/runhost"
	"github.com/gocotal/cotal/wire"
)

// TestApplyPersona: a spawn's config fills it from the agent file in the manager's catalog; the
// spawn's own fields win, its channel fields only narrow, and the file's capabilities are returned
// for the agent's credential.
func TestApplyPersona(t *testing.T) {
	dir := t.TempDir()
	file := "---\nname: lead\nrole: lead\nagent: claude\nmodel: opus\nsubscribe: [general]\nallowSubscribe: [general, team.>]\nallowPublish: [general]\ncapabilities: [spawn]\n---\nLead the team.\n"
	if err := os.WriteFile(filepath.Join(dir, "lead.md"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	a := SpawnArgs{Name: "lead", Config: "lead", Model: "sonnet", Prompt: "Start with the plan."}
	caps, refusal := a.applyPersona(dir)
	if refusal != nil {
		t.Fatal(refusal)
	}
	if a.Config != "" || a.Role != "lead" || a.Agent != "claude" || a.Model != "sonnet" || a.instructions != "Lead the team." || a.Prompt != "Start with the plan." {
		t.Errorf("merged spawn: %+v", a)
	}
	if !slices.Equal(a.Subscribe, []string{"general"}) || !slices.Equal(a.AllowSubscribe, []string{"general", "team.>"}) || !slices.Equal(caps, []string{"spawn"}) {
		t.Errorf("grants %q %q %q, capabilities %q", a.Subscribe, a.AllowSubscribe, a.AllowPublish, caps)
	}
	narrow := SpawnArgs{Name: "lead", Config: "lead", AllowSubscribe: []string{"team.backend"}}
	if _, refusal := narrow.applyPersona(dir); refusal != nil || !slices.Equal(narrow.AllowSubscribe, []string{"team.backend"}) {
		t.Errorf("a narrowing spawn: %+v, %v", narrow, refusal)
	}
	for _, bad := range []SpawnArgs{
		{Name: "lead", Config: "lead", AllowPublish: []string{"team.backend"}},
		{Name: "x", Config: "nobody"},
		{Name: "x", Config: "../lead"},
	} {
		if _, refusal := bad.applyPersona(dir); refusal == nil {
			t.Errorf("%+v was accepted", bad)
		}
	}
	// cotal's own agent takes neither the file's model nor its instructions.
	cotal := SpawnArgs{Name: "lead", Config: "lead", Agent: string(HarnessCotal)}
	if _, refusal := cotal.applyPersona(dir); refusal != nil || cotal.instructions != "" || cotal.Model != "" {
		t.Errorf("the cotal harness was given the persona's model %q or instructions %q: %v", cotal.Model, cotal.instructions, refusal)
	}
	if _, refusal := (&SpawnArgs{Name: "x", Config: "nobody"}).applyPersona(dir); refusal == nil || refusal.Code != wire.CodeNotFound || !strings.Contains(refusal.Message, "no persona nobody") {
		t.Errorf("a missing persona: %v", refusal)
	}
}

// TestCotalHints: an agent: cotal persona's onAsk, turnTakes and startTakes become its agent's
// --on-ask, --turn-takes and --start-takes; a value that is not JSON, or not a duration, refuses the spawn naming the key;
// another harness's persona passes no such argument.
func TestCotalHints(t *testing.T) {
	dir := t.TempDir()
	write := func(name, front string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte("---\nname: "+name+"\n"+front+"---\nWork.\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("tester", "agent: cotal\nonAsk: '{\"ok\": true}'\nturnTakes: 2s\nstartTakes: 1s\n")
	write("badstart", "agent: cotal\nstartTakes: -1s\n")
	write("badask", "agent: cotal\nonAsk: 'not json'\n")
	write("badtime", "agent: cotal\nturnTakes: soon\n")
	write("model", "agent: claude\nonAsk: '{}'\n")
	a := SpawnArgs{Config: "tester"}
	if _, refusal := a.applyPersona(dir); refusal != nil {
		t.Fatal(refusal)
	}
	sp, refusal := a.spec(false)
	if refusal != nil || !slices.Equal(sp.Command, []string{"--on-ask", `{"ok": true}`, "--turn-takes", "2s", "--start-takes", "1s"}) {
		t.Errorf("the cotal agent's arguments: %q %v", sp.Command, refusal)
	}
	for name, key := range map[string]string{"badask": "onAsk", "badtime": "turnTakes", "badstart": "startTakes"} {
		a := SpawnArgs{Config: name}
		if _, refusal := a.applyPersona(dir); refusal == nil || !strings.Contains(refusal.Error(), key) {
			t.Errorf("persona %s: %v", name, refusal)
		}
	}
	m := SpawnArgs{Config: "model"}
	if _, refusal := m.applyPersona(dir); refusal != nil || len(m.cotalArgs) != 0 {
		t.Errorf("a claude persona took cotal's hints: %q %v", m.cotalArgs, refusal)
	}
}

// TestSeatSpec: a run's seat takes its persona's harness, role and grants, with the model and
// the channels to join its step sets: a channel to join within the persona's read access, a
// role only the persona's own, and the run's conclave channel granted beyond the persona.
func TestSeatSpec(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "builder.md"), []byte("---\nname: builder\nagent: claude\nrole: dev\nsubscribe: [general]\nallowSubscribe: [general, team.*]\nallowPublish: [general]\n---\nBuild.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	svc := &Service{cfg: ServiceConfig{Personas: dir}}
	spec, err := svc.seatSpec(runhost.SeatSpec{Name: "builder_1", Persona: "builder", Model: "m-2", Role: "dev", Join: []string{"team.backend"}, Channels: []string{"conclave.abc"}})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Name != "builder_1" || spec.Role != "dev" || spec.Model != "m-2" || !slices.Equal(spec.Subscribe, []string{"general", "team.backend"}) ||
		!slices.Equal(spec.AllowSubscribe, []string{"general", "team.*", "conclave.abc"}) || !slices.Equal(spec.AllowPublish, []string{"general", "conclave.abc"}) {
		t.Errorf("the seat's spec: %+v", spec)
	}
	for _, tt := range []struct {
		sp   runhost.SeatSpec
		want string
	}{
		{runhost.SeatSpec{Name: "b", Persona: "builder", Role: "ops"}, "role ops"},
		{runhost.SeatSpec{Name: "b", Persona: "builder", Join: []string{"secret"}}, "join secret"},
		{runhost.SeatSpec{Name: "b", Persona: "builder", Variant: "fast"}, "variant"},
		{runhost.SeatSpec{Name: "b", Persona: "nobody"}, "no persona nobody"},
	} {
		if _, err := svc.seatSpec(tt.sp); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want an error naming %q", tt.sp, err, tt.want)
		}
	}
}
