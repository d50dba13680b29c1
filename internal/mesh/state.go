package mesh

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/wire"
)

// State records a running mesh in its directory, so that other commands find and stop it. The
// field names are a stable interface (`cotal status --json` prints them).
type State struct {
	PID       int          `json:"pid"`
	URL       string       `json:"url"`
	Spaces    []wire.Space `json:"spaces"`
	Open      bool         `json:"open"`
	StartedAt time.Time    `json:"startedAt"`
}

// ErrNotRunning is returned by ReadState when no mesh is recorded as running.
var ErrNotRunning = errors.New("no mesh is running")

// ReadState returns the recorded state of the mesh in d. It returns ErrNotRunning when none is
// recorded or the recorded process is gone (a stale record, which it removes).
func (d Dir) ReadState() (*State, error) {
	raw, err := os.ReadFile(d.StatePath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotRunning
	}
	if err != nil {
		return nil, fmt.Errorf("read mesh state: %w", err)
	}
	var st State
	if err := json.Unmarshal(raw, &st); err != nil || st.PID <= 0 || st.URL == "" {
		return nil, fmt.Errorf("mesh state %s is not valid (remove it if no mesh is running): %v", d.StatePath(), err)
	}
	if !processAlive(st.PID) {
		_ = os.Remove(d.StatePath()) // stale: its process is gone; a failed remove is retried next time
		return nil, ErrNotRunning
	}
	return &st, nil
}

func (d Dir) writeState(st *State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode mesh state: %w", err)
	}
	return atomicfile.Write(d.StatePath(), append(b, '\n'), 0o600)
}

// clearState removes the state file if it still names pid.
func (d Dir) clearState(pid int) {
	raw, err := os.ReadFile(d.StatePath())
	if err != nil {
		return
	}
	var st State
	if json.Unmarshal(raw, &st) == nil && st.PID == pid {
		_ = os.Remove(d.StatePath()) // best effort on shutdown; ReadState treats a dead pid as stale
	}
}

// processAlive reports whether a process with pid exists.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
