package ledger

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
)

// renewBefore is how long before its credential expires a held connection is replaced: the
// credential is one-shot (authority.OneShotLifetime), the handle lives as long as its holder.
const renewBefore = 2 * time.Minute

// held is one connection a Ledger keeps on a short-lived credential of its own, with what was
// opened on it. It is dialled on first use and dialled again on a fresh credential once the
// current one nears its expiry or the connection closed; the connection it replaces stays open
// for operations still running on it until the next renewal, which comes after that one's
// credential has expired.
type held[T any] struct {
	url  string
	mint func() (*authority.Credential, error)
	open func(context.Context, *nats.Conn) (T, error)

	mu      sync.Mutex
	nc      *nats.Conn // guarded by mu
	old     *nats.Conn // guarded by mu
	v       T          // guarded by mu
	expires time.Time  // guarded by mu
	closed  bool       // guarded by mu
}

// get returns what is open on the held connection, renewing it first when it must.
func (h *held[T]) get(ctx context.Context) (T, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var zero T
	if h.closed {
		return zero, ErrClosed
	}
	if h.nc != nil && !h.nc.IsClosed() && (h.expires.IsZero() || time.Until(h.expires) > renewBefore) {
		return h.v, nil
	}
	cred, err := h.mint()
	if err != nil {
		return zero, err
	}
	nc, err := dial.As(ctx, h.url, cred)
	if err != nil {
		return zero, err
	}
	v, err := h.open(ctx, nc)
	if err != nil {
		nc.Close()
		return zero, err
	}
	if h.old != nil {
		h.old.Close()
	}
	h.old, h.nc, h.v, h.expires = h.nc, nc, v, cred.Expires
	return v, nil
}

// close closes the held connections; get fails with ErrClosed from then on.
func (h *held[T]) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, nc := range []*nats.Conn{h.nc, h.old} {
		if nc != nil {
			nc.Close()
		}
	}
}
