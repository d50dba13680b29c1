package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/models"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// teamManifest is a two-agent team of cotal's own agent: ann posts everywhere, bob reads #review
// but may not post there.
const teamManifest = `apiVersion: cotal/v1
kind: Mesh
space: main
agent: cotal
agents:
  ann:
    instructions: Plan.
  bob:
    instructions: Build.
channels:
  general:
    description: Everyone.
    subscribe: [ann, bob]
    allowPublish: [ann, bob]
  review:
    subscribe: [ann]
    allowSubscribe: [ann, bob]
    allowPublish: [ann]
`

// writeFile writes content to name in dir and returns its path.
func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestUpManifest brings a team up from a manifest: its agents are online, each with creds in the
// mesh's creds folder that the broker holds to the manifest (bob may post to #general, not to
// #review), and a second up -f at the same place is refused.
func TestUpManifest(t *testing.T) {
	meshtest.Long(t, "a detached mesh running agent processes")
	dir := t.TempDir()
	file := writeFile(t, t.TempDir(), "cotal.yaml", teamManifest)
	t.Setenv(envRunCLI, "1")

	code, out, stderr := run(t, "up", "-f", file, "--dir", dir, "--port", "0", "--dry-run")
	if code != exit.OK || !strings.Contains(out, "agent bob (cotal): read general,review, post general") {
		t.Fatalf("up -f --dry-run (exit %d): %s %s", code, out, stderr)
	}
	if _, err := (mesh.Dir{Path: filepath.Join(dir, mesh.DirName)}).ReadState(); err == nil {
		t.Fatal("a dry run started a mesh")
	}

	code, out, stderr = run(t, "up", "-f", file, "--dir", dir, "--port", "0", "--detach")
	t.Cleanup(func() { run(t, "down", "--dir", dir) })
	if code != exit.OK || !strings.Contains(out, "agent ann: online") || !strings.Contains(out, "agent bob: online") {
		t.Fatalf("up -f (exit %d): %s %s", code, out, stderr)
	}
	rows := psRows(t, dir)
	for _, p := range []string{"local.ann", "local.bob"} {
		if r, ok := rows[p]; !ok || !r.Online {
			t.Errorf("ps: %s is not online: %+v", p, r)
		}
	}
	st := waitUp(t, dir, nil)
	creds := filepath.Join(dir, mesh.DirName, "creds", "main", "bob.creds")
	bob := meshtest.Dial(t, "bob", func(opts ...nats.Option) (*nats.Conn, error) {
		return nats.Connect(st.URL, append(opts, nats.UserCredentials(creds), nats.CustomInboxPrefix(inboxOf(t, creds)))...)
	})
	sp := wire.Space("main")
	me, _ := wire.ParsePrincipal("local.bob")
	general, _ := sp.ChatSubject(me, "general")
	review, _ := sp.ChatSubject(me, "review")
	for _, c := range []struct {
		subject string
		refused bool
	}{{review, true}, {general, false}} {
		if err := bob.Publish(c.subject, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if refused, err := bob.Refused("Publish", c.subject); err != nil || refused != c.refused {
			t.Errorf("bob's post to %s: refused %v (%v), want %v", c.subject, refused, err, c.refused)
		}
	}

	code, _, stderr = run(t, "up", "-f", file, "--dir", dir, "--port", "0", "--detach")
	if code != exit.Failed || !strings.Contains(stderr, "already running") {
		t.Errorf("a second up -f (exit %d): %s", code, stderr)
	}
	managerCatalogs(t, dir)
	spawnManifest(t, dir)
}

// managerCatalogs asks the running manager for its model catalogs and persona catalog.
func managerCatalogs(t *testing.T, dir string) {
	code, out, stderr := run(t, "models", "--dir", dir, "--agent", "claude", "--json")
	var res models.Result
	if err := json.Unmarshal([]byte(out), &res); code != exit.OK || err != nil || len(res.Catalogs) != 1 || res.Catalogs[0].Agent != "claude" || len(res.Catalogs[0].Models) == 0 {
		t.Errorf("models --agent claude --json (exit %d): %s %s", code, out, stderr)
	}
	if code, _, _ := run(t, "models", "--dir", dir, "--agent", "emacs"); code != exit.Usage {
		t.Errorf("models --agent emacs: exit %d, want usage", code)
	}
	code, out, stderr = run(t, "invoke", "manager", "list-personas", "--json", "--dir", dir)
	if code != exit.OK || !strings.Contains(out, `"personas":[]`) {
		t.Errorf("invoke manager list-personas --json (exit %d): %s %s", code, out, stderr)
	}
}

// moreManifest adds cid, in a new channel and the first team's #general.
const moreManifest = `apiVersion: cotal/v1
kind: Mesh
space: main
agent: cotal
agents:
  cid:
    instructions: Operate.
channels:
  general:
    subscribe: [cid]
    allowPublish: [cid]
  ops:
    subscribe: [cid]
    allowPublish: [cid]
`

var runLine = regexp.MustCompile(`^run ([0-9a-f]{16}) `)

// spawnManifest deploys a second team additively onto the mesh in dir, runs it again unchanged
// (nothing changes), changes it (cid is stale), and removes it with down -f, which leaves the
// first team running.
func spawnManifest(t *testing.T, dir string) {
	file := writeFile(t, t.TempDir(), "more.yaml", moreManifest)
	code, out, stderr := run(t, "spawn", "-f", file, "--dir", dir)
	m := runLine.FindStringSubmatch(out)
	if code != exit.OK || m == nil || !strings.Contains(out, "agent cid: online") || !strings.Contains(out, "channel ops: created") ||
		!strings.Contains(out, "channel general: exists-unmanaged") {
		t.Fatalf("spawn -f (exit %d): %s %s", code, out, stderr)
	}
	if !strings.Contains(out, "warning: channel general may be read by agents outside this manifest: local.ann, local.bob") {
		t.Errorf("spawn -f does not warn that the first team reads #general: %s", out)
	}
	ledger := filepath.Join(dir, mesh.DirName, "manifests", m[1]+".json")
	if _, err := os.Stat(ledger); err != nil {
		t.Fatalf("the run's ledger: %v", err)
	}
	code, out, stderr = run(t, "spawn", "-f", file, "--dir", dir)
	if code != exit.OK || !strings.Contains(out, "run "+m[1]) || !strings.Contains(out, "agent cid: already-owned") || strings.Contains(out, "online") {
		t.Errorf("spawn -f again (exit %d): %s %s", code, out, stderr)
	}
	writeFile(t, filepath.Dir(file), "more.yaml", strings.Replace(moreManifest, "Operate.", "Operate carefully.", 1))
	if code, out, _ := run(t, "spawn", "-f", file, "--dir", dir); code == exit.OK || !strings.Contains(out, "agent cid: stale") {
		t.Errorf("spawn -f of a changed file (exit %d): %s", code, out)
	}
	if code, out, stderr := run(t, "spawn", "-f", file, "--dir", dir, "--allow-stale", "cid"); code != exit.OK || !strings.Contains(out, "agent cid: online") {
		t.Errorf("spawn -f --allow-stale cid (exit %d): %s %s", code, out, stderr)
	}
	cidCreds := filepath.Join(dir, mesh.DirName, "creds", "main", "cid.creds")
	// The stopped lifecycle's retirement must not take the restarted one's creds file with it.
	meshtest.Eventually(t, 10*time.Second, "cid's old lifecycle retired", func() bool { return activeCreds(t, dir, "local.cid") == 1 })
	if _, err := os.Stat(cidCreds); err != nil {
		t.Errorf("the restarted cid's creds file: %v", err)
	}
	code, out, stderr = run(t, "down", "-f", file, "--dir", dir)
	if code != exit.OK || !strings.Contains(out, "agent cid: stopped") || !strings.Contains(out, "channel ops: removed") {
		t.Errorf("down -f (exit %d): %s %s", code, out, stderr)
	}
	if _, err := os.Stat(ledger); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the ledger of a run removed in full is still there: %v", err)
	}
	meshtest.Eventually(t, 10*time.Second, "cid's creds file removed", func() bool {
		_, err := os.Stat(cidCreds)
		return errors.Is(err, os.ErrNotExist)
	})
	rows := psRows(t, dir)
	if r := rows["local.cid"]; r.Online {
		t.Errorf("cid is still online after down -f")
	}
	for _, p := range []string{"local.ann", "local.bob"} {
		if !rows[p].Online {
			t.Errorf("down -f stopped the first team's %s", p)
		}
	}
}

