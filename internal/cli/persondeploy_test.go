package cli

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/cli/actor"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/status"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/wire"
)

// personTeam is alice's team: scout reads #general and #review and posts to #general only.
const personTeam = `apiVersion: cotal/v1
kind: Mesh
space: main
agent: cotal
agents:
  scout:
    instructions: Look around.
channels:
  general:
    subscribe: [scout]
    allowPublish: [scout]
  review:
    allowSubscribe: [scout]
`

// TestPersonDeploysManifest: on a user-auth mesh, a person with spawn deploys a team as themselves
// from the mesh's host (spawn -f --mesh): their deployer view plans and launches, and the host's
// manager runs the agents as their managed agents (u_….NAME), within their row. A new channel
// needs their admin scope, and an agent posting beyond their row is refused; the broker holds the
// launched agent to the manifest; a second run changes nothing; the operator does not take the run
// over; down -f --mesh stops the agent and retires it. A person with no remote manager also spawns
// and stops their own agents on the host's manager.
func TestPersonDeploysManifest(t *testing.T) {
	meshtest.Long(t, "a user-auth mesh running agent processes")
	t.Setenv("HOME", t.TempDir()) // alice's login cache
	t.Setenv(envRunCLI, "1")      // the manager's agents are this test binary acting as cotal
	a := upMesh(t, "--user-auth", "--dev-idp", "--dev-idp-addr", "127.0.0.1:0")
	code, out, stderr := run(t, "status", "--dir", a, "--json")
	var st status.Report
	if code != exit.OK || json.Unmarshal([]byte(out), &st) != nil || st.ExchangeURL == "" {
		t.Fatalf("status --json: exit %d %s %s", code, out, stderr)
	}
	url := st.ExchangeURL
	for _, ch := range []string{"general", "review"} {
		if code, _, stderr := run(t, "channels", "set", ch, "--dir", a); code != exit.OK {
			t.Fatalf("channels set %s: exit %d %s", ch, code, stderr)
		}
	}
	if code, _, stderr := run(t, "login", "--mesh", url, "--dev-user", "alice"); code != exit.OK {
		t.Fatalf("login: exit %d %s", code, stderr)
	}
	dir := t.TempDir()
	team := writeFile(t, dir, "team.yaml", personTeam)
	if code, _, stderr := run(t, "spawn", "-f", team, "--mesh", url, "--dir", a); code != exit.NotAuthorized || !strings.Contains(stderr, "spawn scope") {
		t.Errorf("spawn -f --mesh without spawn: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(t, "actor", "grant", "alice", "--scope", "spawn", "--allow-subscribe", "general,review", "--allow-publish", "general", "--dir", a); code != exit.OK {
		t.Fatalf("grant: exit %d %s", code, stderr)
	}
	code, out, _ = run(t, "actor", "list", "--dir", a, "--json")
	var rows []actor.ListRow
	if code != exit.OK || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 {
		t.Fatalf("actor list: %s", out)
	}
	owner := rows[0].Owner
	ledgers := filepath.Join(a, mesh.DirName, "manifests")

	// A new channel is space-wide: alice holds no admin, so nothing is created or recorded.
	ops := writeFile(t, dir, "ops.yaml", strings.Replace(personTeam, "  review:", "  ops:", 1))
	if code, _, stderr := run(t, "spawn", "-f", ops, "--mesh", url, "--dir", a); code != exit.NotAuthorized || !strings.Contains(stderr, "admin scope") {
		t.Errorf("spawn -f --mesh creating a channel without admin: exit %d %s", code, stderr)
	}
	if entries, _ := os.ReadDir(ledgers); len(entries) != 0 {
		t.Errorf("a refused deploy left ledgers: %v", entries)
	}
	// An agent that would post where alice may not: its launch is refused by name.
	beyond := writeFile(t, dir, "beyond.yaml", strings.Replace(personTeam, "    allowSubscribe: [scout]", "    allowSubscribe: [scout]\n    allowPublish: [scout]", 1))
	if code, out, _ := run(t, "spawn", "-f", beyond, "--mesh", url, "--dir", a); code == exit.OK || !strings.Contains(out, "review") || strings.Contains(out, "online") {
		t.Errorf("spawn -f --mesh of an agent posting beyond alice's row (exit %d): %s", code, out)
	}
	if code, _, stderr := run(t, "down", "-f", beyond, "--mesh", url, "--dir", a); code != exit.OK {
		t.Errorf("down -f --mesh of a run that launched nothing: exit %d %s", code, stderr)
	}

	code, out, stderr = run(t, "spawn", "-f", team, "--mesh", url, "--dir", a)
	m := runLine.FindStringSubmatch(out)
	if code != exit.OK || m == nil || !strings.Contains(out, "agent scout: online ("+owner+".scout") ||
		!strings.Contains(out, "channel general: exists-unmanaged") {
		t.Fatalf("spawn -f --mesh (exit %d): %s %s", code, out, stderr)
	}
	if r := psRows(t, a)[owner+".scout"]; !r.Online || r.Process == nil || r.Process.Status != "running" {
		t.Fatalf("ps on the host: scout %+v", r)
	}

	// The broker holds scout to the manifest: a bearer bought with its actor token posts to
	// #general, not to #review.
	tokens, _ := filepath.Glob(filepath.Join(a, mesh.DirName, "launch", "main", "scout-*", "actor.token"))
	if len(tokens) != 1 {
		t.Fatalf("scout's actor token: %v", tokens)
	}
	code, out, stderr = run(t, "agent-bearer", "--dir", a, "--owner", owner, "--actor", "scout", "--token-file", tokens[0])
	if code != exit.OK {
		t.Fatalf("agent-bearer: exit %d %s", code, stderr)
	}
	bearer := strings.TrimSpace(out)
	kept := filepath.Join(t.TempDir(), "scout.token") // the launch material goes with the agent
	if raw, err := os.ReadFile(tokens[0]); err != nil || os.WriteFile(kept, raw, 0o600) != nil {
		t.Fatalf("keep scout's token: %v", err)
	}
	doc, err := authservice.FetchMeshDocument(t.Context(), userauth.NewHTTPClient(), url)
	if err != nil {
		t.Fatal(err)
	}
	scout := meshtest.Dial(t, "scout", func(opts ...nats.Option) (*nats.Conn, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		return dial.Bearer(ctx, doc.Server, []byte(doc.SentinelCreds), func(context.Context) (string, error) { return bearer, nil }, opts...)
	})
	me, err := wire.NewPrincipal(owner, "scout")
	if err != nil {
		t.Fatal(err)
	}
	sp := wire.Space("main")
	for _, c := range []struct {
		channel string
		refused bool
	}{{"review", true}, {"general", false}} {
		subject, _ := sp.ChatSubject(me, c.channel)
		if err := scout.Publish(subject, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if refused, err := scout.Refused("Publish", subject); err != nil || refused != c.refused {
			t.Errorf("scout's post to %s: refused %v (%v), want %v", c.channel, refused, err, c.refused)
		}
	}
	scout.Close()

	// Unchanged: nothing changes. The operator does not take alice's run over.
	code, out, stderr = run(t, "spawn", "-f", team, "--mesh", url, "--dir", a)
	if code != exit.OK || !strings.Contains(out, "run "+m[1]) || !strings.Contains(out, "agent scout: already-owned") || strings.Contains(out, "online") {
		t.Errorf("spawn -f --mesh again (exit %d): %s %s", code, out, stderr)
	}
	if code, _, stderr := run(t, "spawn", "-f", team, "--dir", a); code == exit.OK || !strings.Contains(stderr, "deployed by "+owner) {
		t.Errorf("the operator's spawn -f of alice's run: exit %d %s", code, stderr)
	}

	// With no remote manager of her own, alice spawns and stops on the host's manager too, through
	// her manager-caller view: her agent, within her row.
	if code, _, stderr := run(t, "spawn", "--mesh", url, "--name", "probe", "--agent", "cotal", "--subscribe", "general", "--detach"); code != exit.OK {
		t.Fatalf("spawn --mesh on the host's manager: exit %d %s", code, stderr)
	}
	if r := psRows(t, a)[owner+".probe"]; !r.Online {
		t.Errorf("ps on the host: probe %+v", r)
	}
	if code, _, stderr := run(t, "spawn", "--mesh", url, "--name", "loud", "--agent", "cotal", "--subscribe", "review", "--detach"); code != exit.NotAuthorized || !strings.Contains(stderr, "review") {
		t.Errorf("spawn --mesh of an agent posting beyond alice's row: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(t, "stop", "--mesh", url, "probe"); code != exit.OK {
		t.Errorf("stop --mesh on the host's manager: exit %d %s", code, stderr)
	}

	code, out, stderr = run(t, "down", "-f", team, "--mesh", url, "--dir", a)
	if code != exit.OK || !strings.Contains(out, "agent scout: stopped") {
		t.Fatalf("down -f --mesh (exit %d): %s %s", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(ledgers, m[1]+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the ledger of a run removed in full is still there: %v", err)
	}
	meshtest.Eventually(t, 15*time.Second, "scout retired", func() bool {
		code, _, _ := run(t, "agent-bearer", "--dir", a, "--owner", owner, "--actor", "scout", "--token-file", kept)
		return code == exit.NotAuthorized
	})
}
