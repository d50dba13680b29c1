package contract_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gocotal/cotal/internal/contract"
	"github.com/gocotal/cotal/wire"
)

const nameInput = `{"type":"object","required":["name"],"properties":{"name":{"type":"string","minLength":1}},"additionalProperties":false}`

func declarations() []contract.Declaration {
	ceiling := &contract.AdmissionCeiling{MaxBytes: 65536, MaxDepth: 16, MaxItems: 1024}
	return []contract.Declaration{
		{Command: contract.Command{Name: "status", Class: wire.ClassEphemeral, Capability: "deploy.read"},
			Input: json.RawMessage(contract.VoidSchema), Output: json.RawMessage(`{"type":"object"}`)},
		{Command: contract.Command{Name: "stop", Class: wire.ClassEphemeral, Targeted: true,
			Modes: []wire.AuthzMode{wire.ModeOwner, wire.ModeAny}, Capability: "deploy.lifecycle"},
			Input: json.RawMessage(nameInput), Output: json.RawMessage(contract.VoidSchema)},
		{Command: contract.Command{Name: "rollout", Class: wire.ClassJournal, Capability: "deploy.write",
			Action: true, AdmissionCeiling: ceiling},
			Input: json.RawMessage(nameInput), Output: json.RawMessage(contract.VoidSchema)},
	}
}

func TestNewCluster(t *testing.T) {
	c, err := contract.NewCluster("com.acme.deploy", 3, declarations()...)
	if err != nil {
		t.Fatal(err)
	}
	void := contract.VoidDigest()
	named := c.Schemas["stop"].Input.Closure().Digest
	object := c.Schemas["status"].Output.Closure().Digest
	// The document as the reference shapes ai.cotal.manager's: every command's required fields,
	// optional ones only when present, no null anywhere.
	want := `{"attributes":[],"commands":[` +
		`{"capability":"deploy.read","class":"ephemeral","inputDigest":"` + void + `","name":"status","outputDigest":"` + object + `","targeted":false},` +
		`{"capability":"deploy.lifecycle","class":"ephemeral","inputDigest":"` + named + `","modes":["owner","any"],"name":"stop","outputDigest":"` + void + `","targeted":true},` +
		`{"action":true,"admissionCeiling":{"maxBytes":65536,"maxDepth":16,"maxItems":1024},"capability":"deploy.write","class":"journal","inputDigest":"` + named + `","name":"rollout","outputDigest":"` + void + `","targeted":false}` +
		`],"events":[],"revision":3,"urn":"com.acme.deploy"}`

	byDigest := map[string][]byte{}
	for _, a := range c.Artifacts {
		if _, dup := byDigest[a.Digest]; dup {
			t.Errorf("artifact %s listed twice", a.Digest)
		}
		if d, err := contract.ArtifactDigest(a.Bytes); err != nil || d != a.Digest {
			t.Errorf("artifact %s has digest %s (%v)", a.Digest, d, err)
		}
		byDigest[a.Digest] = a.Bytes
	}
	if got := string(byDigest[c.Closure.Root]); got != want {
		t.Errorf("document\n got %s\nwant %s", got, want)
	}
	if len(c.Closure.Members) != 0 || c.Artifacts[len(c.Artifacts)-1].Digest != c.Closure.Digest {
		t.Errorf("cluster closure %+v: no members, its manifest published last", c.Closure)
	}
	// Three distinct schemas (void, the name object, the open object), each with its manifest,
	// then the document and its manifest.
	if len(c.Artifacts) != 8 {
		t.Errorf("%d artifacts, want 8", len(c.Artifacts))
	}
	for _, d := range []string{void, named, object} {
		if byDigest[d] == nil {
			t.Errorf("the manifest %s is not among the artifacts", d)
		}
	}
	if err := c.Schemas["stop"].Input.Validate([]byte(`{"name":""}`)); !errors.Is(err, contract.ErrBadRequest) || !strings.Contains(err.Error(), "/name") {
		t.Errorf("stop's input accepts an empty name: %v", err)
	}
}

