package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/cli/ps"
	"github.com/gocotal/cotal/internal/cli/spawn"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshreg"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
)

// envRunCLI makes the test binary act as the cotal binary, so `up --detach` can re-execute it.
const envRunCLI = "COTAL_CLI_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunCLI) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Main(ctx, iostreams.System(), os.Args[1:])
		stop()
		os.Exit(code)
	}
	// No test reads or writes this machine's mesh registry.
	home, err := os.MkdirTemp("", "cotal-home")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv(meshreg.EnvHome, home)
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}

// run runs the CLI with args and returns the exit code and the captured output.
func run(t testing.TB, args ...string) (int, string, string) {
	t.Helper()
	io, _, out, errOut := iostreams.Test()
	code := Main(t.Context(), io, args)
	return code, out.String(), errOut.String()
}

// waitUp polls until the mesh in dir records itself as running, reporting the last error. It
// allows two minutes: a cluster node restarted under the race detector, beside other packages'
// tests, recovers its streams and loads its wardens in well under one, but not always.
func waitUp(t *testing.T, dir string, done <-chan int) *mesh.State {
	t.Helper()
	d := mesh.Dir{Path: filepath.Join(dir, mesh.DirName)}
	deadline := time.Now().Add(2 * time.Minute)
	var err error
	for time.Now().Before(deadline) {
		var st *mesh.State
		if st, err = d.ReadState(); err == nil {
			return st
		}
		select {
		case code := <-done:
			t.Fatalf("cotal up exited with %d before the mesh came up", code)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("the mesh did not come up: %v", err)
	return nil
}

func TestUpStatusMintDown(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan int, 1)
	upIO, _, upOut, upErr := iostreams.Test()
	go func() { done <- Main(ctx, upIO, []string{"up", "--dir", dir, "--port", "0"}) }()
	st := waitUp(t, dir, done)

	code, out, stderr := run(t, "status", "--dir", dir, "--json")
	if code != exit.OK {
		t.Fatalf("status exit %d: %s", code, stderr)
	}
	var rep struct {
		Running bool
		URL     string
		Spaces  []struct {
			Space       string
			Provisioned bool
			Streams     []struct{ Name string }
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("status --json %q: %v", out, err)
	}
	if !rep.Running || rep.URL != st.URL || len(rep.Spaces) != 1 || !rep.Spaces[0].Provisioned || len(rep.Spaces[0].Streams) != len(space.Streams("main")) {
		t.Errorf("status = %+v", rep)
	}
	listed := map[string]bool{}
	for _, sp := range rep.Spaces {
		for _, st := range sp.Streams {
			listed[st.Name] = true
		}
	}
	for _, name := range []string{"EPJ_main", "EPT_REQ_main", "EPT_main", "EPR_main", "EPW_main", "EPE_main", "EPF_main", "EPC_main", "WFJ_main"} {
		if !listed[name] {
			t.Errorf("status --json does not list %s", name)
		}
	}

	code, out, stderr = run(t, "mint", "alice", "--dir", dir, "--subscribe", "team.backend", "--role", "reviewer", "--provision", "--json")
	if code != exit.OK {
		t.Fatalf("mint exit %d: %s", code, stderr)
	}
	var res struct{ Principal, LifecycleUID, Creds, Servers string }
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("mint --json %q: %v", out, err)
	}
	if res.Principal != "local.alice" || res.Servers != st.URL {
		t.Errorf("principal %q, servers %q", res.Principal, res.Servers)
	}
	uid, err := wire.ParseLifecycleUID(res.LifecycleUID)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(res.Creds); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("creds file %s: %v %v", res.Creds, fi, err)
	}
	// mint's publish policy is that of agent and mcp: it posts to the channels it subscribes to.
	if pub := claimsOf(t, res.Creds).Pub.Allow; !slices.Contains(pub, "cotal.main.chat.local.alice.team.backend") {
		t.Errorf("mint --subscribe team.backend may not post there: %q", pub)
	}

	// The creds file works with plain nats.go: bind the provisioned dm_ durable.
	nc, err := nats.Connect(st.URL, nats.UserCredentials(res.Creds), nats.CustomInboxPrefix(inboxOf(t, res.Creds)))
	if err != nil {
		t.Fatalf("connect with the minted creds: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := wire.NewPrincipal("local", "alice")
	if _, err := js.Consumer(t.Context(), "DM_main", wire.DMDurable(wire.Lifecycle{Principal: p, UID: uid})); err != nil {
		t.Errorf("bind the provisioned dm durable: %v", err)
	}
	code, out, stderr = run(t, "mint", "boss", "--dir", dir, "--capability", "spawn", "--json")
	if err := json.Unmarshal([]byte(out), &res); code != exit.OK || err != nil {
		t.Fatalf("mint --capability spawn exit %d: %s %s", code, out, stderr)
	}
	raw, err := os.ReadFile(res.Creds)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := cotal.ParseCreds(raw); err != nil || !slices.Equal(g.Capabilities, []string{"spawn"}) {
		t.Errorf("minted with --capability spawn: %+v, %v", g, err)
	}
	if _, err := os.Stat(filepath.Join(dir, mesh.DirName, "creds", "main", "admin.creds")); err != nil {
		t.Errorf("up wrote no admin creds: %v", err)
	}

	code, _, stderr = run(t, "up", "--dir", dir, "--port", "0")
	if code != exit.OK || !strings.Contains(stderr, "already running") {
		t.Errorf("a second up: exit %d, %q", code, stderr)
	}

	cancel()
	select {
	case code := <-done:
		if code != exit.OK {
			t.Errorf("up exited %d: %s", code, upErr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("up did not stop")
	}
	if !strings.Contains(upOut.String(), st.URL) || !strings.Contains(upOut.String(), "space:  main") {
		t.Errorf("up printed %q", upOut)
	}
	if code, _, _ := run(t, "status", "--dir", dir); code != exit.Failed {
		t.Errorf("status of a stopped mesh exits %d, want %d", code, exit.Failed)
	}
}

// inboxOf returns the inbox prefix a static credential's grant allows: "_INBOX_" and its user key,
// the subject of its JWT.
func inboxOf(t *testing.T, credsPath string) string {
	t.Helper()
	return "_INBOX_" + claimsOf(t, credsPath).Subject
}

// claimsOf returns the user claims of a creds file.
func claimsOf(t *testing.T, credsPath string) *jwt.UserClaims {
	t.Helper()
	raw, err := os.ReadFile(credsPath)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.ParseDecoratedJWT(raw)
	if err != nil {
		t.Fatal(err)
	}
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		t.Fatal(err)
	}
	return uc
}

func TestDetachAndDown(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(envRunCLI, "1")
	code, out, stderr := run(t, "up", "--detach", "--dir", dir, "--port", "0", "--space", "main,extra", "--max-disk", "1GiB")
	if code != exit.OK {
		t.Fatalf("up --detach exit %d: %s", code, stderr)
	}
	st := waitUp(t, dir, nil)
	if st.PID == os.Getpid() || !strings.Contains(out, st.URL) {
		t.Errorf("detached mesh pid %d, output %q", st.PID, out)
	}
	// The detached mesh ran with every flag given, the list and the size included.
	if want := []wire.Space{"main", "extra"}; !slices.Equal(st.Spaces, want) {
		t.Errorf("the detached mesh serves %v, want %v", st.Spaces, want)
	}
	kr, err := authority.OpenKeyring(mesh.Dir{Path: filepath.Join(dir, mesh.DirName)}.AuthDir())
	if err != nil {
		t.Fatal(err)
	}
	if l, err := kr.StorageLimits("extra"); err != nil || l.Disk != 1<<30 || l.Memory != authority.DefaultStorageLimits.Memory {
		t.Errorf("the detached mesh's storage limits: %+v, %v", l, err)
	}
	if code, _, stderr := run(t, "status", "--dir", dir); code != exit.OK {
		t.Errorf("status of the detached mesh exit %d: %s", code, stderr)
	}
	code, _, stderr = run(t, "down", "--dir", dir)
	if code != exit.OK || !strings.Contains(stderr, "stopped") {
		t.Fatalf("down exit %d: %s", code, stderr)
	}
	if _, err := (mesh.Dir{Path: filepath.Join(dir, mesh.DirName)}).ReadState(); !errors.Is(err, mesh.ErrNotRunning) {
		t.Errorf("after down the mesh still reads as running: %v", err)
	}
	if code, _, stderr := run(t, "down", "--dir", dir); code != exit.OK || !strings.Contains(stderr, "no mesh") {
		t.Errorf("down with nothing running: exit %d, %q", code, stderr)
	}
}

// TestDownLeavesAnotherProcess: a mesh.json naming a live process that is not a mesh (a pid
// reused after a crash) makes `cotal down` report no mesh and signal nothing.
func TestDownLeavesAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- other.Wait() }()
	t.Cleanup(func() { _ = other.Process.Kill() })
	d := mesh.Dir{Path: filepath.Join(dir, mesh.DirName)}
	if err := os.MkdirAll(d.Path, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]string{
		"a record with a start time": `{"pid":%d,"processStart":"1","url":"nats://127.0.0.1:1"}`,
		"a record without one":       `{"pid":%d,"url":"nats://127.0.0.1:1"}`,
	} {
		if err := os.WriteFile(d.StatePath(), fmt.Appendf(nil, st, other.Process.Pid), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := run(t, "down", "--dir", dir)
		if code != exit.OK || !strings.Contains(stderr, "no mesh is running") {
			t.Errorf("%s: down exit %d: %s", name, code, stderr)
		}
		select {
		case err := <-exited:
			t.Fatalf("%s: down signalled an unrelated process: %v", name, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)
	corrupt := t.TempDir()
	if err := os.MkdirAll(filepath.Join(corrupt, mesh.DirName, "auth"), 0o700); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(corrupt, mesh.DirName, "auth", "operator.nk")
	if err := os.WriteFile(keyFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	readOnly := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(readOnly, 0o500); err != nil {
		t.Fatal(err)
	}
	aFile := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(aFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"dir under a file", []string{"up", "--dir", filepath.Join(aFile, "sub"), "--port", "0"}, exit.Failed, "not a directory"},
		{"user-auth without an IdP", []string{"up", "--dir", dir, "--user-auth"}, exit.Usage, "identity provider"},
		{"user-auth with two IdPs", []string{"up", "--dir", dir, "--user-auth", "--dev-idp", "--idp", "https://idp.example"}, exit.Usage, "identity provider"},
		{"dev IdP without user-auth", []string{"up", "--dir", dir, "--dev-idp"}, exit.Usage, "go with --user-auth"},
		{"an IdP in clear", []string{"up", "--dir", dir, "--user-auth", "--idp", "http://idp.example"}, exit.Usage, "--idp"},
		{"user-auth and open", []string{"up", "--dir", dir, "--user-auth", "--dev-idp", "--open"}, exit.Usage, "exclude each other"},
		{"a public exchange in clear", []string{"up", "--dir", dir, "--user-auth", "--dev-idp", "--exchange-public-url", "http://mesh.example"}, exit.Usage, "https"},
		{"an advertised server that is no broker URL", []string{"up", "--dir", dir, "--user-auth", "--dev-idp", "--advertised-server", "https://mesh.example"}, exit.Usage, "--advertised-server"},
		{"an advertised server without user-auth", []string{"up", "--dir", dir, "--advertised-server", "tls://mesh.example:4222"}, exit.Usage, "go with --user-auth"},
		{"a remote manager lifetime too short to renew", []string{"up", "--dir", dir, "--user-auth", "--dev-idp", "--remote-manager-lifetime", "1s"}, exit.Usage, "--remote-manager-lifetime"},
		{"ps of one manager without --mesh", []string{"ps", "--dir", dir, "--instance", "abcdefghijklmnopqrstuvwxyz"}, exit.Usage, "--instance"},
		{"ps --mesh over plain http beyond loopback", []string{"ps", "--mesh", "http://mesh.example"}, exit.Usage, "--mesh"},
		{"spawn --mesh over plain http beyond loopback", []string{"spawn", "--mesh", "http://mesh.example", "--name", "x", "--", "true"}, exit.Usage, "--mesh"},
		{"stop --mesh over plain http beyond loopback", []string{"stop", "--mesh", "http://mesh.example", "--name", "x"}, exit.Usage, "--mesh"},
		{"stop --instance without --mesh", []string{"stop", "--dir", dir, "--name", "x", "--instance", "abcdefghijklmnopqrstuvwxyz"}, exit.Usage, "--instance"},
		{"stop --mesh --instance out of the grammar", []string{"stop", "--mesh", "http://127.0.0.1:1", "--name", "x", "--instance", "Not-An-Id"}, exit.Usage, "--instance"},
		{"ps --mesh with --dir", []string{"ps", "--mesh", "http://127.0.0.1:1", "--dir", dir}, exit.Usage, "drop --dir"},
		{"spawn --mesh with --space", []string{"spawn", "--mesh", "http://127.0.0.1:1", "--space", "main", "--name", "x", "--", "true"}, exit.Usage, "drop --dir"},
		{"a remote manager lifetime over a day", []string{"up", "--dir", dir, "--user-auth", "--dev-idp", "--remote-manager-lifetime", "25h"}, exit.Usage, "--remote-manager-lifetime"},
		{"a remote manager lifetime without user-auth", []string{"up", "--dir", dir, "--remote-manager-lifetime", "1h"}, exit.Usage, "go with --user-auth"},
		{"user-auth of two spaces", []string{"up", "--dir", dir, "--user-auth", "--dev-idp", "--space", "a,b"}, exit.Usage, "one space"},
		{"login to a mesh in clear", []string{"login", "--mesh", "http://mesh.example"}, exit.Usage, "--mesh"},
		{"supervise a mesh in clear", []string{"supervise", "--mesh", "http://mesh.example"}, exit.Usage, "--mesh"},
		{"agent-bearer without an owner token", []string{"agent-bearer", "--owner", "local", "--actor", "a", "--token-file", aFile}, exit.Usage, "--owner"},
		{"mint dir under a file", []string{"mint", "a", "--dir", filepath.Join(aFile, "sub"), "--profile", "observer"}, exit.Failed, "not a directory"},
		{"bad name", []string{"mint", "bad.name", "--dir", dir}, exit.Usage, `invalid actor "bad.name"`},
		{"dash in name", []string{"mint", "a-b", "--dir", dir}, exit.Usage, "invalid actor"},
		{"wildcard allow-publish", []string{"mint", "a", "--dir", dir, "--allow-publish", "team.>"}, exit.Usage, "allow-publish"},
		{"subscribe outside allow", []string{"mint", "a", "--dir", dir, "--subscribe", "x", "--allow-subscribe", "y"}, exit.Usage, "not covered"},
		{"unknown profile", []string{"mint", "a", "--dir", dir, "--profile", "root"}, exit.Usage, "--profile"},
		{"acl on a non-agent", []string{"mint", "a", "--dir", dir, "--profile", "observer", "--subscribe", "x"}, exit.Usage, "for --profile agent"},
		{"negative lifetime", []string{"mint", "a", "--dir", dir, "--expires-in", "-1h"}, exit.Usage, "--expires-in"},
		{"bad space", []string{"mint", "a", "--dir", dir, "--space", "a b"}, exit.Usage, "--space"},
		{"provision without a mesh", []string{"mint", "a", "--dir", dir, "--provision"}, exit.Failed, "needs the mesh running"},
		{"missing name", []string{"mint", "--dir", dir}, exit.Usage, "arg"},
		{"port in use", []string{"up", "--dir", dir, "--port", busyPort}, exit.Failed, "port in use"},
		{"port out of range", []string{"up", "--dir", dir, "--port", "70000"}, exit.Usage, "--port"},
		{"bad up space", []string{"up", "--dir", dir, "--port", "0", "--space", "x.y"}, exit.Usage, "--space"},
		{"open on a public host", []string{"up", "--dir", dir, "--port", "0", "--open", "--host", "0.0.0.0"}, exit.Failed, "loopback only"},
		{"half TLS", []string{"up", "--dir", dir, "--tls-cert", "c.pem"}, exit.Usage, "--tls-key"},
		{"max-disk not a size", []string{"up", "--dir", dir, "--port", "0", "--max-disk", "lots"}, exit.Usage, `--max-disk: "lots" is not a size`},
		{"max-memory too small", []string{"up", "--dir", dir, "--port", "0", "--max-memory", "1MiB"}, exit.Usage, "--max-memory 1MiB: a space needs at least 16 MiB"},
		{"max-disk on an open mesh", []string{"up", "--dir", dir, "--port", "0", "--open", "--max-disk", "1GiB"}, exit.Usage, "an open mesh has none"},
		{"corrupt key file", []string{"up", "--dir", corrupt, "--port", "0"}, exit.Failed, keyFile},
		{"corrupt key file on mint", []string{"mint", "a", "--dir", corrupt, "--profile", "observer"}, exit.Failed, "left untouched"},
		{"agent without a mesh", []string{"mint", "a", "--dir", dir}, exit.Failed, "needs the mesh running"},
		{"the ledger's own profile", []string{"mint", "a", "--dir", dir, "--profile", "ledger"}, exit.Usage, "not minted by name"},
		{"bench for no time", []string{"bench", "--duration", "0s"}, exit.Usage, "--duration"},
		{"bench an unknown case", []string{"bench", "--only", "multi"}, exit.Usage, `--only "multi": no such case`},
		{"bench an empty roster", []string{"bench", "--agents", "0"}, exit.Usage, "--agents 0"},
		{"bench dir without server", []string{"bench", "--dir", dir}, exit.Usage, "--server"},
		{"bench a bad space", []string{"bench", "--server", "nats://127.0.0.1:1", "--space", "a b"}, exit.Usage, "--space"},
		{"unknown capability", []string{"mint", "a", "--dir", dir, "--capability", "fly"}, exit.Usage, "--capability"},
		{"capability on a non-agent", []string{"mint", "a", "--dir", dir, "--profile", "observer", "--capability", "spawn"}, exit.Usage, "for --profile agent"},
		{"mcp with an unknown capability", []string{"mcp", "--dir", dir, "--name", "a", "--capability", "fly"}, exit.Usage, "--capability"},
		{"mcp creds and a capability", []string{"mcp", "--dir", dir, "--creds", "x.creds", "--capability", "spawn"}, exit.Usage, "--capability"},
		{"agent with an unknown capability", []string{"agent", "--dir", dir, "--name", "a", "--capability", "fly"}, exit.Usage, "--capability"},
		{"supervise a bad name", []string{"supervise", "--dir", dir, "--name", "a.b"}, exit.Usage, "--name"},
	}
	if os.Geteuid() != 0 { // root writes anywhere
		tests = append(tests, struct {
			name string
			args []string
			code int
			want string
		}{"unwritable dir", []string{"mint", "a", "--dir", readOnly, "--profile", "observer"}, exit.Failed, "permission denied"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := run(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr, tt.code, tt.want)
			}
			if lines := strings.Count(strings.TrimSpace(stderr), "\n"); lines > 1 {
				t.Errorf("error takes %d lines: %q", lines+1, stderr)
			}
		})
	}
	if got, _ := os.ReadFile(keyFile); string(got) != "garbage" {
		t.Error("the corrupt key file was overwritten")
	}
	if _, err := os.Stat(filepath.Join(dir, mesh.DirName, "mesh.json")); err == nil {
		t.Error("a failed up left a running record behind")
	}
}

// TestMCPCommand runs `cotal mcp` over pipes against a running mesh: an MCP client from the
// official SDK lists its tools and posts, and when the client goes away the command retires the
// agent's lifecycle.
func TestMCPCommand(t *testing.T) {
	dir := upMesh(t)
	ctx := t.Context()

	toServer, serverIn := io.Pipe()
	serverOut, fromServer := io.Pipe()
	var stderr bytes.Buffer
	mcpIO := &iostreams.IOStreams{In: toServer, Out: fromServer, ErrOut: &stderr}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, mcpIO, []string{"mcp", "--dir", dir, "--name", "claude", "--subscribe", "general", "--capability", "spawn"})
		fromServer.Close()
	}()
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).
		Connect(ctx, &mcpsdk.IOTransport{Reader: serverOut, Writer: serverIn}, nil)
	if err != nil {
		t.Fatalf("connect to cotal mcp: %v (stderr %s)", err, stderr.String())
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("ListTools = %v, %v", tools, err)
	}
	res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "cotal_send", Arguments: map[string]any{"channel": "general", "text": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("cotal_send = %+v, %v", res, err)
	}
	// --capability spawn reaches the manager of `cotal up`, which looks for the agent to stop.
	res, err = cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "cotal_despawn", Arguments: map[string]any{"name": "nobody"}})
	if text, _ := res.Content[0].(*mcpsdk.TextContent); err != nil || !res.IsError || text == nil || !strings.Contains(text.Text, "not-found: this manager runs no agent nobody") {
		t.Fatalf("cotal_despawn nobody = %+v, %v", res, err)
	}
	code, out, _ := run(t, "creds", "list", "--dir", dir)
	if code != exit.OK || !strings.Contains(out, "local.claude") {
		t.Fatalf("creds list while serving (exit %d): %s", code, out)
	}
	cs.Close()
	select {
	case code := <-done:
		if code != exit.OK {
			t.Fatalf("cotal mcp exit %d: %s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("cotal mcp did not exit when its client went away")
	}
	code, out, _ = run(t, "creds", "list", "--dir", dir)
	for _, line := range strings.Split(out, "\n") {
		if code != exit.OK || strings.Contains(line, "local.claude") && strings.Contains(line, "active") {
			t.Errorf("claude's credential outlived the server (exit %d): %s", code, line)
		}
	}
}

// agentCommand is the command line of a process that joins the mesh as the agent a manager
// spawned as: this test binary acting as `cotal agent`, on its launch material.
func agentCommand(t *testing.T) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"env", envRunCLI + "=1", exe, "agent"}
}

