package cli

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/meshtest"
)

// background runs a long-lived command until the test cancels it, returning its output and a
// function that stops it and returns its exit code.
func background(t *testing.T, args ...string) (*iostreams.Buffer, *iostreams.Buffer, func() int) {
	t.Helper()
	out, errOut := &iostreams.Buffer{}, &iostreams.Buffer{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, &iostreams.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut}, args)
	}()
	stop := sync.OnceValue(func() int {
		cancel()
		select {
		case code := <-done:
			return code
		case <-time.After(30 * time.Second):
			t.Errorf("%v did not stop", args)
			return -1
		}
	})
	t.Cleanup(func() { stop() })
	return out, errOut, stop
}

func TestMessagingCommands(t *testing.T) {
	dir := t.TempDir()
	_, _, stopUp := background(t, "up", "--dir", dir, "--port", "0")
	waitUp(t, dir, nil)

	bobOut, bobErr, stopBob := background(t, "agent", "--dir", dir, "--name", "bob", "--subscribe", "general", "--role", "reviewer", "--echo", "--json")
	consoleOut, _, stopConsole := background(t, "console", "--dir", dir, "--plain")
	meshtest.Eventually(t, 20*time.Second, "bob in the roster", func() bool {
		code, out, _ := run(t, "ps", "--dir", dir, "--json")
		var rows []struct {
			Principal string
			Online    bool
			Role      string
		}
		return code == exit.OK && json.Unmarshal([]byte(out), &rows) == nil && len(rows) == 1 && rows[0].Online && rows[0].Role == "reviewer"
	})

	code, out, stderr := run(t, "send", "msg", "general", "hello", "bob", "--dir", dir)
	if code != exit.OK || !strings.HasPrefix(out, "stored seq 1; recipient channel general (durable) at send; delivery not confirmed") {
		t.Fatalf("send msg: exit %d, %q %q", code, out, stderr)
	}
	code, out, stderr = run(t, "send", "dm", "bob", "ping", "--dir", dir)
	if code != exit.OK || !strings.Contains(out, "recipient local.bob (idle) at send; delivery not confirmed") {
		t.Fatalf("send dm: exit %d, %q %q", code, out, stderr)
	}
	code, out, stderr = run(t, "send", "ask", "reviewer", "review", "this", "--dir", dir)
	if code != exit.OK || !strings.Contains(out, "role reviewer with 1 online") {
		t.Fatalf("send ask: exit %d, %q %q", code, out, stderr)
	}
	meshtest.Eventually(t, 20*time.Second, "bob surfacing all three", func() bool {
		return strings.Count(bobOut.String(), "\n") >= 3
	})
	kinds := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(bobOut.String()), "\n") {
		var s struct {
			Kind       string
			Historical bool
			Message    struct{ Parts []struct{ Text string } }
		}
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("agent --json line %q: %v", line, err)
		}
		kinds[s.Message.Parts[0].Text] = s.Kind
	}
	if kinds["hello bob"] != "channel" || kinds["ping"] != "dm" || kinds["review this"] != "anycast" {
		t.Errorf("bob surfaced %v", kinds)
	}
	meshtest.Eventually(t, 20*time.Second, "the console line", func() bool {
		return strings.Contains(consoleOut.String(), `#general operator (local.operator): hello bob`)
	})

	// A name with no roster row still gets its durable DM (TestSendDMWithoutRosterRow reads it back).
	code, out, stderr = run(t, "send", "dm", "nobody", "x", "--dir", dir)
	if code != exit.OK || !strings.Contains(out, "; recipient had no roster row at send; delivery not confirmed") {
		t.Errorf("a dm to a name with no roster row: exit %d, %q %q", code, out, stderr)
	}
	code, _, stderr = run(t, "send", "dm", "no-body", "x", "--dir", dir)
	if code != exit.Usage || !strings.Contains(stderr, `invalid actor "no-body"`) {
		t.Errorf("a dm to a malformed name: exit %d, %q", code, stderr)
	}
	code, _, stderr = run(t, "send", "msg", "team.>", "x", "--dir", dir)
	if code != exit.Usage || !strings.Contains(stderr, "concrete") {
		t.Errorf("a post to a wildcard: exit %d, %q", code, stderr)
	}

	code, out, stderr = run(t, "channels", "set", "general", "--class", "live", "--window", "24h", "--desc", "chat", "--dir", dir)
	if code != exit.OK || !strings.Contains(out, `"deliveryClass":"live"`) {
		t.Fatalf("channels set: exit %d, %q %q", code, out, stderr)
	}
	if code, _, stderr := run(t, "channels", "default", "--no-replay", "--dir", dir); code != exit.OK {
		t.Fatalf("channels default: exit %d, %q", code, stderr)
	}
	code, out, _ = run(t, "channels", "list", "--json", "--dir", dir)
	var list struct {
		Defaults struct{ Replay *bool }
		Channels []struct {
			Channel   string
			Effective struct {
				Replay        bool
				DeliveryClass string
				ReplayWindow  time.Duration
			}
		}
	}
	if code != exit.OK || json.Unmarshal([]byte(out), &list) != nil || len(list.Channels) != 1 {
		t.Fatalf("channels list: exit %d, %q", code, out)
	}
	if e := list.Channels[0].Effective; list.Channels[0].Channel != "general" || e.DeliveryClass != "live" || e.Replay || e.ReplayWindow != 24*time.Hour {
		t.Errorf("general resolves to %+v", e)
	}
	for _, bad := range [][]string{
		{"channels", "set", "bad/name"},
		{"channels", "set", "general", "--class", "sometimes"},
		{"channels", "set", "general", "--window", "soon"},
		{"channels", "set", "general", "--replay", "--no-replay"},
	} {
		if code, _, stderr := run(t, append(bad, "--dir", dir)...); code != exit.Usage {
			t.Errorf("%v: exit %d, %q", bad, code, stderr)
		}
	}

	if code := stopBob(); code != exit.OK {
		t.Errorf("agent exit %d: %s", code, bobErr)
	}
	code, out, _ = run(t, "ps", "--dir", dir)
	if code != exit.OK || !strings.Contains(out, "offline") {
		t.Errorf("after the agent stopped, ps shows %q", out)
	}
	if code := stopConsole(); code != exit.OK {
		t.Errorf("console exit %d", code)
	}
	if code := stopUp(); code != exit.OK {
		t.Errorf("up exit %d", code)
	}
}