func TestNewClusterRefuses(t *testing.T) {
	edit := func(i int, f func(d *contract.Declaration)) []contract.Declaration {
		ds := declarations()
		f(&ds[i])
		return ds
	}
	type refusal struct {
		name  string
		decls []contract.Declaration
	}
	cases := []refusal{
		{"no command", nil},
		{"a bad command name", edit(0, func(d *contract.Declaration) { d.Name = "Status" })},
		{"a command name over 32", edit(0, func(d *contract.Declaration) { d.Name = strings.Repeat("a", 33) })},
		{"a twice-declared command", append(declarations(), declarations()[0])},
		{"an unknown class", edit(0, func(d *contract.Declaration) { d.Class = "record" })},
		{"a targeted command without modes", edit(1, func(d *contract.Declaration) { d.Modes = nil })},
		{"an unknown mode", edit(1, func(d *contract.Declaration) { d.Modes = []wire.AuthzMode{"root"} })},
		{"a mode twice", edit(1, func(d *contract.Declaration) { d.Modes = []wire.AuthzMode{"self", "self"} })},
		{"an untargeted command with modes", edit(0, func(d *contract.Declaration) { d.Modes = []wire.AuthzMode{"self"} })},
		{"a bad capability", edit(0, func(d *contract.Declaration) { d.Capability = "Deploy Read" })},
		{"a journal command without a ceiling", edit(2, func(d *contract.Declaration) { d.AdmissionCeiling = nil })},
		{"a zero ceiling bound", edit(2, func(d *contract.Declaration) { d.AdmissionCeiling.MaxDepth = 0 })},
		{"an ephemeral command with a ceiling", edit(0, func(d *contract.Declaration) { d.AdmissionCeiling = declarations()[2].AdmissionCeiling })},
		{"an ephemeral action", edit(0, func(d *contract.Declaration) { d.Action = true })},
		{"a readiness deadline without the action", edit(0, func(d *contract.Declaration) { d.ReadinessDeadlineMs = new(int64) })},
		{"an unknown effect", edit(0, func(d *contract.Declaration) { d.Effect = "idempotent" })},
		{"a trait that is not a URN", edit(0, func(d *contract.Declaration) { d.Traits = []string{"guarded"} })},
		{"a declared digest", edit(0, func(d *contract.Declaration) { d.InputDigest = contract.VoidDigest() })},
		{"no input schema", edit(0, func(d *contract.Declaration) { d.Input = nil })},
		{"an output schema outside the profile", edit(0, func(d *contract.Declaration) { d.Output = json.RawMessage(`{"$ref":"https://example.com/x"}`) })},
	}
	for _, reserved := range []string{"describe", "cancel", "lease", "commit"} {
		cases = append(cases, refusal{"the reserved " + reserved, edit(0, func(d *contract.Declaration) { d.Name = reserved })})
	}
	for _, tc := range cases {
		if _, err := contract.NewCluster("com.acme.deploy", 1, tc.decls...); !errors.Is(err, contract.ErrInvalid) {
			t.Errorf("%s: %v, want contract-invalid", tc.name, err)
		}
	}
	for _, tc := range []struct {
		urn      string
		revision int64
	}{{"deploy", 1}, {"com.acme.deploy", -1}, {"com.acme.deploy", 1 << 53}} {
		if _, err := contract.NewCluster(tc.urn, tc.revision, declarations()...); !errors.Is(err, contract.ErrInvalid) {
			t.Errorf("URN %q revision %d: %v, want contract-invalid", tc.urn, tc.revision, err)
		}
	}
}

func TestNewClusterOptionalFields(t *testing.T) {
	ms := int64(30000)
	ds := declarations()
	ds[0].Effect, ds[0].Traits = contract.EffectRead, []string{"ai.cotal.guarded"}
	ds[2].ReadinessDeadlineMs = &ms
	c, err := contract.NewCluster("com.acme.deploy", 0, ds...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c.Document.Commands)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"effect":"read","traits":["ai.cotal.guarded"]`, `"readinessDeadlineMs":30000`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("commands %s lack %s", b, want)
		}
	}
	if strings.Contains(string(b), "null") {
		t.Errorf("commands %s carry a null", b)
	}
}
