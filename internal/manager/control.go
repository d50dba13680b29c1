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
	Error string `json:"error,omitempty"`
	// Code, beside Error, names an error a caller branches on; empty for other errors.
	Code   string   `json:"code,omitempty"`
	Status *Status  `json:"status,omitempty"`
	Agents []Status `json:"agents,omitempty"`
}

// The error codes of Response.Code. Requesters of older builds read only Error, so a code is
// always added beside its text. Codes cross the socket: add to the list, never rename.
const (
	// CodeAlreadyExists answers a spawn of a name being spawned or still running.
	CodeAlreadyExists = "already-exists"
)

// codes maps each code to the sentinel its errors wrap.
var codes = map[string]error{CodeAlreadyExists: ErrAlreadyExists}

// codeOf returns the code of err, or "".
func codeOf(err error) string {
	for code, sentinel := range codes {
		if errors.Is(err, sentinel) {
			return code
		}
	}
	return ""
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

// Serve answers control requests on ln until ctx ends, ln fails or Close is called, then closes
// ln. It answers each connection on a goroutine of its own, which Close waits for.
func (s *Supervisor) Serve(ctx context.Context, ln net.Listener) {
	defer ln.Close()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.listeners = append(s.listeners, ln)
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() }) // ends Accept
	defer stop()
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			conn.Close()
			return
		}
		s.requests.Add(1)
		s.conns[conn] = true
		s.mu.Unlock()
		go func() { // owned: Close waits for requests
			defer s.requests.Done()
			s.answer(ctx, conn)
			s.mu.Lock()
			delete(s.conns, conn)
			s.mu.Unlock()
		}()
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
		return Response{Error: err.Error(), Code: codeOf(err)}
	}
	return Response{Status: &st}
}

// Call sends one request to the supervisor listening at path and returns its response; a
// response carrying an error is returned with it as a *ResponseError.
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
		return &resp, &ResponseError{Code: resp.Code, Msg: resp.Error}
	}
	return &resp, nil
}
