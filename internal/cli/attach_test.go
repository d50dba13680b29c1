package cli

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/anchors"
	"github.com/gocotal/cotal/internal/cli/creds"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// tmuxSession is a detached tmux session on its own server, as a person's terminal.
type tmuxSession struct {
	t      *testing.T
	socket string
}

// newTmux starts command in a 120x40 tmux session that stays on screen after it exits.
func newTmux(t *testing.T, command string) *tmuxSession {
	t.Helper()
	meshtest.Long(t, "drives tmux")
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is not installed: .ci/run installs it")
	}
	s := &tmuxSession{t: t, socket: "cotal-" + wire.NewNonce()[:12]}
	s.run("new-session", "-d", "-s", "t", "-x", "120", "-y", "40", command, ";", "set-option", "-t", "t", "remain-on-exit", "on")
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", s.socket, "kill-server").Run() })
	return s
}

func (s *tmuxSession) run(args ...string) string {
	s.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", s.socket}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

// screen is what the pane shows now.
func (s *tmuxSession) screen() string { return s.run("capture-pane", "-p", "-t", "t") }

// waitFor waits until the pane shows a line for which match is true.
func (s *tmuxSession) waitFor(what string, match func(line string) bool) {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, line := range strings.Split(s.screen(), "\n") {
			if match(strings.TrimRight(line, " ")) {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the pane never showed %s:\n%s", what, s.screen())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func equals(want string) func(string) bool { return func(l string) bool { return l == want } }

// bashPrompt matches the prompt of bash --norc --noprofile.
func bashPrompt(l string) bool {
	return strings.HasPrefix(l, "bash-") && (strings.HasSuffix(l, "$") || strings.HasSuffix(l, "#"))
}

// TestAttachUnderTmux drives `cotal attach` as a person would, in tmux: the shell's prompt
// shows, a typed line runs, `cotal input` types into the same terminal from outside, and Ctrl-]
// detaches, closing the session's ledger row with both credentials revoked.
func TestAttachUnderTmux(t *testing.T) {
	meshtest.Long(t, "drives tmux")
	dir := upMesh(t)
	// As a person would: the spawn waits in the foreground for its agent.
	_, _, stopSpawn := background(t, "spawn", "--dir", dir, "--name", "shell", "--", "bash", "--norc", "--noprofile")
	meshtest.Eventually(t, 20*time.Second, "the shell running", func() bool {
		code, out, _ := run(t, "ps", "--dir", dir, "--json")
		return code == exit.OK && strings.Contains(out, `"name":"shell","id":"local.shell"`) && strings.Contains(out, `"status":"running"`)
	})
	// Refusals end attach at once rather than retrying: no such agent, and a headless one.
	if code, _, stderr := run(t, "attach", "nobody", "--dir", dir); code != exit.OK || !strings.Contains(stderr, "nobody is gone") {
		t.Fatalf("attach to no agent: exit %d, %s", code, stderr)
	}
	headless := `{"name":"quiet","launchOptions":{"command":["sleep","600"],"runtime":"headless"}}`
	if code, res, stderr := invoke(t, "manager", "spawn", "--dir", dir, "--args", headless, "--timeout", "1s"); !res.OK {
		t.Fatalf("spawn a headless agent: exit %d, %+v %s", code, res, stderr)
	}
	if code, _, stderr := run(t, "attach", "quiet", "--dir", dir); code != exit.Failed || !strings.Contains(stderr, "headless") {
		t.Fatalf("attach to a headless agent: exit %d, %s", code, stderr)
	}
	grantVerifiesWithTheListedAnchor(t, dir)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pane := newTmux(t, fmt.Sprintf("env %s=1 %s attach shell --dir %s; echo \"[exit $?]\"", envRunCLI, self, dir))
	pane.waitFor("the prompt", bashPrompt)
	pane.run("send-keys", "-t", "t", "echo hi", "Enter")
	pane.waitFor("hi", equals("hi"))

	if code, out, stderr := run(t, "input", "shell", "--text", "echo from-input", "--dir", dir); code != exit.OK || !strings.Contains(out, "sent 16 bytes to shell") {
		t.Fatalf("input: exit %d, %s %s", code, out, stderr)
	}
	pane.waitFor("the input's output", equals("from-input"))
	if shell := psRows(t, dir)["local.shell"]; len(shell.Attached) != 1 || shell.Attached[0] != "local.cotal_control" {
		t.Fatalf("ps while attached: %+v", shell)
	}

	// The operator ends the session from the ledger: attach has lost it, and comes back on a
	// fresh one.
	st := waitUp(t, dir, nil)
	l := openLedger(t, dir, st.URL)
	sessionID := openSession(t, l)
	if err := l.CloseSession(t.Context(), sessionID, authstore.SessionCloser{Operator: true}, authstore.SessionClosed); err != nil {
		t.Fatal(err)
	}
	pane.waitFor("the reconnect", func(l string) bool { return strings.Contains(l, "[cotal: connection lost") })
	meshtest.Eventually(t, 20*time.Second, "a fresh session", func() bool { return openSession(t, l) != "" && openSession(t, l) != sessionID })
	pane.run("send-keys", "-t", "t", "echo again", "Enter")
	pane.waitFor("the line typed after the reconnect", equals("again"))

	// A window resize reaches the agent's terminal.
	pane.run("resize-window", "-t", "t", "-x", "100", "-y", "30")
	pane.run("send-keys", "-t", "t", "stty size", "Enter")
	pane.waitFor("the new size", equals("30 100"))

	pane.run("send-keys", "-t", "t", "C-]")
	pane.waitFor("the detach", func(l string) bool { return strings.Contains(l, "[cotal: detached from shell]") })
	pane.waitFor("cotal attach exiting 0 after Ctrl-]", equals("[exit 0]"))

	// Attached again, the agent's process is killed: the session ends with process-exit.
	again := newTmux(t, fmt.Sprintf("env %s=1 %s attach shell --dir %s; echo \"[exit $?]\"", envRunCLI, self, dir))
	again.waitFor("the prompt", bashPrompt)
	pid := psRows(t, dir)["local.shell"].Process.PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	again.waitFor("the end of the session", func(l string) bool { return strings.Contains(l, "[cotal: shell is gone]") })
	again.waitFor("cotal attach exiting 0", equals("[exit 0]"))
	stopSpawn()

	meshtest.Eventually(t, 15*time.Second, "the session's credentials revoked", func() bool {
		rows, err := l.Credentials(t.Context())
		if err != nil {
			return false
		}
		halves := 0
		for _, r := range rows {
			if r.Profile == authority.ProfileSessionCaller || r.Profile == authority.ProfileSessionServing {
				halves++
				if r.State != authstore.CredRevoked {
					return false
				}
				id, _, _ := strings.Cut(r.CredentialID, ".")
				if os, err := l.Session(t.Context(), id); err != nil || os == nil || os.Row.State != authstore.SessionClosed {
					return false
				}
			}
		}
		return halves == 8 // four sessions, each with both halves
	})
	code, out, stderr := run(t, "creds", "list", "--dir", dir, "--json")
	var rows []creds.Row
	if err := json.Unmarshal([]byte(out), &rows); code != exit.OK || err != nil {
		t.Fatalf("creds list --json: exit %d, %v: %s", code, err, stderr)
	}
	listed := map[string]int{}
	for _, r := range rows {
		if r.State == "revoked" {
			listed[r.Profile]++
		}
	}
	if listed[string(authority.ProfileSessionCaller)] != 4 || listed[string(authority.ProfileSessionServing)] != 4 {
		t.Fatalf("creds list --json does not list the ended sessions' halves as revoked: %v", listed)
	}
}

// openLedger opens the ledger of space main of the mesh in dir.
func openLedger(t *testing.T, dir, url string) *ledger.Ledger {
	t.Helper()
	kr, err := mesh.Dir{Path: filepath.Join(dir, mesh.DirName)}.OpenKeyring()
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(t.Context(), url, kr, "main")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// openSession returns the id of the one active session's caller half, or "".
func openSession(t *testing.T, l *ledger.Ledger) string {
	t.Helper()
	rows, err := l.Credentials(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Profile == authority.ProfileSessionCaller && r.State == authstore.CredActive {
			id, _, _ := strings.Cut(r.CredentialID, ".")
			return id
		}
	}
	return ""
}

// grantVerifiesWithTheListedAnchor asks the manager for a session on the shell as the contract
// reads (cotal invoke manager attach): the grant in the reply has exactly the reference's
// members, and its sig verifies, by hand, with the public key cotal anchors --json lists for its
// issuer.keyId.
func grantVerifiesWithTheListedAnchor(t *testing.T, dir string) {
	t.Helper()
	shell := psRows(t, dir)["local.shell"].Process
	code, res, stderr := invoke(t, "manager", "attach", "--dir", dir, "--mode", "owner", "--target", "local.shell."+shell.LifecycleUID)
	if code != exit.OK || !res.OK {
		t.Fatalf("invoke manager attach: exit %d, %+v %s", code, res, stderr)
	}
	var reply struct {
		Grant map[string]json.RawMessage `json:"grant"`
	}
	if err := json.Unmarshal(res.Data, &reply); err != nil {
		t.Fatalf("attach's reply %s: %v", res.Data, err)
	}
	var members []string
	for k := range reply.Grant {
		members = append(members, k)
	}
	slices.Sort(members)
	if want := []string{"endpoint", "exp", "holder", "iat", "issuer", "nonce", "serving", "sessionId", "sig", "space", "subjects", "v", "window"}; !slices.Equal(members, want) {
		t.Fatalf("the grant's members are %q, the reference's %q", members, want)
	}
	var issuer struct {
		KeyID string `json:"keyId"`
	}
	var sig string
	_ = json.Unmarshal(reply.Grant["issuer"], &issuer)
	_ = json.Unmarshal(reply.Grant["sig"], &sig)
	code, out, stderr := run(t, "anchors", "--dir", dir, "--json")
	var listed []anchors.Row
	if err := json.Unmarshal([]byte(out), &listed); code != exit.OK || err != nil {
		t.Fatalf("anchors --json: exit %d, %v: %s", code, err, stderr)
	}
	var pub string
	for _, a := range listed {
		if a.KeyID == issuer.KeyID && a.Role == "sessions" && a.Current {
			pub = a.PublicKey
		}
	}
	if pub == "" {
		t.Fatalf("cotal anchors lists no current sessions key %s: %s", issuer.KeyID, out)
	}
	delete(reply.Grant, "sig")
	unsigned, _ := json.Marshal(reply.Grant)
	input, err := wire.Canonicalize(unsigned)
	if err != nil {
		t.Fatal(err)
	}
	key, err := nkeys.FromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		t.Fatal(err)
	}
	if err := key.Verify(input, raw); err != nil {
		t.Fatalf("the grant's sig does not verify with the listed key %s: %v", pub, err)
	}
	// Nobody holds this session: the operator ends it rather than wait out its idle deadline.
	var sessionID string
	_ = json.Unmarshal(reply.Grant["sessionId"], &sessionID)
	l := openLedger(t, dir, waitUp(t, dir, nil).URL)
	if err := l.CloseSession(t.Context(), sessionID, authstore.SessionCloser{Operator: true}, authstore.SessionClosed); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 15*time.Second, "the invoked session gone from ps", func() bool { return len(psRows(t, dir)["local.shell"].Attached) == 0 })
}
