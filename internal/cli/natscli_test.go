package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/cli/mint"
	"github.com/gocotal/cotal/internal/meshtest"
)

// natsCLIVersion is the nats CLI the tests drive when none is on PATH.
const natsCLIVersion = "v0.5.0"

// natsCLI returns the nats CLI: the one on PATH, else one built once from the Go module proxy into
// the user's cache directory.
func natsCLI(t *testing.T) string {
	t.Helper()
	if path, err := exec.LookPath("nats"); err == nil {
		return path
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Skipf("no nats CLI on PATH and no cache directory to build one in: %v", err)
	}
	bin := filepath.Join(cache, "cotal-test", "natscli-"+natsCLIVersion)
	path := filepath.Join(bin, "nats")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	cmd := exec.Command("go", "install", "github.com/nats-io/natscli/nats@"+natsCLIVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+bin, "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the nats CLI %s: %v\n%s", natsCLIVersion, err, out)
	}
	return path
}

// TestMintNATSContext: the context `cotal mint --nats-context` writes works with the nats CLI as
// is: it reads a stream of the space and receives a post on a channel the credential reads.
func TestMintNATSContext(t *testing.T) {
	meshtest.Long(t, "runs a mesh and the nats CLI")
	nats := natsCLI(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	dir := upMesh(t)
	code, out, stderr := run(t, "mint", "alice", "--dir", dir, "--subscribe", "general", "--nats-context", "cotal-alice", "--json")
	if code != exit.OK {
		t.Fatalf("mint --nats-context (exit %d): %s", code, stderr)
	}
	var res mint.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.InboxPrefix != inboxOf(t, res.Creds) || res.NATSContext == "" {
		t.Fatalf("mint --json: inbox prefix %q (want %q), context %q", res.InboxPrefix, inboxOf(t, res.Creds), res.NATSContext)
	}
	natsCmd := func(ctx context.Context, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, nats, append([]string{"--context", "cotal-alice"}, args...)...)
		cmd.Env = os.Environ() // XDG_CONFIG_HOME names the test's context directory
		return cmd
	}
	info, err := natsCmd(t.Context(), "stream", "info", "CHAT_main").CombinedOutput()
	if err != nil || !strings.Contains(string(info), "CHAT_main") {
		t.Fatalf("nats --context cotal-alice stream info CHAT_main: %v\n%s", err, info)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var got iostreams.Buffer
	sub := natsCmd(ctx, "sub", "cotal.main.chat.*.*.general", "--count", "1")
	sub.Stdout, sub.Stderr = &got, &got
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sub.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if code, _, stderr := run(t, "send", "msg", "general", "seen by nats", "--dir", dir); code != exit.OK {
			t.Fatalf("send (exit %d): %s", code, stderr)
		}
		select {
		case err := <-done:
			if err != nil || !strings.Contains(got.String(), "seen by nats") {
				t.Fatalf("nats sub: %v\n%s", err, got.String())
			}
			return
		case <-time.After(500 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats sub received nothing:\n%s", got.String())
		}
	}
}
