// Package hooksock is the harness hook protocol: a harness calls `cotal hook` at its turn
// boundaries, and the command asks the agent's `cotal mcp` over a unix socket of the user's own,
// so the agent's status follows what the harness does and the messages that arrived between
// turns are handed in at the next one. The agent's side serves it (mcptools); the hook command
// and the supervisor ask it.
package hooksock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gocotal/cotal/wire"
)

// Request is one hook call: the event and what the harness said of it (its hook input).
type Request struct {
	Event   string          `json:"event"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Reply is the agent's answer: context to hand the model at this boundary, if any.
type Reply struct {
	Context string `json:"context,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Window bounds the context one hook hands in; the rest waits for cotal_inbox or the next turn.
// It stays under the 10,000 characters of a hook's additionalContext that Codex hands the model
// whole: a longer one it cuts to its head and tail, and the messages in between would be lost.
const Window = 9000

// Limits of the socket. A reply carries at most Window bytes of context, which JSON may grow
// sixfold (a control character becomes \u00XX).
const (
	MaxRequest = 256 << 10
	MaxReply   = 6*Window + 4096
	// Deadline bounds one exchange on the agent's side.
	Deadline = 10 * time.Second
)

// Socket returns the socket path of the hooks of principal p of space sp, in PrivateDir:
// TMPDIR/cotal-<uid>/hook-<space>.<principal>.sock.
func Socket(sp wire.Space, p wire.Principal) (string, error) {
	dir, err := PrivateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "hook-"+string(sp)+"."+p.String()+".sock"), nil
}

// PrivateDir returns the directory of this user's alone (created 0700, and checked to be a
// directory this user owns that nobody else may enter) where Cotal's sockets live:
// TMPDIR/cotal-<uid>, a short path, as a socket's must be.
func PrivateDir() (string, error) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("cotal-%d", os.Getuid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 || !ok || int(st.Uid) != os.Getuid() {
		return "", fmt.Errorf("%s is not a private directory of this user's: no socket is served there", dir)
	}
	return dir, nil
}

// Ask sends one hook request to the socket at path and returns the agent's reply.
func Ask(ctx context.Context, path string, req Request) (*Reply, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(Deadline + time.Second))
	raw, _ := json.Marshal(req) // a raw payload was read as JSON by the caller
	if _, err := conn.Write(append(raw, '\n')); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(io.LimitReader(conn, MaxReply)).ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	var reply Reply
	if err := json.Unmarshal(line, &reply); err != nil {
		return nil, fmt.Errorf("the agent's hook answer: %w", err)
	}
	if reply.Error != "" {
		return &reply, errors.New(reply.Error)
	}
	return &reply, nil
}
