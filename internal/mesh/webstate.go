package mesh

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/wire"
)

// WebState records the `cotal web` serving a mesh directory's dashboard, so that `cotal status
// --components` finds it and `cotal down web` stops it.
type WebState struct {
	PID          int    `json:"pid"`
	ProcessStart string `json:"processStart,omitempty"`
	// URL is the dashboard's address, without a token.
	URL   string     `json:"url"`
	Space wire.Space `json:"space"`
	// Open is the first URL to open, with its single-use token: kept only until `cotal web
	// --detach` has printed it.
	Open string `json:"open,omitempty"`
}

// WebStatePath records the running dashboard.
func (d Dir) WebStatePath() string { return filepath.Join(d.Path, "web.json") }

// WebLogPath is where a detached dashboard logs.
func (d Dir) WebLogPath() string { return filepath.Join(d.Path, "web.log") }

// WriteWebState records ws as this process's dashboard (0600, atomically).
func (d Dir) WriteWebState(ws WebState) error {
	ws.PID, ws.ProcessStart = os.Getpid(), processStart(os.Getpid())
	raw, err := json.MarshalIndent(ws, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the dashboard's state: %w", err)
	}
	return atomicfile.Write(d.WebStatePath(), append(raw, '\n'), 0o600)
}

// ReadWebState returns the running dashboard of d, or ErrNotRunning when none runs (a record
// whose process is gone is removed).
func (d Dir) ReadWebState() (*WebState, error) {
	raw, err := os.ReadFile(d.WebStatePath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotRunning
	}
	if err != nil {
		return nil, fmt.Errorf("read the dashboard's state: %w", err)
	}
	var ws WebState
	if err := json.Unmarshal(raw, &ws); err != nil || ws.PID <= 0 || ws.URL == "" {
		return nil, fmt.Errorf("the dashboard's state %s is not valid (remove it if no dashboard runs): %v", d.WebStatePath(), err)
	}
	if !ownedBy(ws.PID, ws.ProcessStart) {
		_ = os.Remove(d.WebStatePath()) // stale; a failed remove is retried next time
		return nil, ErrNotRunning
	}
	return &ws, nil
}

// ForgetWebOpen rewrites the dashboard's state without its token URL, once it was handed over.
func (d Dir) ForgetWebOpen(ws *WebState) error {
	ws.Open = ""
	raw, err := json.MarshalIndent(ws, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(d.WebStatePath(), append(raw, '\n'), 0o600)
}

// ClearWebState removes the dashboard's state if it still names pid.
func (d Dir) ClearWebState(pid int) { removeIfPID(d.WebStatePath(), pid) }
