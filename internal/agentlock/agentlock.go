// Package agentlock keeps one process per agent identity on a mesh's machine. A process that runs
// an agent by name (cotal mcp, cotal agent) holds a lock file for the identity for its whole life,
// and the file names the holder, so a second process for the same name is refused with who holds
// it, or, when asked to, takes the identity over: it leaves a takeover notice beside the lock,
// which the holder watches for, lets go of the identity and says who took it.
//
// The lock is an flock on <dir>/<space>.<name>.lock, so a holder that dies lets go with it.
package agentlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nuid"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/wire"
)

// Holder names the process that runs an agent identity.
type Holder struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Since   time.Time `json:"since"`
	Command string    `json:"command"`
	// Token tells holders apart where nothing else does (two in one process, within a second).
	Token string `json:"token"`
}

// String reads "pid 4242 on build-3 since 10:02:03 (cotal mcp)".
func (h Holder) String() string {
	return fmt.Sprintf("pid %d on %s since %s (%s)", h.PID, h.Host, h.Since.Local().Format(time.TimeOnly), h.Command)
}

// HeldError is Acquire's refusal of an identity another process runs.
type HeldError struct {
	Principal wire.Principal
	Holder    Holder
}

// Error implements error.
func (e *HeldError) Error() string {
	return fmt.Sprintf("%s is already run by %s: stop it, or start this one with --takeover", e.Principal, e.Holder)
}

// TakeoverWait bounds how long a takeover waits for the holder to let go.
const TakeoverWait = 15 * time.Second

// watchEvery is how often a holder looks for a takeover notice.
const watchEvery = 200 * time.Millisecond

// Lock is an identity this process holds.
type Lock struct {
	base   string
	me     Holder
	unlock func()

	mu       sync.Mutex
	released bool
	stop     chan struct{}
	done     chan struct{}
}

// Acquire takes the identity p in space sp for this process, as command ("cotal mcp"), with its
// lock files in dir. Another live holder is a *HeldError, unless takeover: then Acquire leaves a
// takeover notice and waits (up to TakeoverWait, or until ctx ends) for the holder to let go.
func Acquire(ctx context.Context, dir string, sp wire.Space, p wire.Principal, command string, takeover bool) (*Lock, error) {
	if err := atomicfile.MkdirPrivate(dir); err != nil {
		return nil, err
	}
	host, _ := os.Hostname() // an unknown host name leaves it empty
	l := &Lock{
		base: filepath.Join(dir, string(sp)+"."+p.String()),
		me:   Holder{PID: os.Getpid(), Host: host, Since: time.Now().UTC().Truncate(time.Second), Command: command, Token: nuid.Next()},
	}
	unlock, err := try(ctx, l.base+".lock", 0)
	if err != nil && !takeover {
		if h, rerr := readHolder(l.base + ".lock"); rerr == nil {
			return nil, &HeldError{Principal: p, Holder: h}
		}
		return nil, fmt.Errorf("%s is already run by another process: stop it, or start this one with --takeover", p)
	}
	if err != nil {
		raw, _ := json.Marshal(l.me) // always encodes
		if err := atomicfile.Write(l.base+".takeover", raw, 0o600); err != nil {
			return nil, err
		}
		if unlock, err = try(ctx, l.base+".lock", TakeoverWait); err != nil {
			_ = os.Remove(l.base + ".takeover") // nobody took the identity; the notice is void
			h, _ := readHolder(l.base + ".lock")
			return nil, fmt.Errorf("take %s over from %s: it did not let go within %s", p, h, TakeoverWait)
		}
	}
	l.unlock = unlock
	// The notice, ours or a stale one, has done its work once the lock is ours.
	if err := os.Remove(l.base + ".takeover"); err != nil && !errors.Is(err, os.ErrNotExist) {
		l.unlock()
		return nil, err
	}
	raw, _ := json.Marshal(l.me) // always encodes
	if err := os.WriteFile(l.base+".lock", raw, 0o600); err != nil {
		l.unlock()
		return nil, err
	}
	return l, nil
}

// try takes the flock on path, waiting up to wait for another holder.
func try(ctx context.Context, path string, wait time.Duration) (func(), error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return atomicfile.Lock(ctx, path)
}

// readHolder reads the holder a lock file names.
func readHolder(path string) (Holder, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Holder{}, err
	}
	var h Holder
	if err := json.Unmarshal(raw, &h); err != nil || h.PID == 0 {
		return Holder{}, fmt.Errorf("%s names no holder", path)
	}
	return h, nil
}

// Watch calls takenOver, once, when another process leaves a takeover notice for the identity,
// after letting the identity go, so the taker can have it. It watches until Release.
func (l *Lock) Watch(takenOver func(by Holder)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stop != nil || l.released {
		return
	}
	stop, done := make(chan struct{}), make(chan struct{})
	l.stop, l.done = stop, done
	go func() {
		defer close(done)
		t := time.NewTicker(watchEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			if by, err := readHolder(l.base + ".takeover"); err == nil && by.Token != l.me.Token {
				l.let()
				takenOver(by)
				return
			}
		}
	}()
}

// Release lets the identity go and stops watching. It is safe to call more than once.
func (l *Lock) Release() {
	l.mu.Lock()
	stop, done := l.stop, l.done
	l.stop = nil
	l.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	l.let()
}

// let unlocks the identity once.
func (l *Lock) let() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.released {
		l.released = true
		l.unlock()
	}
}
