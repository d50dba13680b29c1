package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// The control socket: how `cotal spawn`, `stop` and `ps` reach the supervisor of a running mesh.
// It is a Unix socket in the mesh directory (private to its owner, like the keys beside it)
// carrying one JSON request and one JSON response per connection. It is local plumbing, not a
// Cotal wire surface.

// maxRequest bounds a control request.
const maxRequest = 1 << 20

// Request is one control request.
type Request struct {
	// Op is spawn, stop, list or wait.
	Op   string `json:"op"`
	Spec *Spec  `json:"spec,omitempty"`
	Name string `json:"name,omitempty"`
}

// Response answers a Request.
type Response struct {
	Error  string   `json:"error,omitempty"`
	Status *Status  `json:"status,omitempty"`
	Agents []Status `json:"agents,omitempty"`
}

// Listen opens the control socket at path, replacing a stale one, readable by its owner only.
// A socket another supervisor still answers on is an error, never replaced.
func Listen(path string) (net.Listener, error) {
	if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
		conn.Close()
		return nil, fmt.Errorf("a supervisor already listens on %s", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// Serve answers control requests on ln until ctx ends or ln is closed.
func (s *Supervisor) Serve(ctx context.Context, ln net.Listener) {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go s.answer(ctx, conn)
	}
}

func (s *Supervisor) answer(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	var req Request
	var resp Response
	if err := json.NewDecoder(io.LimitReader(conn, maxRequest)).Decode(&req); err != nil {
		resp.Error = fmt.Sprintf("bad control request: %v", err)
	} else {
		resp = s.do(ctx, req)
	}
	_ = json.NewEncoder(conn).Encode(resp) // the requester may have gone
}

func (s *Supervisor) do(ctx context.Context, req Request) Response {
	var st Status
	var err error
	switch req.Op {
	case "spawn":
		if req.Spec == nil {
			return Response{Error: "spawn needs a spec"}
		}
		st, err = s.Spawn(ctx, *req.Spec)
	case "stop":
		err = s.Stop(ctx, req.Name)
		if err == nil {
			st, err = s.Wait(ctx, req.Name)
		}
	case "wait":
		st, err = s.Wait(ctx, req.Name)
	case "list":
		return Response{Agents: s.List()}
	default:
		return Response{Error: fmt.Sprintf("unknown control op %q", req.Op)}
	}
	if err != nil {
		return Response{Error: err.Error()}
	}
	return Response{Status: &st}
}

// Call sends one request to the supervisor listening at path and returns its response; a
// response carrying an error is returned as one.
func Call(ctx context.Context, path string, req Request) (*Response, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("no supervisor is listening (is the mesh up?): %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return nil, err
	}
	var resp Response
	if err := json.NewDecoder(conn).Decode(&resp); err != nil {
		return nil, fmt.Errorf("control response: %w", err)
	}
	if resp.Error != "" {
		return &resp, errors.New(resp.Error)
	}
	return &resp, nil
}
