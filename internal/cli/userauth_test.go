package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/cli/actor"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/cli/ps"
	"github.com/gocotal/cotal/internal/cli/status"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/userauth/oidc"
	"github.com/gocotal/cotal/wire"
)

// TestUserAuthRemoteManager plays the issue's two machines in one: host A runs `cotal up
// --user-auth --dev-idp --no-manager`; from B a person logs in, A grants them supervise, and
// `cotal supervise --mesh` on B registers a remote manager that ps on A lists, that spawns an
// agent when A asks it to, and whose liveness plane answers bound; the person on B lists, spawns
// and stops their own agents through it (a manager-caller view); revoking supervise ends it and
// retires its agent.
func TestUserAuthRemoteManager(t *testing.T) {
	meshtest.Long(t, "a remote manager process")
	t.Setenv("HOME", t.TempDir()) // the login cache of the person on B
	a := upMesh(t, "--user-auth", "--dev-idp", "--dev-idp-addr", "127.0.0.1:0", "--no-manager")
	code, out, stderr := run(t, "status", "--dir", a, "--json")
	if code != exit.OK {
		t.Fatalf("status: exit %d %s", code, stderr)
	}
	var st status.Report
	if err := json.Unmarshal([]byte(out), &st); err != nil || !strings.HasPrefix(st.ExchangeURL, "http://127.0.0.1:") {
		t.Fatalf("status --json exchangeUrl: %q (%v)", st.ExchangeURL, err)
	}
	url := st.ExchangeURL
	// The exchange is a component of its own; the mesh runs no manager, which is named degraded.
	if code, got := components(t, a); code != 1 || got["auth"].State != status.Serving || got["manager main"].State != status.Degraded {
		t.Errorf("status --components of a user-auth mesh without a manager: exit %d, auth %+v, manager %+v", code, got["auth"], got["manager main"])
	}

	// Bad input first: a login for a bad user name, a grant of an unknown scope, supervise
	// without a login.
	if code, _, stderr := run(t, "login", "--mesh", url, "--dev-user", "Not A Name"); code != exit.Usage {
		t.Errorf("login with a bad dev user: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(t, "actor", "grant", "alice", "--scope", "everything", "--dir", a); code != exit.Usage {
		t.Errorf("grant an unknown scope: exit %d %s", code, stderr)
	}
	b := filepath.Join(t.TempDir(), "b")
	if code, _, stderr := run(t, "supervise", "--mesh", url, "--dir", b); code != exit.Failed || !strings.Contains(stderr, "not logged in") {
		t.Errorf("supervise before login: exit %d %s", code, stderr)
	}

	if code, _, stderr := run(t, "login", "--mesh", url, "--dev-user", "alice"); code != exit.OK || !strings.Contains(stderr, "logged in") {
		t.Fatalf("login: exit %d %s", code, stderr)
	}
	// Logged in but granted nothing: the host refuses.
	if code, _, stderr := run(t, "supervise", "--mesh", url, "--dir", b); code != exit.Failed || !strings.Contains(stderr, "refused") {
		t.Errorf("supervise without supervise: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(t, "actor", "grant", "alice", "--scope", "supervise", "--dir", a); code != exit.OK {
		t.Fatalf("grant: exit %d %s", code, stderr)
	}
	// alice posts as herself from B: only where her row lets her, which the broker enforces.
	if code, _, stderr := run(t, "send", "--mesh", url, "msg", "general", "hello from B"); code != exit.NotAuthorized {
		t.Errorf("send beyond alice's row: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(t, "actor", "grant", "alice", "--scope", "supervise", "--scope", "spawn", "--allow-publish", "general", "--allow-subscribe", "general", "--dir", a); code != exit.OK {
		t.Fatalf("grant general: exit %d %s", code, stderr)
	}
	if code, out, stderr := run(t, "send", "--mesh", url, "msg", "general", "hello from B"); code != exit.OK || !strings.Contains(out, "stored seq") {
		t.Errorf("send within alice's row: exit %d %s %s", code, out, stderr)
	}
	code, out, stderr = run(t, "actor", "list", "--dir", a, "--json")
	var rows []actor.ListRow
	if code != exit.OK || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0].Name != "alice" || !slices.Equal(rows[0].Scope, []string{"supervise", "spawn"}) {
		t.Fatalf("actor list: exit %d %s %s", code, out, stderr)
	}
	owner := rows[0].Owner

	// Machine B.
	supCtx, stopSup := context.WithCancel(t.Context())
	defer stopSup()
	supDone := make(chan int, 1)
	supIO, _, _, supErr := iostreams.Test()
	go func() { supDone <- Main(supCtx, supIO, []string{"supervise", "--mesh", url, "--dir", b}) }()

	// ps on A lists it.
	managerLine := regexp.MustCompile(`(?m)^([a-z0-9]{26,})\s+(\d+)\s+(\d+)$`)
	var instance string
	deadline := time.Now().Add(30 * time.Second)
	for instance == "" {
		if time.Now().After(deadline) {
			t.Fatalf("ps on A never listed the remote manager (supervise: %s)", supErr.String())
		}
		select {
		case c := <-supDone:
			t.Fatalf("supervise ended with %d: %s", c, supErr.String())
		default:
		}
		if _, out, _ := run(t, "ps", "--dir", a); managerLine.MatchString(out) {
			instance = managerLine.FindStringSubmatch(out)[1]
		} else {
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Its liveness plane answers bound.
	code, out, _ = run(t, "status", "--dir", a, "--json")
	if err := json.Unmarshal([]byte(out), &st); code != exit.OK || err != nil || st.Spaces[0].Planes[wire.PlaneManager] != wire.ResponderBound {
		t.Fatalf("manager liveness from A: %s", out)
	}
	// A asks it to spawn an agent, which runs on B as alice's.
	args := append([]string{"spawn", "--dir", a, "--instance", instance, "--name", "dana", "--detach", "--"}, agentCommand(t)...)
	if code, _, stderr := run(t, args...); code != exit.OK {
		t.Fatalf("spawn on the remote manager: exit %d %s (supervise: %s)", code, stderr, supErr.String())
	}
	dana, ok := psRows(t, a)[owner+".dana"]
	if !ok || dana.Process == nil || dana.Process.InstanceID != instance || dana.Process.Status != "running" {
		t.Fatalf("ps on A: dana %+v", dana)
	}

	// alice, from B, calls her own manager through a manager-caller view: ps lists her agents
	// there, and spawn and stop run on B as hers. Bad input: an instance id out of the grammar is
	// a usage error; an instance that is not hers is refused at the exchange.
	psMesh := func() map[string]ps.Row {
		t.Helper()
		code, out, stderr := run(t, "ps", "--mesh", url, "--json")
		var rows []ps.Row
		if code != exit.OK || json.Unmarshal([]byte(out), &rows) != nil {
			t.Fatalf("ps --mesh: exit %d %s %s", code, out, stderr)
		}
		byPrincipal := map[string]ps.Row{}
		for _, r := range rows {
			if r.Process == nil || r.Process.InstanceID != instance {
				t.Fatalf("ps --mesh answered a row of another manager: %+v", r)
			}
			byPrincipal[r.Principal] = r
		}
		return byPrincipal
	}
	if mine := psMesh(); len(mine) != 1 || mine[owner+".dana"].Status != "running" {
		t.Fatalf("ps --mesh: %+v", mine)
	}
	if code, _, stderr := run(t, "ps", "--mesh", url, "--instance", "Not-An-Id"); code != exit.Usage {
		t.Errorf("ps --mesh --instance out of grammar: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(t, "ps", "--mesh", url, "--instance", string(wire.NewLifecycleUID())); code != exit.NotAuthorized {
		t.Errorf("ps --mesh on a manager not alice's: exit %d %s", code, stderr)
	}
	args = append([]string{"spawn", "--mesh", url, "--name", "erin", "--detach", "--"}, agentCommand(t)...)
	if code, _, stderr := run(t, args...); code != exit.OK {
		t.Fatalf("spawn --mesh: exit %d %s (supervise: %s)", code, stderr, supErr.String())
	}
	if mine := psMesh(); mine[owner+".erin"].Status != "running" {
		t.Fatalf("ps --mesh after spawn: %+v", mine)
	}
	meshtest.Eventually(t, 15*time.Second, "erin connected on her root credential", func() bool { return credActive(t, a, owner+".erin") })
	if code, _, stderr := run(t, "stop", "--mesh", url, "--name", "erin"); code != exit.OK {
		t.Fatalf("stop --mesh: exit %d %s", code, stderr)
	}
	if st := psMesh()[owner+".erin"].Status; st == "running" {
		t.Errorf("erin after stop --mesh: %s", st)
	}
	// Her manager retired her through the auth endpoint, as her retirement requester: her
	// credentials are revoked at the host.
	meshtest.Eventually(t, 15*time.Second, "erin's credentials retired", func() bool { return !credActive(t, a, owner+".erin") })

	// alice attaches from B to a terminal of hers there, in tmux as a person would: her half of
	// the session waits in A's ledger, and she takes it on A's session-holder route; Ctrl-] ends
	// the session at A.
	if code, _, stderr := run(t, "attach", "--instance", instance, "shell"); code != exit.Usage {
		t.Errorf("attach --instance without --mesh: exit %d %s", code, stderr)
	}
	// As a person would: the spawn waits in the foreground for its agent, a shell that never joins.
	_, _, stopShell := background(t, "spawn", "--mesh", url, "--name", "shell", "--", "bash", "--norc", "--noprofile")
	meshtest.Eventually(t, 20*time.Second, "the shell running on B", func() bool { return psMesh()[owner+".shell"].Status == "running" })
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pane := newTmux(t, fmt.Sprintf("env HOME=%s %s=1 %s attach --mesh %s shell; echo \"[exit $?]\"", os.Getenv("HOME"), envRunCLI, self, url))
	pane.waitFor("the prompt", bashPrompt)
	pane.run("send-keys", "-t", "t", "echo hi from B", "Enter")
	pane.waitFor("the typed line's output", equals("hi from B"))
	l := openLedger(t, a, waitUp(t, a, nil).URL)
	sessionID := openSession(t, l)
	held, err := l.Session(t.Context(), sessionID)
	if err != nil || held == nil || held.Row.Holder.Principal != owner+".cli" || held.Row.Serving.InstanceID != wire.LifecycleUID(instance) {
		t.Fatalf("the session in A's ledger: %+v %v", held, err)
	}
	pane.run("send-keys", "-t", "t", "C-]")
	pane.waitFor("the detach", func(l string) bool { return strings.Contains(l, "[cotal: detached from shell]") })
	pane.waitFor("cotal attach exiting 0 after Ctrl-]", equals("[exit 0]"))
	meshtest.Eventually(t, 15*time.Second, "the session closed at A", func() bool {
		os, err := l.Session(t.Context(), sessionID)
		return err == nil && os.Row.State == authstore.SessionClosed && os.Row.Revoked.Caller && os.Row.Revoked.Serving
	})
	stopShell()

	// dana is a managed agent: her actor token, in her launch material on B, buys bearers of at
	// most five minutes on A's loopback face; a wrong token buys nothing.
	tokens, _ := filepath.Glob(filepath.Join(b, mesh.DirName, "launch", "main", "dana-*", "actor.token"))
	if len(tokens) != 1 {
		t.Fatalf("dana's actor token on B: %v", tokens)
	}
	code, out, stderr = run(t, "agent-bearer", "--dir", a, "--owner", owner, "--actor", "dana", "--token-file", tokens[0])
	if code != exit.OK {
		t.Fatalf("agent-bearer: exit %d %s", code, stderr)
	}
	if parts := strings.Split(strings.TrimSpace(out), "."); len(parts) != 3 {
		t.Fatalf("agent-bearer printed %q", out)
	} else if raw, err := base64.RawURLEncoding.DecodeString(parts[1]); err != nil {
		t.Fatal(err)
	} else {
		var c struct{ Iat, Exp int64 }
		if err := json.Unmarshal(raw, &c); err != nil || c.Exp-c.Iat > 300 || c.Exp <= c.Iat {
			t.Fatalf("agent bearer lifetime: %s (%v)", raw, err)
		}
	}
	// A copy: the manager removes the launch material when the agent ends.
	kept := filepath.Join(t.TempDir(), "dana.token")
	if raw, err := os.ReadFile(tokens[0]); err != nil || os.WriteFile(kept, raw, 0o600) != nil {
		t.Fatalf("keep dana's token: %v", err)
	}
	wrong := filepath.Join(t.TempDir(), "wrong.token")
	if err := os.WriteFile(wrong, []byte("not-the-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run(t, "agent-bearer", "--dir", a, "--owner", owner, "--actor", "dana", "--token-file", wrong); code != exit.NotAuthorized {
		t.Errorf("agent-bearer with a wrong token: exit %d %s", code, stderr)
	}

	// Revoking supervise evicts it: supervise ends with an error, dana's credential is retired.
	if code, _, stderr := run(t, "actor", "revoke", "alice", "--scope", "supervise", "--dir", a); code != exit.OK {
		t.Fatalf("revoke: exit %d %s", code, stderr)
	}
	select {
	case c := <-supDone:
		if c == exit.OK || !strings.Contains(supErr.String(), "remote supervision ended") {
			t.Fatalf("supervise after eviction: exit %d %s", c, supErr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the evicted remote manager kept running: %s", supErr.String())
	}
	if credActive(t, a, owner+".dana") {
		t.Error("the evicted manager's agent kept its credential")
	}
	// The host deregistered it: ps on A no longer waits for it or warns.
	if code, out, stderr := run(t, "ps", "--dir", a); code != exit.OK || managerLine.MatchString(out) || stderr != "" {
		t.Errorf("ps on A after the eviction: exit %d %s %s", code, out, stderr)
	}
	if code, _, stderr := run(t, "agent-bearer", "--dir", a, "--owner", owner, "--actor", "dana", "--token-file", kept); code != exit.NotAuthorized {
		t.Errorf("agent-bearer for a retired agent: exit %d %s", code, stderr)
	}
	// Logout forgets the login and revokes its refresh token at the IdP.
	sessionsPath, err := oidc.DefaultSessionsPath()
	if err != nil {
		t.Fatal(err)
	}
	cache, err := oidc.LoadSessions(sessionsPath)
	if err != nil {
		t.Fatal(err)
	}
	login, err := cache.Get(url)
	if err != nil || login.RefreshToken == "" {
		t.Fatalf("the cached login: %v", err)
	}
	if code, _, stderr := run(t, "logout", "--mesh", url); code != exit.OK || !strings.Contains(stderr, "logged out") {
		t.Errorf("logout: exit %d %s", code, stderr)
	}
	idp, err := oidc.Discover(t.Context(), nil, login.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idp.Refresh(t.Context(), nil, login.ClientID, login.RefreshToken); !errors.Is(err, oidc.ErrInvalidGrant) {
		t.Errorf("the logged-out refresh token still redeems: %v", err)
	}
	if code, _, stderr := run(t, "supervise", "--mesh", url, "--dir", b); code != exit.Failed || !strings.Contains(stderr, "not logged in") {
		t.Errorf("supervise after logout: exit %d %s", code, stderr)
	}
}