// psRows runs `cotal ps --json` and returns its rows by principal; it fails unless ps exits 0.
func psRows(t *testing.T, dir string) map[string]ps.Row {
	t.Helper()
	code, out, stderr := run(t, "ps", "--dir", dir, "--json")
	if code != exit.OK {
		t.Fatalf("ps exit %d: %s %s", code, out, stderr)
	}
	var rows []ps.Row
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("ps --json %q: %v", out, err)
	}
	byPrincipal := map[string]ps.Row{}
	for _, r := range rows {
		byPrincipal[r.Principal] = r
	}
	return byPrincipal
}

// credActive reports whether `cotal creds list` shows an active credential of principal.
func credActive(t *testing.T, dir, principal string) bool {
	t.Helper()
	return activeCreds(t, dir, principal) > 0
}

// TestSpawnPsStop runs an agent process through the manager endpoint of `cotal up`: spawn
// --detach returns once the agent is present on its own ledger credential, ps shows its process
// row, stop ends it and retires its credential.
func TestSpawnPsStop(t *testing.T) {
	meshtest.Long(t, "spawns and stops agent processes")
	dir := upMesh(t)

	args := append([]string{"spawn", "--dir", dir, "--name", "sleeper", "--subscribe", "general", "--detach", "--json", "--"}, agentCommand(t)...)
	code, out, stderr := run(t, args...)
	if code != exit.OK {
		t.Fatalf("spawn exit %d: %s %s", code, out, stderr)
	}
	var res spawn.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.State != manager.GoalSucceeded || res.Acceptance.Name != "sleeper" || res.Acceptance.GoalID == "" {
		t.Fatalf("spawn = %s (%v)", out, err)
	}
	row := psRows(t, dir)["local.sleeper"]
	if p := row.Process; !row.Online || p == nil || p.Status != string(manager.StateRunning) || p.PID == 0 || p.LifecycleUID != res.Acceptance.UID || p.InstanceID != res.Acceptance.Executor.LifecycleUID {
		t.Fatalf("ps row of sleeper: %+v (process %+v)", row, row.Process)
	}
	if !credActive(t, dir, "local.sleeper") {
		t.Fatal("the spawned agent has no active ledger row")
	}
	code, out, stderr = run(t, "stop", "--dir", dir, "--name", "sleeper", "--json")
	if code != exit.OK || !strings.Contains(out, `"status":"stopped"`) {
		t.Fatalf("stop (exit %d): %s %s", code, out, stderr)
	}
	if credActive(t, dir, "local.sleeper") {
		t.Error("the stopped agent's credential is still active")
	}
	for _, bad := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"spawn", "--dir", dir, "--name", "a.b", "--", "true"}, exit.Usage, "--name"},
		{[]string{"spawn", "--dir", dir, "--name", "x", "true"}, exit.Usage, "after --"},
		{[]string{"spawn", "--dir", dir, "--name", "x", "--agent", "vim"}, exit.Usage, "--agent"},
		{[]string{"spawn", "--dir", dir, "--name", "x", "--env", "NOVALUE", "--", "true"}, exit.Usage, "--env"},
		{[]string{"spawn", "--dir", dir, "--name", "x", "--env", "=x", "--", "true"}, exit.Usage, "KEY=VALUE"},
		{[]string{"stop", "--dir", dir, "--name", "nobody"}, exit.Failed, "runs an agent nobody"},
	} {
		if code, _, stderr := run(t, bad.args...); code != bad.code || !strings.Contains(stderr, bad.want) {
			t.Errorf("%v: exit %d, %s; want exit %d mentioning %q", bad.args, code, stderr, bad.code, bad.want)
		}
	}
}

