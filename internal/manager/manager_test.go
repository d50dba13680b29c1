package manager_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// harnessEnv switches the test binary into a fake agent harness: "post" connects with its launch
// material, posts to general and exits 0; "crash" exits 1 at once; "sleep" waits for SIGTERM;
// "stubborn" ignores SIGTERM and waits for SIGKILL; "present" joins the space and stays present
// until SIGTERM; "selfstop" joins and then asks its manager to stop it.
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
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		select {}
	case "present", "selfstop":
		return present(mode == "selfstop")
	}
	m, err := manager.ReadMaterial(os.Getenv(manager.LaunchMaterialEnv))
	if err != nil {
		return 2
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

// newFixture starts a mesh and a supervisor on it; each edit adjusts the supervisor's config.
func newFixture(t *testing.T, edits ...func(*manager.Config)) *fixture {
	t.Helper()
	return supervisorOn(t, meshtest.Start(t), edits...)
}

// supervisorOn starts a supervisor on the mesh m, closed when the test ends.
func supervisorOn(t *testing.T, m *meshtest.Mesh, edits ...func(*manager.Config)) *fixture {
	t.Helper()
	cfg := manager.Config{
		Issue: mesh.AgentIssuer(m.Ledger("")), Space: m.Space, URL: m.URL(), MaterialDir: filepath.Join(t.TempDir(), "launch"),
		MCPCommand: []string{"cotal", "mcp"}, Backoff: 10 * time.Millisecond, StopGrace: 2 * time.Second,
	}
	for _, edit := range edits {
		edit(&cfg)
	}
	sup, err := manager.New(cfg)
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
	rows, err := f.m.Ledger("").Credentials(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	admin := f.m.Connect(t, f.m.Mint(t, ledger.Request{Profile: authority.ProfileAdmin, Name: "inspector"}))
	found := 0
	for _, r := range rows {
		if r.Principal != "local."+name {
			continue
		}
		found++
		if r.State == authstore.CredActive {
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
	t.Parallel()
	f := newFixture(t)
	var mu sync.Mutex
	var got []string
	watcherCred := f.m.AgentCred(t, ledger.Request{Name: "watcher", Subscribe: []string{"general"}})
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
	t.Parallel()
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
	t.Parallel()
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
		"a bad env":     {Name: "ok", Command: []string{"true"}, Env: []string{"NOVALUE"}},
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
		"if [ -n \"$OPENCODE_CONFIG\" ]; then cat \"$OPENCODE_CONFIG\" >> \"$OUT\"; fi\n" +
		"echo \"channel=$COTAL_CHANNEL agent=$COTAL_AGENT\" >> \"$OUT\"\n"
	for _, h := range manager.Harnesses {
		if err := os.WriteFile(filepath.Join(bin, string(h)), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	f := newFixture(t)
	for h, want := range map[manager.Harness][]string{
		manager.HarnessClaude: {"--mcp-config", `"mcpServers"`, `"--creds"`, "--extra", "--settings", `"UserPromptSubmit"`,
			"--dangerously-load-development-channels\nserver:cotal", "channel=1 agent=",
			`"command": "'cotal' hook prompt --space 'main' --agent 'local.h_claude'"`, `"command": "'cotal' hook notification --space 'main' --agent 'local.h_claude'"`},
		manager.HarnessCodex: {`mcp_servers.cotal.command="cotal"`, `mcp_servers.cotal.args=["mcp","--creds",`, "--extra",
			`notify=["cotal","hook","stop","--space","main","--agent","local.h_codex"]`,
			`hooks.PostToolUse=[{hooks=[{type="command",command="'cotal' hook tool-done --space 'main' --agent 'local.h_codex'"}]}]`,
			`hooks.Stop=[{hooks=[{type="command",command="'cotal' hook turn-end --space 'main' --agent 'local.h_codex'"}]}]`,
			`hooks.UserPromptSubmit=[{hooks=[{type="command",command="'cotal' hook prompt --space 'main' --agent 'local.h_codex'"}]}]`,
			"--dangerously-bypass-hook-trust\n--extra"},
		manager.HarnessOpenCode: {`"type": "local"`, `"mcp",`, "--extra", `"plugin": [`, `cotal-opencode.js"`, "agent=local.h_opencode"},
		manager.HarnessCotal:    {"agent\n--echo\n--on-turn\ndone\n--extra"},
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
	// A model, a persona's instructions and a kickoff message reach the harnesses that take them
	// (the kickoff last, as the prompt operand or OpenCode's --prompt), and a spawn asking a
	// harness for what it cannot take is refused before anything starts.
	for _, tc := range []struct {
		spec manager.Spec
		want []string
	}{
		{manager.Spec{Name: "m_claude", Agent: manager.HarnessClaude, Model: "opus", Instructions: "Be brief.", Kickoff: "-Say hello."},
			[]string{"--model\nopus", "--append-system-prompt\nBe brief.", "--\n-Say hello.\n"}},
		{manager.Spec{Name: "m_codex", Agent: manager.HarnessCodex, Model: "gpt-5", Kickoff: "Plan the work."}, []string{"codex", "--model\ngpt-5", "--\nPlan the work.\n"}},
		{manager.Spec{Name: "m_opencode", Agent: manager.HarnessOpenCode, Model: "anthropic/claude", Kickoff: "Read the README."},
			[]string{"--model\nanthropic/claude", "--prompt\nRead the README.\n"}},
		{manager.Spec{Name: "m_cotal", Agent: manager.HarnessCotal, Instructions: "ignored"}, []string{"agent\n--echo"}},
	} {
		out := filepath.Join(t.TempDir(), "out")
		tc.spec.Env = []string{"OUT=" + out}
		if _, err := f.sup.Spawn(t.Context(), tc.spec); err != nil {
			t.Fatal(err)
		}
		f.wait(t, tc.spec.Name)
		got, _ := os.ReadFile(out)
		for _, w := range tc.want {
			if !strings.Contains(string(got), w) {
				t.Errorf("%s was started without %q:\n%s", tc.spec.Name, w, got)
			}
		}
	}
	for _, bad := range []manager.Spec{
		{Name: "b_cotal", Agent: manager.HarnessCotal, Model: "opus"},
		{Name: "b_codex", Agent: manager.HarnessCodex, Instructions: "Be brief."},
		{Name: "b_raw", Command: []string{"true"}, Model: "opus"},
		{Name: "b_cotal_kickoff", Agent: manager.HarnessCotal, Kickoff: "Say hello."},
		{Name: "b_raw_kickoff", Command: []string{"true"}, Kickoff: "Say hello."},
	} {
		if _, err := f.sup.Spawn(t.Context(), bad); err == nil {
			t.Errorf("%s (%s, model %q, instructions %q, kickoff %q) was started", bad.Name, bad.Agent, bad.Model, bad.Instructions, bad.Kickoff)
		}
	}
	// COTAL_CODEX_HOOKS=0 starts Codex with notify alone, for a Codex without hooks.
	out := filepath.Join(t.TempDir(), "out")
	if _, err := f.sup.Spawn(t.Context(), manager.Spec{Name: "h_old_codex", Agent: manager.HarnessCodex, Command: []string{"--extra"},
		Env: []string{"OUT=" + out, manager.CodexHooksEnv + "=0"}}); err != nil {
		t.Fatal(err)
	}
	f.wait(t, "h_old_codex")
	if got, err := os.ReadFile(out); err != nil || !strings.Contains(string(got), "notify=") || strings.Contains(string(got), "hooks.") || strings.Contains(string(got), "bypass") {
		t.Errorf("Codex without hooks was started with %s (%v)", got, err)
	}
	if _, err := f.sup.Spawn(t.Context(), manager.Spec{Name: "x", Agent: "cursor"}); err == nil {
		t.Error("an unknown preset was accepted")
	}
}

// TestCodexWake: a Codex agent on a terminal, idle, is woken by typing into its terminal what
// AwaitWake returns, then Enter. The stand-in Codex reads one line from its terminal.
func TestCodexWake(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "codex"), []byte("#!/bin/sh\nread line\nprintf '%s\\n' \"$line\" > \"$OUT\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	asked := make(chan wire.Principal, 100)
	f := newFixture(t, func(c *manager.Config) {
		c.AwaitWake = func(ctx context.Context, p wire.Principal) (string, error) {
			asked <- p
			if len(asked) == 1 {
				return "new messages", nil
			}
			<-ctx.Done() // nothing more comes
			return "", ctx.Err()
		}
	})
	out := filepath.Join(t.TempDir(), "out")
	st, err := f.sup.Spawn(t.Context(), manager.Spec{Name: "cx", Agent: manager.HarnessCodex, Env: []string{"OUT=" + out}})
	if err != nil {
		t.Fatal(err)
	}
	if end := f.wait(t, "cx"); end.State != manager.StateExited {
		t.Fatalf("the stand-in ended %+v", end)
	}
	if got, err := os.ReadFile(out); err != nil || string(got) != "new messages\n" {
		t.Fatalf("the terminal got %q (%v)", got, err)
	}
	if p := <-asked; p.String() != st.Principal {
		t.Errorf("AwaitWake was asked about %s, not %s", p, st.Principal)
	}
}

// TestConcurrentSpawnOneWinner: two spawns of one name at once never both issue. In each of 100
// tries exactly one wins and runs, and the other is refused with already-exists before anything
// is issued for it. The winner is stopped and retired before the next try, which spawns the
// name again: a finished agent's name is free.
func TestConcurrentSpawnOneWinner(t *testing.T) {
	t.Parallel()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep command to run as the agent")
	}
	var issued atomic.Int32
	f := newFixture(t, func(c *manager.Config) {
		issue := c.Issue
		c.Issue = func(ctx context.Context, spec manager.Spec) (*manager.Launch, error) {
			issued.Add(1)
			return issue(ctx, spec)
		}
	})
	ctx := t.Context()
	spec := manager.Spec{Name: "twin", Command: []string{sleep, "30"}}
	for try := range 100 {
		issued.Store(0)
		start := make(chan struct{})
		var errs [2]error
		var spawns sync.WaitGroup
		for i := range errs {
			spawns.Go(func() {
				<-start
				_, errs[i] = f.sup.Spawn(ctx, spec)
			})
		}
		close(start)
		spawns.Wait()
		won, lost := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case errors.Is(err, manager.ErrAlreadyExists):
				lost++
			default:
				t.Fatalf("try %d: spawn failed: %v", try, err)
			}
		}
		if won != 1 || lost != 1 || issued.Load() != 1 {
			t.Fatalf("try %d: %d won, %d refused, %d issued (%v); want 1, 1, 1", try, won, lost, issued.Load(), errs)
		}
		if err := f.sup.Stop(ctx, spec.Name); err != nil {
			t.Fatalf("try %d: stop: %v", try, err)
		}
		if st, err := f.sup.Wait(ctx, spec.Name); err != nil || st.State != manager.StateStopped || st.Error != "" {
			t.Fatalf("try %d: the winner ended %+v, %v; want stopped and retired", try, st, err)
		}
	}
}

// TestClose: a second spawn of a running name is refused with ErrAlreadyExists; Close stops
// accepting spawns, honours its ctx, and stops and retires every agent.
func TestClose(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *manager.Config) { c.StopGrace = 100 * time.Millisecond })
	ctx := t.Context()
	spec := manager.Spec{Name: "mule", Command: []string{os.Args[0], "-test.run=^$"}, Env: []string{harnessEnv + "=stubborn"}}
	if _, err := f.sup.Spawn(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if _, err := f.sup.Spawn(ctx, spec); !errors.Is(err, manager.ErrAlreadyExists) {
		t.Fatalf("second spawn = %v, want ErrAlreadyExists", err)
	}
	// The agent ignores SIGTERM, so it outlives a Close whose ctx has already ended.
	expired, cancel := context.WithCancel(ctx)
	cancel()
	if err := f.sup.Close(expired); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close with an ended ctx = %v, want context.Canceled", err)
	}
	if _, err := f.sup.Spawn(ctx, manager.Spec{Name: "late", Command: []string{"true"}}); !errors.Is(err, manager.ErrClosed) {
		t.Errorf("Spawn after Close = %v, want ErrClosed", err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
	defer ccancel()
	if err := f.sup.Close(cctx); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if st := f.wait(t, "mule"); st.State != manager.StateStopped {
		t.Errorf("the agent ended %+v, want stopped", st)
	}
	f.retired(t, "mule")
}

// present is the harness of an agent that joins the space with its launch material and stays
// present until SIGTERM; with stopSelf it then asks the manager that spawned it to stop it.
func present(stopSelf bool) int {
	m, err := manager.ReadMaterial(os.Getenv(manager.LaunchMaterialEnv))
	if err != nil {
		return 2
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := cotal.Connect(ctx, m.URL, cotal.WithCreds(m.Creds))
	if err != nil {
		return 4
	}
	defer c.Close(context.Background())
	if stopSelf {
		g := c.Grant()
		me := wire.Lifecycle{Principal: c.Principal(), UID: g.Lifecycle}
		if err := manager.NewClient(c.Conn(), c.Space(), me, me.Principal.Actor()).Stop(ctx, true); err != nil {
			return 6
		}
	}
	<-sig
	return 0
}
