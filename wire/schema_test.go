package wire

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaPath locates the Cotal message schema: $COTAL_SCHEMA, else the copy in shared/ beside the
// repository (where CI and developers have it).
func schemaPath() string {
	if p := os.Getenv("COTAL_SCHEMA"); p != "" {
		return p
	}
	return filepath.Join("..", "..", "shared", "reference", "cotal.schema.json")
}

// compileSchema compiles one definition of the schema, skipping the test when the schema file is
// absent (a clone used on its own has no shared/ beside it).
func compileSchema(t *testing.T, definition string) *jsonschema.Schema {
	t.Helper()
	path, err := filepath.Abs(schemaPath())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Skipf("schema not found at %s (set COTAL_SCHEMA to its path): %v", path, err)
	}
	c := jsonschema.NewCompiler()
	url := "file://" + filepath.ToSlash(path)
	if definition != "" {
		url += "#/definitions/" + definition
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatalf("compile %s: %v", url, err)
	}
	return s
}

func validateAgainst(t *testing.T, s *jsonschema.Schema, doc []byte) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("decode %s: %v", doc, err)
	}
	return s.Validate(v)
}

// TestMessagesValidateAgainstSchema checks that every message shape wire produces is valid under
// the normative schema, and that the shapes it refuses the schema refuses too.
func TestMessagesValidateAgainstSchema(t *testing.T) {
	s := compileSchema(t, "")
	data, err := DataPart(map[string]any{"k": []any{1.5, "s", nil, true}})
	if err != nil {
		t.Fatal(err)
	}
	art, err := ArtifactPart("report.html", "text/html", ContentDigest([]byte("x")), 1)
	if err != nil {
		t.Fatal(err)
	}
	ext := Part{Kind: "ai.cotal.test", Extra: map[string]json.RawMessage{"rev": json.RawMessage("2")}}
	parts := []Part{TextPart("hi"), data, art, ext}
	base := CotalMessage{
		ID: NewMessageID(), TS: 1710000000000, Space: "main",
		From:     EndpointRef{ID: ownerA + ".alice", Name: "alice", Role: "planner"},
		Mentions: NormalizeMentions([]string{"Bob"}), Parts: parts, ReplyTo: "m0", ContextID: "ctx",
	}
	for name, edit := range map[string]func(m *CotalMessage){
		"multicast": func(m *CotalMessage) { m.Channel = "team.backend" },
		"unicast":   func(m *CotalMessage) { m.To = ownerB + ".bob" },
		"anycast":   func(m *CotalMessage) { m.ToService = "reviewer" },
		"no parts":  func(m *CotalMessage) { m.Channel = "x"; m.Parts = []Part{} },
	} {
		t.Run(name, func(t *testing.T) {
			m := base
			edit(&m)
			b, err := EncodeMessage(&m, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := validateAgainst(t, s, b); err != nil {
				t.Errorf("%s does not validate: %v\n%s", name, err, b)
			}
		})
	}
	for name, doc := range map[string]string{
		"two routing fields": `{"id":"m","ts":1,"space":"s","from":{"id":"a.b","name":"n"},"channel":"c","to":"x","parts":[]}`,
		"bare unknown kind":  `{"id":"m","ts":1,"space":"s","from":{"id":"a.b","name":"n"},"channel":"c","parts":[{"kind":"image"}]}`,
		"bad digest":         `{"id":"m","ts":1,"space":"s","from":{"id":"a.b","name":"n"},"channel":"c","parts":[{"kind":"artifact","name":"n","mediaType":"t","digest":"md5:x","size":1}]}`,
	} {
		t.Run("refused/"+name, func(t *testing.T) {
			if err := validateAgainst(t, s, []byte(doc)); err == nil {
				t.Errorf("the schema accepts %s, which wire refuses", name)
			}
			if _, err := DecodeMessage([]byte(doc)); err == nil {
				t.Errorf("wire accepts %s, which the schema refuses", name)
			}
		})
	}
}

func TestPresenceValidatesAgainstSchema(t *testing.T) {
	s := compileSchema(t, "Presence")
	b, err := json.Marshal(samplePresence())
	if err != nil {
		t.Fatal(err)
	}
	if err := validateAgainst(t, s, b); err != nil {
		t.Errorf("presence does not validate: %v\n%s", err, b)
	}
	minimal := Presence{Card: AgentCard{ID: "local.dev1", Name: "dev1", Kind: KindEndpoint}, Status: StatusIdle, TS: 1}
	b, err = json.Marshal(minimal)
	if err != nil {
		t.Fatal(err)
	}
	if err := validateAgainst(t, s, b); err != nil {
		t.Errorf("minimal presence does not validate: %v\n%s", err, b)
	}
}
