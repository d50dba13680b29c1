package manager

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Runtime is how the supervisor runs an agent's process.
type Runtime string

// The runtimes. The zero value of Spec.Runtime means RuntimePTY.
const (
	// RuntimePTY runs the process on a pseudo-terminal that a person can attach to: see Terminal.
	RuntimePTY Runtime = "pty"
	// RuntimeHeadless runs the process with no terminal, its standard streams on /dev/null.
	RuntimeHeadless Runtime = "headless"
)

// orDefault returns r, or RuntimePTY for the zero value.
func (r Runtime) orDefault() Runtime {
	return cmp.Or(r, RuntimePTY)
}

// The size a pty starts at until a Resize records another.
const (
	defaultCols = 120
	defaultRows = 40
)

// startOnPTY starts cmd on a new pty of the size given and returns the pty's master. The process
// runs in a session of its own with the pty as its controlling terminal: as a session leader it
// also leads a process group of its own pid, the group Stop signals.
func startOnPTY(cmd *exec.Cmd, cols, rows uint16) (*os.File, error) {
	master, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open a pty: %w", err)
	}
	defer tty.Close() // the process has its own copy once started
	if master, err = pollable(master); err != nil {
		return nil, err
	}
	if err := setSize(master, cols, rows); err != nil {
		_ = master.Close() // unused
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	// Setctty makes the child's fd 0, the tty, its controlling terminal. Setpgid cannot go with
	// Setsid: a session leader may not change its group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		_ = master.Close() // unused
		return nil, err
	}
	return master, nil
}

// pollable returns f's descriptor as a new File in the runtime's poller and closes f. The pty
// package's ioctls go through File.Fd, which puts a descriptor in blocking mode for good, and a
// blocked Read on such a File is not interrupted by Close. In the poller it is, so a run's reader
// ends at the process's end even while a leftover process holds the terminal open.
func pollable(f *os.File) (*os.File, error) {
	defer f.Close() // the duplicate carries on
	sc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("duplicate the pty master: %w", err)
	}
	var fd int
	var dupErr error
	if err := sc.Control(func(raw uintptr) { fd, dupErr = unix.FcntlInt(raw, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, fmt.Errorf("duplicate the pty master: %w", err)
	}
	if dupErr != nil {
		return nil, fmt.Errorf("duplicate the pty master: %w", dupErr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd) // unused
		return nil, fmt.Errorf("make the pty master non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil // a non-blocking descriptor joins the poller
}

// setSize sets the window size of the pty whose master is f. It goes through SyscallConn rather
// than pty.Setsize, which would take f out of the poller (see pollable).
func setSize(f *os.File, cols, rows uint16) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("resize the pty: %w", err)
	}
	var ioErr error
	if err := sc.Control(func(fd uintptr) {
		ioErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows})
	}); err != nil {
		return fmt.Errorf("resize the pty: %w", err)
	}
	if ioErr != nil {
		return fmt.Errorf("resize the pty: %w", ioErr)
	}
	return nil
}
