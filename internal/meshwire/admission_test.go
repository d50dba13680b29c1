package meshwire

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gocotal/cotal/wire"
)

// TestCeilingReads: a ceiling built from a caller's read channels covers a channel its patterns
// cover, from anyone or from one sender, and nothing wider; deny wins; none denies all.
func TestCeilingReads(t *testing.T) {
	sp := wire.Space("main")
	carol, _ := wire.NewPrincipal("local", "carol")
	c, err := GrantCeiling(sp, carol, []string{"team.backend"}, []string{"team.*", "general"})
	if err != nil {
		t.Fatal(err)
	}
	a := Admission{Ceiling: c}
	for _, tt := range []struct {
		channel string
		from    *wire.Principal
		want    bool
	}{
		{"general", nil, true},
		{"team.backend", nil, true},
		{"team.*", nil, true},
		{"random", nil, false},
		{">", nil, false},
		{"team.backend", &carol, true},
		{">", &carol, false},
	} {
		var got bool
		if tt.from != nil {
			got, err = a.MayReadFrom(sp, *tt.from, tt.channel)
		} else {
			got, err = a.MayRead(sp, tt.channel)
		}
		if err != nil || got != tt.want {
			t.Errorf("read %q from %v: %v %v, want %v", tt.channel, tt.from, got, err, tt.want)
		}
	}
	a.Ceiling.Subscribe.Deny = []string{"cotal.main.chat.*.*.team.secret"}
	if ok, _ := a.MayRead(sp, "team.*"); ok {
		t.Error("a pattern overlapping a deny was allowed")
	}
	if ok, _ := a.MayRead(sp, "team.backend"); !ok {
		t.Error("a channel beside the deny was refused")
	}
	none, _ := GrantCeiling(sp, carol, nil, nil)
	if ok, _ := (Admission{Ceiling: none}).MayRead(sp, "general"); ok || none.Publish.Allow.Mode != AllowNone {
		t.Errorf("an empty grant's ceiling %+v allowed a read", none)
	}
	if ok, _ := (Admission{Ceiling: CeilingAll()}).MayRead(sp, ">"); !ok {
		t.Error("the operator's ceiling refused a read")
	}
}

// TestAdmissionRecords: an admission and a revocation round-trip in the reference's field names;
// a record with a field more, another version, a provenance of neither kind or a ceiling mode
// it does not know is refused; a run program's hash must be its source's.
func TestAdmissionRecords(t *testing.T) {
	a := Admission{Version: 1, Space: "main", Endpoint: "manager", RunID: "run-1", InstanceID: "i1",
		Caller: Caller{Owner: "local", Actor: "cli", UID: "u1"}, Ceiling: CeilingAll(),
		Provenance: Provenance{Kind: ProvenanceOperator, By: "local.cli", Reason: "a test"}, AdmittedAt: 5}
	data, _ := json.Marshal(a)
	for _, want := range []string{`"runId":"run-1"`, `"instanceId":"i1"`, `"ceiling":{"publish":{"allow":{"mode":"all"},"deny":[]}`, `"admittedAt":5`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the admission %s lacks %s", data, want)
		}
	}
	if _, err := ParseAdmission(data); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(string) string{
		"a field more":     func(s string) string { return strings.Replace(s, `"version":1`, `"version":1,"extra":1`, 1) },
		"another version":  func(s string) string { return strings.Replace(s, `"version":1`, `"version":2`, 1) },
		"no provenance":    func(s string) string { return strings.Replace(s, `"kind":"operator"`, `"kind":"trust-me"`, 1) },
		"an unknown mode":  func(s string) string { return strings.Replace(s, `"mode":"all"`, `"mode":"most"`, 1) },
		"patterns of none": func(s string) string { return strings.Replace(s, `"mode":"all"}`, `"mode":"all","patterns":["x"]}`, 1) },
	} {
		if _, err := ParseAdmission([]byte(edit(string(data)))); err == nil {
			t.Errorf("an admission with %s was taken", name)
		}
	}
	rev, err := NewRevocation("run-1", "ann", "pulled", 7)
	if err != nil {
		t.Fatal(err)
	}
	data, _ = json.Marshal(rev)
	if got, err := ParseRevocation(data, "run-1"); err != nil || got != rev {
		t.Errorf("the revocation round-trip: %+v %v", got, err)
	}
	if _, err := ParseRevocation(data, "run-2"); err == nil {
		t.Error("another run's revocation was taken")
	}
	if _, err := NewRevocation("run-1", "", "pulled", 7); err == nil {
		t.Error("a revocation naming no one was made")
	}
	p := NewRunProgram("run-1", "log(1)", 3)
	data, _ = json.Marshal(p)
	if got, err := ParseRunProgram(data, "run-1"); err != nil || got != p {
		t.Errorf("the program round-trip: %+v %v", got, err)
	}
	if _, err := ParseRunProgram([]byte(strings.Replace(string(data), "log(1)", "log(2)", 1)), "run-1"); err == nil {
		t.Error("a program whose source is not its hash's was taken")
	}
}
