package mesh

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// A pid is reused once its process is gone, so a state file left by a mesh that crashed can name
// an unrelated live process. A mesh proves a recorded pid is its own by the process's start time,
// which the kernel fixes at fork and no later process with the same pid shares.

// procRoot is where the kernel shows its processes; a system without it (not Linux) proves a pid
// by its being alive alone.
const procRoot = "/proc"

// processStart returns the start time of process pid as the kernel records it (the 22nd field of
// /proc/<pid>/stat, clock ticks since boot), or "" where that cannot be read.
func processStart(pid int) string {
	raw, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return ""
	}
	// The second field is the command name in parentheses and may itself hold spaces and ')': the
	// fields after it start past the last ')'.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return ""
	}
	fields := bytes.Fields(raw[i+1:])
	const startField = 22 - 3 // the fields after the name start at the 3rd
	if len(fields) <= startField {
		return ""
	}
	return string(fields[startField])
}

// ownsProcess reports whether st's pid is the process that wrote st (ownedBy).
func (st State) ownsProcess() bool { return ownedBy(st.PID, st.ProcessStart) }

// ownedBy reports whether pid is the process a record names by its pid and start time: alive,
// and, where the kernel shows start times, started at start. A record from before start times
// were kept is owned only by a process running this same executable.
func ownedBy(pid int, start string) bool {
	if !processAlive(pid) {
		return false
	}
	if _, err := os.Stat(procRoot + "/self/stat"); err != nil {
		return true // no /proc: aliveness is all there is to go on
	}
	if start != "" {
		return processStart(pid) == start
	}
	theirs, err1 := os.Readlink(filepath.Join(procRoot, strconv.Itoa(pid), "exe"))
	ours, err2 := os.Executable()
	return err1 == nil && err2 == nil && theirs == ours
}

// processAlive reports whether a process with pid exists.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