// TestSuperviseRoster: `cotal supervise --roster` boots the agents its roster lists, each from
// its persona file; a roster with an unknown key is refused before the manager starts.
func TestSuperviseRoster(t *testing.T) {
	meshtest.Long(t, "a supervisor process and its agents")
	t.Setenv(envRunCLI, "1")
	dir := upMesh(t, "--no-manager")
	if code, _, stderr := run(t, "personas", "new", "scribe", "--dir", dir, "--subscribe", "general"); code != exit.OK {
		t.Fatalf("personas new (exit %d): %s", code, stderr)
	}
	bad := writeFile(t, t.TempDir(), "roster.yaml", "agents:\n  - { name: scribe, agent: cotal, cdw: x }\n")
	if code, _, stderr := run(t, "supervise", "--dir", dir, "--roster", bad); code != exit.Failed || !strings.Contains(stderr, bad+`:2:35: unknown key "cdw"`) {
		t.Errorf("a roster with a misspelt key (exit %d): %s", code, stderr)
	}
	roster := writeFile(t, t.TempDir(), "roster.yaml", "agents:\n  - { name: scribe, agent: cotal, role: notes }\n")
	_, errOut, stop := background(t, "supervise", "--dir", dir, "--roster", roster)
	// A minute: the whole suite under the race detector shares two cores. The roster's report
	// follows the spawn's goal, which may end after ps first shows scribe online.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		r, ok := psRows(t, dir)["local.scribe"]
		if ok && r.Online && r.Role == "notes" && strings.Contains(errOut.String(), "roster: scribe is up") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("scribe is not online and reported up after a minute (ps: %+v); supervise said:\n%s", r, errOut.String())
		}
	}
	if code := stop(); code != exit.OK {
		t.Errorf("supervise exit %d: %s", code, errOut.String())
	}
}

