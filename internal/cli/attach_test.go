package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/ledger"
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

// TestAttachUnderTmux drives `cotal attach` as a person would, in tmux: the shell's prompt
// shows, a typed line runs, `cotal input` types into the same terminal from outside, and Ctrl-]
// detaches, closing the session's ledger row with both credentials revoked.
func TestAttachUnderTmux(t *testing.T) {
	dir := upMesh(t)
	args := `{"name":"shell","launchOptions":{"command":["sh","-i"],"env":["PS1=shell$ "]}}`
	if code, res, stderr := invoke(t, "manager", "spawn", "--dir", dir, "--args", args, "--timeout", "1s"); !res.OK {
		t.Fatalf("spawn the shell: exit %d, %+v %s", code, res, stderr)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pane := newTmux(t, fmt.Sprintf("env %s=1 %s attach shell --dir %s", envRunCLI, self, dir))
	pane.waitFor("the prompt", func(l string) bool { return strings.HasPrefix(l, "shell$") })
	pane.run("send-keys", "-t", "t", "echo hi", "Enter")
	pane.waitFor("hi", equals("hi"))

	if code, out, stderr := run(t, "input", "shell", "--text", "echo from-input", "--dir", dir); code != exit.OK || !strings.Contains(out, "sent 16 bytes to shell") {
		t.Fatalf("input: exit %d, %s %s", code, out, stderr)
	}
	pane.waitFor("the input's output", equals("from-input"))
	if shell := psRows(t, dir)["local.shell"]; len(shell.Attached) != 1 || shell.Attached[0] != "local.cotal_control" {
		t.Fatalf("ps while attached: %+v", shell)
	}

	pane.run("send-keys", "-t", "t", "C-]")
	pane.waitFor("the detach", func(l string) bool { return strings.Contains(l, "[cotal: detached from shell]") })
	detached := time.Now()
	defer func() { t.Logf("cotal attach exited %s after the detach", time.Since(detached)) }()
	meshtest.Eventually(t, 60*time.Second, "cotal attach exiting after Ctrl-]", func() bool {
		return strings.TrimSpace(pane.run("display-message", "-p", "-t", "t", "#{pane_dead} #{pane_dead_status}")) == "1 0"
	})

	st := waitUp(t, dir, nil)
	kr, err := mesh.Dir{Path: filepath.Join(dir, mesh.DirName)}.OpenKeyring()
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(t.Context(), st.URL, kr, "main")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	meshtest.Eventually(t, 15*time.Second, "the session's credentials revoked", func() bool {
		rows, err := l.Credentials(t.Context())
		if err != nil {
			return false
		}
		halves := 0
		for _, r := range rows {
			if r.Profile == authority.ProfileSessionCaller || r.Profile == authority.ProfileSessionServing {
				halves++
				if r.State != authority.CredRevoked {
					return false
				}
				id, _, _ := strings.Cut(r.CredentialID, ".")
				if os, err := l.Session(t.Context(), id); err != nil || os == nil || os.Row.State != authority.SessionClosed {
					return false
				}
			}
		}
		return halves == 2
	})
}