// TestSpawnForeground runs a spawn without --detach: it waits for its agent, and on Ctrl-C stops
// it and reports its last row.
func TestSpawnForeground(t *testing.T) {
	dir := upMesh(t)
	ctx, interrupt := context.WithCancel(t.Context())
	defer interrupt()
	done := make(chan int, 1)
	spIO, _, spOut, spErr := iostreams.Test()
	go func() {
		done <- Main(ctx, spIO, append([]string{"spawn", "--dir", dir, "--name", "fg", "--json", "--"}, agentCommand(t)...))
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if p := psRows(t, dir)["local.fg"].Process; p != nil && p.Status == string(manager.StateRunning) {
			break
		}
		select {
		case code := <-done:
			t.Fatalf("spawn ended early with %d: %s", code, spErr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the foreground agent never ran: %s", spErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	interrupt()
	select {
	case code := <-done:
		var res spawn.Result
		if err := json.Unmarshal(spOut.Bytes(), &res); err != nil || code != exit.OK || res.Process == nil || res.Process.Status != string(manager.StateStopped) {
			t.Fatalf("interrupted spawn: exit %d, %s (%v) %s", code, spOut, err, spErr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the interrupted spawn did not end")
	}
	if credActive(t, dir, "local.fg") {
		t.Error("the interrupted spawn left its agent's credential active")
	}
}

// TestSupervise runs a supervisor beside a mesh started without one: spawn says there is none
// until it runs, a second one of the same name is refused, and when it stops it retires what it
// spawned.
func TestSupervise(t *testing.T) {
	meshtest.Long(t, "a supervisor process beside the mesh")
	dir := upMesh(t, "--no-manager")
	ctx := t.Context()
	if code, _, stderr := run(t, "spawn", "--dir", dir, "--name", "early", "--detach", "--", "true"); code != exit.Failed || !strings.Contains(stderr, "no supervisor") {
		t.Fatalf("spawn without a supervisor: exit %d, %s", code, stderr)
	}
	if rows := psRows(t, dir); len(rows) != 0 {
		t.Errorf("ps without a manager: %v", rows)
	}
	supCtx, stopSup := context.WithCancel(ctx)
	supDone := make(chan int, 1)
	supIO, _, _, supErr := iostreams.Test()
	go func() { supDone <- Main(supCtx, supIO, []string{"supervise", "--dir", dir}) }()
	var code int
	var stderr string
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, _, stderr = run(t, append([]string{"spawn", "--dir", dir, "--name", "late", "--detach", "--"}, agentCommand(t)...)...)
		if code == exit.OK || !strings.Contains(stderr, "no supervisor") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code != exit.OK {
		t.Fatalf("spawn under cotal supervise: exit %d, %s (supervise: %s)", code, stderr, supErr.String())
	}
	if code, _, stderr := run(t, "supervise", "--dir", dir); code != exit.Failed || !strings.Contains(stderr, mesh.ErrSupervisorRunning.Error()) {
		t.Errorf("a second supervisor of the same name: exit %d, %s", code, stderr)
	}
	stopSup()
	if code := <-supDone; code != exit.OK {
		t.Fatalf("supervise exit %d: %s", code, supErr.String())
	}
	if credActive(t, dir, "local.late") {
		t.Error("the supervisor left its agent's credential active")
	}
}

// upMesh runs `cotal up` with extra arguments in a fresh directory until the test ends, and
// returns the directory once the mesh is up.
func upMesh(t *testing.T, extra ...string) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	upIO, _, _, _ := iostreams.Test()
	go func() { done <- Main(ctx, upIO, append([]string{"up", "--dir", dir, "--port", "0"}, extra...)) }()
	waitUp(t, dir, done)
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("cotal up did not stop")
		}
	})
	return dir
}

// TestBenchJSON runs `cotal bench` on its throwaway mesh for the credential sizes and checks the
// JSON report a tracker would read.
func TestBenchJSON(t *testing.T) {
	code, stdout, stderr := run(t, "bench", "--only", "credentials/jwt", "--json")
	if code != exit.OK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Broker  string `json:"broker"`
		Space   string `json:"space"`
		Results []struct {
			Name  string  `json:"name"`
			Unit  string  `json:"unit"`
			Cotal float64 `json:"cotal"`
			Met   *bool   `json:"met"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if rep.Broker != "embedded" || rep.Space != "main" || len(rep.Results) != 4 {
		t.Fatalf("report %+v", rep)
	}
	for _, r := range rep.Results {
		if !strings.HasPrefix(r.Name, "credentials/jwt/") || r.Unit != "bytes" || r.Cotal < 1000 {
			t.Errorf("result %+v", r)
		}
	}
	if !strings.Contains(stderr, "[1/1] bench credentials/jwt ...") {
		t.Errorf("no progress on stderr: %q", stderr)
	}
}

// TestBenchHTML: --html draws each case's Cotal figure beside raw NATS's, on a page that runs
// nothing.
func TestBenchHTML(t *testing.T) {
	meshtest.Long(t, "runs the bench")
	page := filepath.Join(t.TempDir(), "bench.html")
	if code, _, stderr := run(t, "bench", "--only", "multicast", "--duration", "200ms", "--html", page); code != exit.OK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	html := string(raw)
	for _, want := range []string{"<svg", ">cotal</text>", ">raw</text>", "ratio ", "multicast"} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(html, "<script") {
		t.Error("the page carries a script")
	}
	if code, _, stderr := run(t, "bench", "--only", "credentials/jwt", "--html", filepath.Join(t.TempDir(), "no", "such", "dir", "b.html")); code == exit.OK || !strings.Contains(stderr, "--html") {
		t.Errorf("an unwritable --html: exit %d %s", code, stderr)
	}
}

// TestMeshTargetRefusals checks the shared --dir/--space resolution: a space the mesh does not
// serve is a usage error, and commands that run on credentials refuse an open mesh.
func TestMeshTargetRefusals(t *testing.T) {
	dir := upMesh(t, "--open")
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"ps", "--space", "elsewhere"}, exit.Usage, `does not serve space "elsewhere"`},
		{[]string{"agent", "--name", "bob"}, exit.Failed, "cotal agent needs an authenticated mesh"},
		{[]string{"deliver"}, exit.Failed, "an open mesh has no delivery daemon"},
		{[]string{"doctor", "auth"}, exit.Failed, "an open mesh has no auth store"},
		{[]string{"creds", "list"}, exit.Failed, "an open mesh has no credentials"},
		{[]string{"endpoints"}, exit.Failed, "an open mesh has no service registry"},
		{[]string{"describe", "manager"}, exit.Failed, "an open mesh has no service registry"},
		{[]string{"invoke", "manager", "ps"}, exit.Failed, "an open mesh has no service registry"},
		{[]string{"spawn", "--name", "a", "--agent", "claude"}, exit.Failed, "an open mesh has no service registry"},
		{[]string{"stop", "--name", "a"}, exit.Failed, "an open mesh has no service registry"},
	} {
		code, _, stderr := run(t, append(tt.args, "--dir", dir)...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", tt.args, code, stderr, tt.code, tt.want)
		}
	}
	// ps runs on an open mesh, without process rows: it has no registry of managers to ask.
	if code, out, stderr := run(t, "ps", "--dir", dir, "--json"); code != exit.OK || strings.TrimSpace(out) != "[]" || stderr != "" {
		t.Errorf("ps on an open mesh: exit %d, %q %q", code, out, stderr)
	}
}