// BenchmarkUpTeam20 brings a team of 20 of cotal's own agents up from a manifest with
// `cotal up -f --detach`, every agent online when it returns, and takes the mesh down again.
func BenchmarkUpTeam20(b *testing.B) {
	b.Setenv(envRunCLI, "1")
	var team strings.Builder
	team.WriteString("apiVersion: cotal/v1\nkind: Mesh\nspace: main\nagent: cotal\nagents:\n")
	var names []string
	for i := range 20 {
		name := fmt.Sprintf("a%02d", i)
		names = append(names, name)
		fmt.Fprintf(&team, "  %s:\n    instructions: Work.\n", name)
	}
	fmt.Fprintf(&team, "channels:\n  general:\n    subscribe: [%s]\n    allowPublish: [%[1]s]\n", strings.Join(names, ", "))
	file := writeFile(b, b.TempDir(), "cotal.yaml", team.String())
	for b.Loop() {
		dir := b.TempDir()
		code, out, stderr := run(b, "up", "-f", file, "--dir", dir, "--port", "0", "--detach")
		if code != exit.OK || strings.Count(out, ": online") != 20 {
			b.Fatalf("up -f (exit %d): %s %s", code, out, stderr)
		}
		if code, _, stderr := run(b, "down", "--dir", dir); code != exit.OK {
			b.Fatalf("down (exit %d): %s", code, stderr)
		}
	}
}

// activeCreds counts the active credentials `cotal creds list` shows of principal.
func activeCreds(t *testing.T, dir, principal string) int {
	t.Helper()
	code, out, stderr := run(t, "creds", "list", "--dir", dir)
	if code != exit.OK {
		t.Fatalf("creds list exit %d: %s", code, stderr)
	}
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, principal+" ") && strings.Contains(line, "active") {
			n++
		}
	}
	return n
}

// TestPreflightRefusesAKickoffForCotal: a kickoff message for cotal's own agent, which reads
// none, is refused before anything starts, naming the agent.
func TestPreflightRefusesAKickoffForCotal(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, t.TempDir(), "cotal.yaml", "apiVersion: cotal/v1\nkind: Mesh\nspace: main\nagent: cotal\n"+
		"agents:\n  kim:\n    instructions: Hello.\n    prompt: Say hello in general.\nchannels:\n  general:\n    subscribe: [kim]\n")
	code, out, stderr := run(t, "up", "-f", file, "--dir", dir, "--port", "0", "--dry-run")
	if code == exit.OK || !strings.Contains(stderr, "kim") || !strings.Contains(stderr, "kickoff") {
		t.Fatalf("up -f --dry-run of a kickoff for cotal's agent (exit %d): %s %s", code, out, stderr)
	}
}
