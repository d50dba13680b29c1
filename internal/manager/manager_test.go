package manager_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// harnessEnv switches the test binary into a fake agent harness: "post" connects with its launch
// material, posts to general and exits 0; "crash" exits 1 at once; "sleep" waits for SIGTERM.
const harnessEnv = "COTAL_FAKE_HARNESS"

func TestMain(m *testing.M) {
	if mode := os.Getenv(harnessEnv); mode != "" {
		os.Exit(harness(mode))
	}
	os.Exit(m.Run())
}

func harness(mode string) int {
	switch mode {
	case "crash":
		return 1
	case "sleep":
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		<-sig
		return 0
	}
	raw, err := os.ReadFile(os.Getenv(manager.LaunchMaterialEnv))
	if err != nil {
		return 2
	}
	var m manager.Material
	if err := json.Unmarshal(raw, &m); err != nil {
		return 3
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := cotal.Connect(ctx, m.URL, cotal.WithCreds(m.Creds))
	if err != nil {
		return 4
	}
	defer c.Close(ctx)
	if _, err := c.Post(ctx, "general", []wire.Part{wire.TextPart("hello from " + m.Principal)}); err != nil {
		return 5
	}
	return 0
}

type fixture struct {
	m   *meshtest.Mesh
	sup *manager.Supervisor
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	m := meshtest.Start(t)
	sup, err := manager.New(manager.Config{
		Issue: m.Authority().AgentIssuer(m.URL(), m.Space), Space: m.Space, URL: m.URL(), MaterialDir: filepath.Join(t.TempDir(), "launch"),
		MCPCommand: []string{"cotal", "mcp"}, Backoff: 10 * time.Millisecond, StopGrace: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = sup.Close(ctx) // agents a test left running
	})
	return &fixture{m: m, sup: sup}
}

func (f *fixture) spawn(t *testing.T, name, mode string) {
	t.Helper()
	general := []string{"general"}
	_, err := f.sup.Spawn(t.Context(), manager.Spec{
		Name: name, Subscribe: general, AllowPublish: general,
		Command: []string{os.Args[0], "-test.run=^$"}, Env: []string{harnessEnv + "=" + mode},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) wait(t *testing.T, name string) manager.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	st, err := f.sup.Wait(ctx, name)
	if err != nil {
		t.Fatalf("%s did not finish: %+v, %v", name, st, err)
	}
	return st
}

// retired checks that every credential of the agent is revoked and its dm_ durables are gone.
func (f *fixture) retired(t *testing.T, name string) {
	t.Helper()
	rows, err := f.m.Authority().Credentials(t.Context(), f.m.URL(), f.m.Space)
	if err != nil {
		t.Fatal(err)
	}
	admin := f.m.Connect(t, f.m.Mint(t, mesh.MintRequest{Profile: authority.ProfileAdmin, Name: "inspector"}))
	found := 0
	for _, r := range rows {
		if r.Principal != "local."+name {
			continue
		}
		found++
		if r.State == authority.CredActive {
			t.Errorf("%s's credential %s is still active", name, r.CredentialID)
		}
		l := wire.Lifecycle{Principal: mustPrincipal(t, r.Principal), UID: r.LifecycleUID}
		if _, err := admin.JS.Consumer(t.Context(), f.m.Space.DMStream(), wire.DMDurable(l)); !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Errorf("%s's dm durable outlived it: %v", name, err)
		}
	}
	if found == 0 {
		t.Errorf("%s has no credential row at all", name)
	}
}

func mustPrincipal(t *testing.T, s string) wire.Principal {
	t.Helper()
	p, err := wire.ParsePrincipal(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSpawnedAgentJoinsAndIsRetired: a spawned harness appears on the mesh and posts, and once it
// exits its credential and durables are gone.
func TestSpawnedAgentJoinsAndIsRetired(t *testing.T) {
	f := newFixture(t)
	var mu sync.Mutex
	var got []string
	watcherCred := f.m.AgentCred(t, mesh.MintRequest{Name: "watcher", Subscribe: []string{"general"}})
	w, err := cotal.Connect(t.Context(), f.m.URL(), cotal.WithCredsData(watcherCred.Creds), cotal.WithJoin("general"),
		cotal.WithHandler(func(_ context.Context, d *cotal.Delivery) error {
			mu.Lock()
			got = append(got, d.Message.Parts[0].Text)
			mu.Unlock()
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())

	f.spawn(t, "harness", "post")
	st := f.wait(t, "harness")
	if st.State != manager.StateExited || st.ExitCode != 0 || st.Restarts != 0 {
		t.Fatalf("the harness ended %+v, want exited 0", st)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		seen := strings.Join(got, "|")
		mu.Unlock()
		if strings.Contains(seen, "hello from local.harness") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the harness's post never arrived (got %q)", seen)
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.retired(t, "harness")
}

// TestRestartEscalation: a harness that keeps crashing is restarted three times, then escalated
// and retired.
func TestRestartEscalation(t *testing.T) {
	f := newFixture(t)
	f.spawn(t, "crasher", "crash")
	st := f.wait(t, "crasher")
	if st.State != manager.StateEscalated || st.Restarts != manager.DefaultMaxRestarts || st.ExitCode != 1 {
		t.Fatalf("the crasher ended %+v, want escalated after %d restarts", st, manager.DefaultMaxRestarts)
	}
	f.retired(t, "crasher")
}

// TestStop: Stop ends a running agent gracefully and retires it; a name still running cannot be
// spawned twice.
func TestStop(t *testing.T) {
	f := newFixture(t)
	f.spawn(t, "sleeper", "sleep")
	if _, err := f.sup.Spawn(t.Context(), manager.Spec{Name: "sleeper", Command: []string{os.Args[0]}}); err == nil {
		t.Error("a running name was spawned twice")
	}
	if list := f.sup.List(); len(list) != 1 || list[0].State != manager.StateRunning || list[0].PID == 0 {
		t.Fatalf("List = %+v", list)
	}
	if err := f.sup.Stop(t.Context(), "sleeper"); err != nil {
		t.Fatal(err)
	}
	if st := f.wait(t, "sleeper"); st.State != manager.StateStopped {
		t.Errorf("the sleeper ended %+v, want stopped", st)
	}
	f.retired(t, "sleeper")
	for name, spec := range map[string]manager.Spec{
		"a bad name":    {Name: "a.b", Command: []string{"true"}},
		"no command":    {Name: "ok"},
		"a missing bin": {Name: "ghost", Command: []string{"/nonexistent/agent"}},
	} {
		if _, err := f.sup.Spawn(t.Context(), spec); err == nil {
			t.Errorf("Spawn accepted %s", name)
		}
	}
	f.retired(t, "ghost")
}

// TestHarnessPresets: each preset starts its harness with the cotal MCP server configured.
// Stand-in harnesses on PATH record the arguments and configuration they were given.
func TestHarnessPresets(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$OUT\"\nfor f in \"$@\"; do case \"$f\" in *.json) cat \"$f\" >> \"$OUT\";; esac; done\n" +
		"if [ -n \"$OPENCODE_CONFIG\" ]; then cat \"$OPENCODE_CONFIG\" >> \"$OUT\"; fi\n"
	for _, h := range manager.Harnesses {
		if err := os.WriteFile(filepath.Join(bin, string(h)), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	f := newFixture(t)
	for h, want := range map[manager.Harness][]string{
		manager.HarnessClaude:   {"--mcp-config", `"mcpServers"`, `"--creds"`, "--extra"},
		manager.HarnessCodex:    {`mcp_servers.cotal.command="cotal"`, `mcp_servers.cotal.args=["mcp","--creds",`, "--extra"},
		manager.HarnessOpenCode: {`"type": "local"`, `"mcp",`, "--extra"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		name := "h_" + string(h)
		if _, err := f.sup.Spawn(t.Context(), manager.Spec{Name: name, Agent: h, Command: []string{"--extra"}, Env: []string{"OUT=" + out}}); err != nil {
			t.Fatal(err)
		}
		if st := f.wait(t, name); st.State != manager.StateExited {
			t.Fatalf("%s ended %+v", h, st)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(string(got), w) {
				t.Errorf("%s was started without %q:\n%s", h, w, got)
			}
		}
	}
	if _, err := f.sup.Spawn(t.Context(), manager.Spec{Name: "x", Agent: "cursor"}); err == nil {
		t.Error("an unknown preset was accepted")
	}
}