func TestDemo(t *testing.T) {
	code, out, stderr := run(t, "demo")
	if code != exit.OK {
		t.Fatalf("demo exit %d: %s\n%s", code, stderr, out)
	}
	for _, want := range []string{"bob received", "#general alice (local.alice): hello, everyone", "dm bob (local.bob): on it", "carol received", "ask:reviewer", "6. done"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

func TestCredsAndDoctor(t *testing.T) {
	dir := t.TempDir()
	_, _, stopUp := background(t, "up", "--dir", dir, "--port", "0")
	waitUp(t, dir, nil)
	for _, name := range []string{"alice", "bob"} {
		if code, _, stderr := run(t, "mint", name, "--dir", dir); code != exit.OK {
			t.Fatalf("mint %s: exit %d, %s", name, code, stderr)
		}
	}
	list := func() map[string]string {
		t.Helper()
		code, out, stderr := run(t, "creds", "list", "--json", "--dir", dir)
		if code != exit.OK {
			t.Fatalf("creds list: exit %d, %s", code, stderr)
		}
		var rows []struct{ Principal, State string }
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("creds list --json %q: %v", out, err)
		}
		states := map[string]string{}
		for _, r := range rows {
			states[r.Principal] = r.State
		}
		return states
	}
	if got := list(); got["local.alice"] != "active" || got["local.bob"] != "active" {
		t.Errorf("ledger = %v", got)
	}
	if code, out, stderr := run(t, "creds", "revoke", "alice", "--dir", dir); code != exit.OK || !strings.Contains(out, "revoked") {
		t.Fatalf("creds revoke: exit %d, %q %q", code, out, stderr)
	}
	if got := list(); got["local.alice"] != "revoked" || got["local.bob"] != "active" {
		t.Errorf("after the revocation the ledger = %v", got)
	}
	if code, _, stderr := run(t, "creds", "revoke", "nobody", "--dir", dir); code != exit.Failed || !strings.Contains(stderr, "no active credential") {
		t.Errorf("revoking an unknown actor: exit %d, %q", code, stderr)
	}
	if code, out, stderr := run(t, "doctor", "auth", "--dir", dir); code != exit.OK || !strings.Contains(out, "sound") {
		t.Errorf("doctor auth: exit %d, %q %q", code, out, stderr)
	}
	if code := stopUp(); code != exit.OK {
		t.Errorf("up exit %d", code)
	}
}
