package manager

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestAgentLogRotates: an agent's log takes what is written, in order, and a write that would
// take it past AgentLogMax moves it to .1 first, so the two files hold the latest output.
func TestAgentLogRotates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "alice.log")
	l := &agentLog{path: path}
	half := bytes.Repeat([]byte("a"), AgentLogMax/2+1)
	for _, p := range [][]byte{[]byte("hello\n"), half, half} {
		if _, err := l.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	old, err := os.ReadFile(path + ".1")
	if err != nil || !bytes.HasPrefix(old, []byte("hello\n")) || len(old) != 6+len(half) {
		t.Errorf("the rotated log: %d bytes, %v", len(old), err)
	}
	cur, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(cur, half) {
		t.Errorf("the current log: %d bytes, %v", len(cur), err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the log's mode: %v %v", fi, err)
	}
}
