package mesh

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/gocotal/cotal/internal/hooksock"
)

// The mesh process answers control requests from this machine on a unix socket of its user's
// alone: which parts of its daemons run (`cotal status --components`), stopping one of them
// (`cotal down delivery|manager`) and starting a stopped one again (`cotal up` on a running
// mesh). One JSON request line, one JSON reply line.

// controlRequest is one request on the control socket.
type controlRequest struct {
	// Op is "parts" (report what runs), "stop" (stop Part) or "start" (start Part again).
	Op   string `json:"op"`
	Part Part   `json:"part,omitempty"`
}

// controlReply answers a control request.
type controlReply struct {
	Error string      `json:"error,omitempty"`
	Parts []PartState `json:"parts,omitempty"`
}

// The control operations.
const (
	opParts = "parts"
	opStop  = "stop"
	opStart = "start"
)

// Limits of a control exchange.
const (
	maxControlRequest = 4 << 10
	maxControlReply   = 1 << 20
	// controlDeadline bounds one exchange: a stop waits for the managers' agents to stop, a
	// start for the managers to serve.
	controlDeadline = 2 * time.Minute
)

// ControlSocket returns the path of the socket the mesh process of d answers control requests
// on: in this user's private temporary directory, named by a digest of d's path (a socket path
// is short; a project's path need not be).
func (d Dir) ControlSocket() (string, error) {
	dir, err := hooksock.PrivateDir()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(d.Path))
	return filepath.Join(dir, "mesh-"+hex.EncodeToString(sum[:8])+".sock"), nil
}

// serveControl answers control requests on d's control socket until the listener is closed
// (Shutdown). A socket a live mesh process answers on is left to it; a stale one is replaced.
func (m *Mesh) serveControl(d Dir, log *slog.Logger) error {
	path, err := d.ControlSocket()
	if err != nil {
		return err
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("another mesh process answers control requests for %s at %s", d.Path, path)
	}
	_ = os.Remove(path) // a stale socket of an earlier run
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("serve control requests: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return err
	}
	m.control = ln
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go m.answerControl(conn, log)
		}
	}()
	return nil
}

// stopControl closes the control socket, if any.
func (m *Mesh) stopControl() {
	if m.control != nil {
		_ = m.control.Close() // removes the socket file
	}
}

// answerControl answers one request on conn.
func (m *Mesh) answerControl(conn net.Conn, log *slog.Logger) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(controlDeadline))
	line, err := bufio.NewReader(io.LimitReader(conn, maxControlRequest)).ReadBytes('\n')
	var req controlRequest
	var reply controlReply
	switch {
	case err != nil && !errors.Is(err, io.EOF):
		reply.Error = "read: " + err.Error()
	case json.Unmarshal(line, &req) != nil:
		reply.Error = "the request is not JSON"
	case req.Op == opParts:
		reply.Parts = m.daemons.Parts()
	case req.Op == opStop:
		if log != nil {
			log.Warn("stopping a part of the daemons on request", "part", req.Part)
		}
		if err := m.daemons.StopPart(req.Part); err != nil {
			reply.Error = err.Error()
		}
		reply.Parts = m.daemons.Parts()
	case req.Op == opStart:
		if log != nil {
			log.Info("starting a part of the daemons again on request", "part", req.Part)
		}
		if err := m.daemons.StartPart(req.Part); err != nil {
			reply.Error = err.Error()
		}
		reply.Parts = m.daemons.Parts()
	default:
		reply.Error = fmt.Sprintf("unknown operation %q", req.Op)
	}
	raw, _ := json.Marshal(reply) // strings and slices of them always encode
	_, _ = conn.Write(append(raw, '\n'))
}

// ErrNoControl is returned when no mesh process answers control requests for a directory: none
// runs there, or it runs no daemons (an open mesh, a node without keys).
var ErrNoControl = errors.New("no mesh process answers control requests here")

// askControl sends req to the mesh process of d and returns its reply.
func askControl(ctx context.Context, d Dir, req controlRequest) (*controlReply, error) {
	path, err := d.ControlSocket()
	if err != nil {
		return nil, err
	}
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNoControl, err)
	}
	defer conn.Close()
	deadline := time.Now().Add(controlDeadline)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)
	raw, _ := json.Marshal(req) // strings always encode
	if _, err := conn.Write(append(raw, '\n')); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(io.LimitReader(conn, maxControlReply)).ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	var reply controlReply
	if err := json.Unmarshal(line, &reply); err != nil {
		return nil, fmt.Errorf("the mesh process's control answer: %w", err)
	}
	if reply.Error != "" {
		return &reply, errors.New(reply.Error)
	}
	return &reply, nil
}

// RunningParts asks the mesh process of d what runs of its daemons.
func RunningParts(ctx context.Context, d Dir) ([]PartState, error) {
	return askParts(ctx, d, controlRequest{Op: opParts})
}

// StopPart asks the mesh process of d to stop one part of its daemons, and returns what runs
// then.
func StopPart(ctx context.Context, d Dir, p Part) ([]PartState, error) {
	return askParts(ctx, d, controlRequest{Op: opStop, Part: p})
}

// StartPart asks the mesh process of d to start a stopped part of its daemons again, and returns
// what runs then.
func StartPart(ctx context.Context, d Dir, p Part) ([]PartState, error) {
	return askParts(ctx, d, controlRequest{Op: opStart, Part: p})
}

// askParts sends req and returns the parts its reply reports.
func askParts(ctx context.Context, d Dir, req controlRequest) ([]PartState, error) {
	reply, err := askControl(ctx, d, req)
	if err != nil {
		return nil, err
	}
	return reply.Parts, nil
}
