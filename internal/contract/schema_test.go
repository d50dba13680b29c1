package contract_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gocotal/cotal/internal/contract"
)

// sha is "sha256:<hex>" of b, computed here without the package's canonicalizer.
func sha(b string) string {
	sum := sha256.Sum256([]byte(b))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func mustCompile(t *testing.T, root string, members map[string][]byte) *contract.Schema {
	t.Helper()
	s, err := contract.Compile([]byte(root), members)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestVoidDigest pins the void schema's closure digest against a computation that shares nothing
// with the package: the canonical texts written out by hand and hashed with crypto/sha256, and the
// value sha256sum gives for them.
func TestVoidDigest(t *testing.T) {
	root := sha(`{"type":"null"}`)
	manifest := `{"members":[],"root":"` + root + `","v":1}`
	want := sha(manifest)
	if want != "sha256:1db0472aaee8e6b9d8d3d430ee021a1b6efc559ab7c0b99186898c972c53dd2d" {
		t.Fatalf("independent computation gives %s", want)
	}
	if got := contract.VoidDigest(); got != want {
		t.Errorf("VoidDigest() = %s, want %s", got, want)
	}
	c := mustCompile(t, contract.VoidSchema, nil).Closure()
	if c.Root != root || len(c.Members) != 0 || string(c.Manifest) != manifest || c.Digest != want {
		t.Errorf("void closure %+v", c)
	}
	if d, err := contract.ArtifactDigest([]byte(" { \"type\" : \"null\" } ")); err != nil || d != root {
		t.Errorf("ArtifactDigest of a non-canonical spelling = %s, %v; want %s", d, err, root)
	}
}

func TestVoidSchemaAcceptsOnlyNull(t *testing.T) {
	void := mustCompile(t, contract.VoidSchema, nil)
	for _, ok := range []string{"", " ", "null", " null\n"} {
		if err := void.Validate([]byte(ok)); err != nil {
			t.Errorf("Validate(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"0", "false", `""`, "{}", "[]", `{"a":null}`, "null null", "nul"} {
		if err := void.Validate([]byte(bad)); !errors.Is(err, contract.ErrBadRequest) {
			t.Errorf("Validate(%q) = %v, want bad-request", bad, err)
		}
	}
}

func TestValidateNamesThePath(t *testing.T) {
	s := mustCompile(t, `{
		"type": "object",
		"properties": {
			"items": {"type": "array", "items": {"$ref": "#/$defs/item"}},
			"a/b~c": {"type": "integer"}
		},
		"required": ["items"],
		"additionalProperties": false,
		"$defs": {"item": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}}
	}`, nil)
	for _, tc := range []struct{ value, path string }{
		{`{"items":[{"n":1},{"n":"x"}]}`, "/items/1/n"},
		{`{"items":[{"n":0}]}`, "/items/0/n"},
		{`{"items":[],"a/b~c":"x"}`, "/a~1b~0c"},
		{`{"items":[],"extra":1}`, ""},
		{`{}`, ""},
		{`[]`, ""},
		{`{"items":[],"items":[]}`, ""}, // duplicate keys are not I-JSON
	} {
		err := s.Validate([]byte(tc.value))
		var ve *contract.ValueError
		if !errors.As(err, &ve) || !errors.Is(err, contract.ErrBadRequest) {
			t.Errorf("Validate(%s) = %v, want a *ValueError", tc.value, err)
			continue
		}
		if ve.Path != tc.path || ve.Reason == "" {
			t.Errorf("Validate(%s): path %q reason %q, want path %q", tc.value, ve.Path, ve.Reason, tc.path)
		}
		if tc.path != "" && !strings.Contains(err.Error(), tc.path) {
			t.Errorf("error %q does not name %s", err, tc.path)
		}
	}
	if err := s.Validate([]byte(`{"items":[{"n":2}],"a/b~c":3}`)); err != nil {
		t.Errorf("a valid value: %v", err)
	}
}

// nested returns a schema whose arrays and objects nest depth deep.
func nested(depth int) string {
	s := `{"type":"integer"}` // depth 1
	for i := 1; i < depth; i++ {
		s = `{"items":` + s + `}`
	}
	return s
}

func TestCompileRefusesOutsideTheProfile(t *testing.T) {
	unknown := "cotal:" + sha("{}")
	big := `{"description":"` + strings.Repeat("x", contract.MaxDocumentBytes) + `"}`
	for _, tc := range []struct {
		name, root string
	}{
		{"not JSON", `{"type":`},
		{"duplicate keys", `{"type":"null","type":"string"}`},
		{"document over 256 KiB", big},
		{"nesting over 32", nested(contract.MaxNesting + 1)},
		{"unknown digest", `{"$ref":"` + unknown + `"}`},
		{"unknown digest with a fragment", `{"properties":{"a":{"$ref":"` + unknown + `#/$defs/x"}}}`},
		{"https ref", `{"$ref":"https://example.com/schema.json"}`},
		{"file ref", `{"$ref":"file:///etc/schema.json"}`},
		{"relative ref", `{"$ref":"other.json"}`},
		{"urn ref", `{"$ref":"urn:example:x"}`},
		{"bare digest ref", `{"$ref":"` + sha("{}") + `"}`},
		{"dynamic ref elsewhere", `{"$dynamicRef":"https://example.com/x#meta"}`},
		{"draft-07", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"null"}`},
		{"foreign meta-schema", `{"$schema":"https://example.com/meta","type":"null"}`},
		{"pattern over the bound", `{"pattern":"` + strings.Repeat("a", contract.MaxPatternLength+1) + `"}`},
		{"pattern outside RE2", `{"pattern":"(?=a)b"}`},
		{"meta-schema refuses", `{"type":"nul"}`},
	} {
		_, err := contract.Compile([]byte(tc.root), nil)
		if !errors.Is(err, contract.ErrInvalid) {
			t.Errorf("%s: %v, want contract-invalid", tc.name, err)
		}
	}
	if _, err := contract.Compile([]byte(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"null"}`), nil); err != nil {
		t.Errorf("a schema naming 2020-12: %v", err)
	}
	if _, err := contract.Compile([]byte(nested(contract.MaxNesting)), nil); err != nil {
		t.Errorf("nesting at the bound: %v", err)
	}
	if _, err := contract.Compile([]byte(`{"pattern":"`+strings.Repeat("a", contract.MaxPatternLength)+`"}`), nil); err != nil {
		t.Errorf("a pattern at the bound: %v", err)
	}
}

// chain returns a root and the members of a by-digest reference chain n references long.
func chain(n int) (string, map[string][]byte) {
	members := map[string][]byte{}
	doc := `{"type":"integer"}`
	for range n {
		members[sha(doc)] = []byte(doc)
		doc = `{"$ref":"cotal:` + sha(doc) + `"}`
	}
	return doc, members
}

func TestCompileBoundsTheClosure(t *testing.T) {
	root, members := chain(contract.MaxRefChain)
	s, err := contract.Compile([]byte(root), members)
	if err != nil {
		t.Fatalf("a chain at the bound: %v", err)
	}
	if n := len(s.Closure().Members); n != contract.MaxRefChain {
		t.Errorf("%d members, want %d", n, contract.MaxRefChain)
	}
	if err := s.Validate([]byte(`"x"`)); !errors.Is(err, contract.ErrBadRequest) {
		t.Errorf("the chain's leaf is not applied: %v", err)
	}
	root, members = chain(contract.MaxRefChain + 1)
	if _, err := contract.Compile([]byte(root), members); !errors.Is(err, contract.ErrInvalid) {
		t.Errorf("a chain over the bound: %v", err)
	}

	// Five members of 250 KiB each: each within the document bound, together over the closure's.
	members = map[string][]byte{}
	var props []string
	for i := range 5 {
		m := fmt.Sprintf(`{"description":"%d%s"}`, i, strings.Repeat("x", 250<<10))
		members[sha(m)] = []byte(m)
		props = append(props, fmt.Sprintf(`"p%d":{"$ref":"cotal:%s"}`, i, sha(m)))
	}
	root = `{"properties":{` + strings.Join(props, ",") + `}}`
	if _, err := contract.Compile([]byte(root), members); !errors.Is(err, contract.ErrInvalid) {
		t.Errorf("a closure over 1 MiB: %v", err)
	}
}

func TestClosureMembers(t *testing.T) {
	leaf := `{"type":"string"}`
	mid := `{"anyOf":[{"$ref":"cotal:` + sha(leaf) + `"},{"type":"null"}]}`
	root := `{"properties":{"a":{"$ref":"cotal:` + sha(mid) + `"},"b":{"$ref":"cotal:` + sha(leaf) + `#"}}}`
	members := map[string][]byte{sha(leaf): []byte(leaf), sha(mid): []byte(mid), sha(`{"unused":true}`): []byte(`{"unused":true}`)}
	s := mustCompile(t, root, members)
	c := s.Closure()
	want := []string{sha(leaf), sha(mid)}
	slices.Sort(want)
	if c.Root != sha(root) || !slices.Equal(c.Members, want) || slices.Contains(c.Members, c.Root) {
		t.Errorf("closure root %s members %v, want %s %v", c.Root, c.Members, sha(root), want)
	}
	manifest := `{"members":["` + want[0] + `","` + want[1] + `"],"root":"` + sha(root) + `","v":1}`
	if string(c.Manifest) != manifest || c.Digest != sha(manifest) {
		t.Errorf("manifest %s digest %s", c.Manifest, c.Digest)
	}
	var got []string
	for _, a := range s.Artifacts() {
		got = append(got, a.Digest)
	}
	if len(got) != 4 || got[0] != c.Root || got[3] != c.Digest {
		t.Errorf("artifacts %v: want the root, the two members, then the manifest", got)
	}
	if err := s.Validate([]byte(`{"a":1}`)); !errors.Is(err, contract.ErrBadRequest) {
		t.Errorf("the member schema is not applied: %v", err)
	}

	// A member under another artifact's digest is refused.
	wrong := map[string][]byte{sha(leaf): []byte(`{"type":"integer"}`), sha(mid): []byte(mid)}
	if _, err := contract.Compile([]byte(root), wrong); !errors.Is(err, contract.ErrInvalid) {
		t.Errorf("a member under a wrong digest: %v", err)
	}
}
