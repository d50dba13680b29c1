// Package detach starts a cotal command again in the background, as `cotal up --detach` and
// `cotal web --detach` do: the same binary, its own session (a closed terminal does not stop
// it), its output appended to a log.
package detach

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/spf13/pflag"
)

// Given returns the flags given on the command line, each as --name=value (a list flag once per
// item), leaving out --detach and --dir: the detached command takes the directory found here.
func Given(fs *pflag.FlagSet) []string {
	var out []string
	fs.Visit(func(f *pflag.Flag) {
		if f.Name == "detach" || f.Name == "dir" {
			return
		}
		if list, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range list.GetSlice() {
				out = append(out, "--"+f.Name+"="+v)
			}
			return
		}
		out = append(out, "--"+f.Name+"="+f.Value.String())
	})
	return out
}

// Start runs this binary with args in the background, in this directory, as its own session,
// with its output appended to the 0600 file logPath and env added to this process's
// environment. It returns the child's pid and a channel that gets its exit (the child is reaped
// if it fails early; it otherwise outlives this process).
func Start(args []string, logPath string, env ...string) (int, <-chan error, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, nil, fmt.Errorf("find the cotal binary to detach: %w", err)
	}
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, nil, fmt.Errorf("open the log: %w", err)
	}
	defer log.Close()
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, nil, fmt.Errorf("start %s in the background: %w", args[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return cmd.Process.Pid, exited, nil
}
