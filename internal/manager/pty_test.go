package manager_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/wire"
)

// outputTimeout bounds how long a test waits for output it expects.
const outputTimeout = 15 * time.Second

// spawnShell spawns `sh -c script` under the default runtime and returns its terminal.
func (f *fixture) spawnShell(t *testing.T, name, script string, env ...string) *manager.Terminal {
	t.Helper()
	st, err := f.sup.Spawn(t.Context(), manager.Spec{Name: name, Command: []string{"sh", "-c", script}, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	if st.Runtime != manager.RuntimePTY {
		t.Errorf("%s runs %q, want the default runtime %q", name, st.Runtime, manager.RuntimePTY)
	}
	term, err := f.sup.Terminal(name)
	if err != nil {
		t.Fatal(err)
	}
	return term
}

// readUntil reads tap until its snapshot and what followed contain want, and returns what
// followed the snapshot. It fails the test if want has not appeared within outputTimeout, or by
// the time the tap is done.
func readUntil(t *testing.T, tap *manager.Tap, want string) []byte {
	t.Helper()
	all := bytes.Clone(tap.Snapshot)
	from := len(all)
	timeout := time.NewTimer(outputTimeout)
	defer timeout.Stop()
	found := func(before int) bool { return bytes.Contains(all[max(0, before-len(want)):], []byte(want)) }
	if found(0) {
		return all[from:]
	}
	for {
		select {
		case chunk := <-tap.Out():
			before := len(all)
			all = append(all, chunk...)
			if found(before) {
				return all[from:]
			}
		case <-tap.Done():
			all = append(all, drain(tap)...) // all that was read before the end is queued already
			if found(0) {
				return all[from:]
			}
			t.Fatalf("the tap ended before %q appeared; it showed %q", want, all)
		case <-timeout.C:
			t.Fatalf("%q did not appear within %v; the tap showed %q", want, outputTimeout, all)
		}
	}
}

// awaitOutput returns the terminal's output, scrollback included, once it contains want.
func awaitOutput(t *testing.T, term *manager.Terminal, want string) string {
	t.Helper()
	tap := term.Attach(1 << 12)
	defer tap.Close()
	return string(tap.Snapshot) + string(readUntil(t, tap, want))
}

// awaitDone waits for the tap to end.
func awaitDone(t *testing.T, tap *manager.Tap) {
	t.Helper()
	select {
	case <-tap.Done():
	case <-time.After(outputTimeout):
		t.Fatalf("the tap did not end within %v", outputTimeout)
	}
}

// drain returns what is queued on a done tap.
func drain(tap *manager.Tap) []byte {
	var got []byte
	for {
		select {
		case chunk := <-tap.Out():
			got = append(got, chunk...)
		default:
			return got
		}
	}
}

// restarted waits until the agent runs its first restart.
func restarted(t *testing.T, f *fixture, name string) {
	t.Helper()
	deadline := time.Now().Add(outputTimeout)
	for {
		st, _ := f.sup.Lookup(name)
		if st.State == manager.StateRunning && st.Restarts == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not restart: %+v", name, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func write(t *testing.T, term *manager.Terminal, s string) {
	t.Helper()
	if _, err := term.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

// TestTerminalTapAndWrite: output reaches the scrollback; a tap gets the scrollback as its
// snapshot and what follows on Out, with no gap and no overlap; what is written reaches the
// process, and the terminal echoes it.
func TestTerminalTapAndWrite(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	term := f.spawnShell(t, "echoer", `echo ready; while read line; do echo "said $line"; done`)
	awaitOutput(t, term, "ready\r\n")

	tap := term.Attach(64)
	defer tap.Close()
	if !strings.Contains(string(tap.Snapshot), "ready") {
		t.Fatalf("the snapshot %q lacks the output so far", tap.Snapshot)
	}
	write(t, term, "hello\n")
	got := readUntil(t, tap, "said hello\r\n")
	if want := "hello\r\nsaid hello\r\n"; string(got) != want {
		t.Errorf("the tap got %q after its snapshot, want %q", got, want)
	}
	// The shell now waits for input: a later snapshot is exactly the first and what followed it.
	later := term.Attach(1)
	defer later.Close()
	if want := append(bytes.Clone(tap.Snapshot), got...); !bytes.Equal(later.Snapshot, want) {
		t.Errorf("the scrollback is %q, want the first snapshot and the tap's output, %q", later.Snapshot, want)
	}
	if n := tap.Dropped(); n != 0 {
		t.Errorf("a tap that kept up dropped %d bytes", n)
	}
}

// TestTerminalInteractiveShell: an interactive shell on the terminal prompts, runs what is typed
// and exits when told.
func TestTerminalInteractiveShell(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if _, err := f.sup.Spawn(t.Context(), manager.Spec{Name: "shell", Command: []string{"sh", "-i"}, Env: []string{"PS1=cotal$ "}}); err != nil {
		t.Fatal(err)
	}
	term, err := f.sup.Terminal("shell")
	if err != nil {
		t.Fatal(err)
	}
	awaitOutput(t, term, "cotal$ ")
	tap := term.Attach(256)
	defer tap.Close()
	write(t, term, "echo hi $((6*7))\n")
	readUntil(t, tap, "hi 42\r\n")
	write(t, term, "exit\n")
	awaitDone(t, tap)
	if st := f.wait(t, "shell"); st.State != manager.StateExited {
		t.Errorf("the shell ended %+v, want exited", st)
	}
}

// TestTerminalResize: the terminal starts at 120x40; a resize reaches the running process and
// is refused for a zero dimension.
func TestTerminalResize(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	term := f.spawnShell(t, "sizer", `stty size; read x; stty size; read x`)
	awaitOutput(t, term, "40 120\r\n")
	if cols, rows := term.Size(); cols != 120 || rows != 40 {
		t.Errorf("Size = %dx%d, want 120x40", cols, rows)
	}
	for _, size := range [][2]uint16{{0, 30}, {100, 0}} {
		if err := term.Resize(size[0], size[1]); err == nil {
			t.Errorf("Resize(%d, %d) was accepted", size[0], size[1])
		}
	}
	if err := term.Resize(100, 30); err != nil {
		t.Fatal(err)
	}
	if cols, rows := term.Size(); cols != 100 || rows != 30 {
		t.Errorf("Size = %dx%d after a resize, want 100x30", cols, rows)
	}
	write(t, term, "\n")
	awaitOutput(t, term, "30 100\r\n")
}

// TestTerminalSlowTap: a flood of output fills a tap that never reads, which drops and counts
// what does not fit, while another tap gets every byte and the process runs on. The scrollback
// keeps the last ScrollbackBytes of it.
func TestTerminalSlowTap(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	term := f.spawnShell(t, "flood", `read x; seq 1 60000; read x`)
	slow, fast := term.Attach(1), term.Attach(1<<16)
	defer slow.Close()
	defer fast.Close()
	write(t, term, "go\n")
	got := readUntil(t, fast, "\r\n60000\r\n")
	// The reader offers a chunk to every tap under the terminal's lock: once the lock is free
	// again, the slow tap has had the last chunk too.
	term.Size()
	if n := fast.Dropped(); n != 0 {
		t.Errorf("the tap that kept up dropped %d bytes", n)
	}
	queued := drain(slow)
	dropped := slow.Dropped()
	if dropped == 0 || int64(len(queued))+dropped != int64(len(got)) {
		t.Errorf("the slow tap queued %d bytes and dropped %d; want some dropped, %d in all", len(queued), dropped, len(got))
	}
	if !bytes.HasPrefix(got, queued) {
		t.Errorf("the slow tap queued %q, not the start of the output", queued)
	}
	if n := slow.Dropped(); n != 0 {
		t.Errorf("Dropped = %d right after a call, want 0: it resets", n)
	}

	scroll := term.Attach(1)
	defer scroll.Close()
	if len(scroll.Snapshot) != manager.ScrollbackBytes || !bytes.HasSuffix(got, scroll.Snapshot) {
		t.Errorf("the scrollback holds %d bytes ending %q; want the last %d of the output", len(scroll.Snapshot),
			scroll.Snapshot[max(0, len(scroll.Snapshot)-20):], manager.ScrollbackBytes)
	}
}

// TestTerminalProcessEnd: a closed tap is done; a kill ends the taps of the process; after the
// end Write fails with ErrNotRunning and a new tap is done at once with the scrollback.
func TestTerminalProcessEnd(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	term := f.spawnShell(t, "victim", `echo up; read x`)
	awaitOutput(t, term, "up\r\n")

	closed := term.Attach(4)
	closed.Close()
	closed.Close()
	awaitDone(t, closed)

	tap := term.Attach(4)
	defer tap.Close()
	if err := f.sup.StopAgent(t.Context(), "victim", false); err != nil {
		t.Fatal(err)
	}
	awaitDone(t, tap)
	if st := f.wait(t, "victim"); st.State != manager.StateStopped {
		t.Errorf("the agent ended %+v, want stopped", st)
	}
	if _, err := term.Write([]byte("x\n")); !errors.Is(err, manager.ErrNotRunning) {
		t.Errorf("Write after the end = %v, want ErrNotRunning", err)
	}
	late := term.Attach(4)
	awaitDone(t, late)
	if !strings.Contains(string(late.Snapshot), "up\r\n") {
		t.Errorf("a tap after the end has the snapshot %q, want the scrollback", late.Snapshot)
	}
	if err := term.Resize(80, 24); err != nil {
		t.Errorf("Resize with no process running = %v, want it recorded", err)
	}
	f.retired(t, "victim")
}

// TestTerminalRestart: a crashed agent restarts on a fresh pty at the size last set, under the
// same Terminal, whose scrollback carries on; a tap of the first run ends with it.
func TestTerminalRestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	marker := filepath.Join(t.TempDir(), "ran")
	term := f.spawnShell(t, "phoenix",
		`if [ -e "$MARK" ]; then echo second; stty size; exec cat; fi; touch "$MARK"; echo first; read x; exit 3`, "MARK="+marker)
	awaitOutput(t, term, "first\r\n")
	first, _ := f.sup.Lookup("phoenix")
	if err := term.Resize(90, 20); err != nil {
		t.Fatal(err)
	}
	tap := term.Attach(64)
	defer tap.Close()
	write(t, term, "\n")
	awaitDone(t, tap)
	restarted(t, f, "phoenix")

	out := awaitOutput(t, term, "20 90\r\n")
	if !strings.Contains(out, "first\r\n") || !strings.Contains(out, "second\r\n") {
		t.Errorf("the scrollback %q does not carry on across the restart", out)
	}
	if got := string(drain(tap)); strings.Contains(got, "second") {
		t.Errorf("the first run's tap got the second run's output: %q", got)
	}
	if again, err := f.sup.Terminal("phoenix"); err != nil || again != term {
		t.Errorf("Terminal after a restart = %p, %v; want the same %p", again, err, term)
	}
	if st, _ := f.sup.Lookup("phoenix"); st.PID == first.PID {
		t.Errorf("after the restart the agent is %+v; it was %+v", st, first)
	}
	second := term.Attach(64)
	defer second.Close()
	write(t, term, "ping\n")
	readUntil(t, second, "ping\r\nping\r\n") // the terminal's echo, then cat's
}

// TestTerminalLeftoverHolder: a process the agent leaves behind holding the terminal open does
// not keep its taps open past the agent's exit.
func TestTerminalLeftoverHolder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	term := f.spawnShell(t, "leaver", `trap "" HUP; read x; sleep 60 & echo bye`)
	st, _ := f.sup.Lookup("leaver")
	t.Cleanup(func() { _ = syscall.Kill(-st.PID, syscall.SIGKILL) }) // the sleep left behind in its group
	tap := term.Attach(64)
	defer tap.Close()
	write(t, term, "\n")
	readUntil(t, tap, "bye\r\n")
	awaitDone(t, tap)
	if st := f.wait(t, "leaver"); st.State != manager.StateExited {
		t.Errorf("the agent ended %+v, want exited", st)
	}
}

// TestHeadlessRuntime: a headless agent has no terminal and stops as before; an unknown agent
// has none either.
func TestHeadlessRuntime(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	st, err := f.sup.Spawn(t.Context(), manager.Spec{Name: "quiet", Command: []string{os.Args[0], "-test.run=^$"}, Env: []string{harnessEnv + "=sleep"},
		Runtime: manager.RuntimeHeadless})
	if err != nil {
		t.Fatal(err)
	}
	if st.Runtime != manager.RuntimeHeadless {
		t.Errorf("the agent runs %q, want headless", st.Runtime)
	}
	if _, err := f.sup.Terminal("quiet"); !errors.Is(err, manager.ErrNoTerminal) {
		t.Errorf("Terminal of a headless agent = %v, want ErrNoTerminal", err)
	}
	if _, err := f.sup.Terminal("nobody"); !errors.Is(err, manager.ErrNotFound) {
		t.Errorf("Terminal of an unknown agent = %v, want ErrNotFound", err)
	}
	if err := f.sup.Stop(t.Context(), "quiet"); err != nil {
		t.Fatal(err)
	}
	if st := f.wait(t, "quiet"); st.State != manager.StateStopped {
		t.Errorf("the agent ended %+v, want stopped", st)
	}
	f.retired(t, "quiet")
}

// TestSpawnRefusesUnknownRuntime: a runtime other than pty or headless is refused by name.
func TestSpawnRefusesUnknownRuntime(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, err := f.sup.Spawn(t.Context(), manager.Spec{Name: "odd", Command: []string{"true"}, Runtime: "tmux"})
	if v, ok := errors.AsType[*wire.ValidationError](err); !ok || v.Field != "runtime" {
		t.Fatalf("Spawn with runtime tmux = %v, want a validation error of runtime", err)
	}
	if _, ok := f.sup.Lookup("odd"); ok {
		t.Error("a refused spawn ran")
	}
}

// TestServiceRuntime: spawn's launchOptions.runtime picks the runtime and needs no host launch
// authority; an unknown one is a bad request.
func TestServiceRuntime(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.serve(t, "cotal_manager", 0)
	ctx := t.Context()
	mc, _, _ := operator(t, f.m)
	args := harnessArgs("plain", "present")
	args.LaunchOptions.Runtime = string(manager.RuntimeHeadless)
	if got, err := mc.Spawn(ctx, args); err != nil || got.State != manager.GoalSucceeded {
		t.Fatalf("spawn headless: %+v, %v", got, err)
	}
	if st, _ := f.sup.Lookup("plain"); st.Runtime != manager.RuntimeHeadless {
		t.Errorf("the agent runs %q, want headless", st.Runtime)
	}

	cred, c := f.m.Agent(t, ledger.Request{Name: "spawner", Capabilities: []string{authority.CapabilitySpawn}})
	spawner := manager.NewClient(c.Conn, f.m.Space, wire.Lifecycle{Principal: cred.Principal, UID: cred.LifecycleUID}, "spawner")
	odd := manager.SpawnArgs{Name: "odd", Agent: string(manager.HarnessClaude), LaunchOptions: &manager.LaunchOptions{Runtime: "tmux"}}
	if _, err := spawner.Spawn(ctx, odd); codeOf(err) != wire.CodeBadRequest {
		t.Errorf("an unknown runtime from an agent without launch authority: %v, want %s", err, wire.CodeBadRequest)
	}
}

// TestTerminalAnswersQueries: a process that asks its terminal for its background colour, as
// termenv does at start, gets an answer from the supervisor's pty while nobody is attached,
// rather than waiting out its timeout.
func TestTerminalAnswersQueries(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	out := filepath.Join(t.TempDir(), "answer")
	f.spawnShell(t, "asker", `stty raw -echo
printf '\033]11;?\033\\'
ans=$(timeout --foreground 5 dd bs=1 count=25 2>/dev/null)
stty sane
case "$ans" in *rgb:0000/0000/0000*) echo answered > "$OUT";; *) echo "unanswered: $ans" > "$OUT";; esac
sleep 30`, "OUT="+out)
	deadline := time.Now().Add(outputTimeout)
	for {
		raw, err := os.ReadFile(out)
		if err == nil && len(raw) > 0 {
			if got := strings.TrimSpace(string(raw)); got != "answered" {
				t.Fatalf("the process's query: %q", got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the process wrote no verdict within %v", outputTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
