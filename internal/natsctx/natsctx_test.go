package natsctx

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	c := Context{Description: "agent credential for local.alice", URL: "nats://127.0.0.1:4222", Creds: "/x/alice.creds", InboxPrefix: "_INBOX_UABC"}
	path, err := Write("cotal-alice", c)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "nats", "context", "cotal-alice.json"); path != want {
		t.Errorf("written to %s, want %s", path, want)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("context file: %v %v", fi, err)
	}
	raw, _ := os.ReadFile(path)
	var got map[string]string
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got["url"] != c.URL || got["creds"] != c.Creds || got["inbox_prefix"] != c.InboxPrefix || !strings.HasPrefix(got["description"], Owned) {
		t.Errorf("context %s", raw)
	}
	// Ours is replaced; someone else's is not.
	if _, err := Write("cotal-alice", c); err != nil {
		t.Errorf("rewriting our own context: %v", err)
	}
	theirs := filepath.Join(filepath.Dir(path), "prod.json")
	if err := os.WriteFile(theirs, []byte(`{"description":"production","url":"nats://prod:4222"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Write("prod", c); err == nil || !strings.Contains(err.Error(), "left untouched") {
		t.Errorf("overwriting another's context: %v", err)
	}
	if raw, _ := os.ReadFile(theirs); !strings.Contains(string(raw), "production") {
		t.Errorf("another's context changed: %s", raw)
	}
	for _, bad := range []string{"", "../x", "a/b", ".hidden", strings.Repeat("a", 65), "sp ace"} {
		if err := ValidName(bad); err == nil {
			t.Errorf("ValidName(%q) accepted", bad)
		}
	}
}
