package dial

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/authority"
)

// Renewing is a connection whose credential is renewed in place: the same user key with a fresh
// JWT (ledger.Ledger.Renew). Its inbox prefix, its subscriptions and its consumers stay as they
// are; the connection reconnects once to present the new JWT.
type Renewing struct {
	*nats.Conn
	key string
	jwt atomic.Pointer[string]
}

// AsRenewing connects to url with cred as As does, reading the JWT it presents from the latest
// renewal at every connect.
func AsRenewing(ctx context.Context, url string, cred *authority.Credential, opts ...nats.Option) (*Renewing, error) {
	r := &Renewing{key: cred.PublicKey}
	r.jwt.Store(&cred.JWT)
	base, err := credOptions(cred, func() (string, error) { return *r.jwt.Load(), nil })
	if err != nil {
		return nil, err
	}
	if r.Conn, err = Anonymous(ctx, url, append(base, opts...)...); err != nil {
		return nil, err
	}
	return r, nil
}

// renewPoll is how often Renew looks whether the reconnect is done.
const renewPoll = 10 * time.Millisecond

// Renew presents next, a renewal of the connection's credential, from the next connect on, and
// reconnects now so the broker holds the new expiry; it returns once the connection is back, or
// ctx ends. Requests in flight during the reconnect fail and are the caller's to retry.
func (r *Renewing) Renew(ctx context.Context, next *authority.Credential) error {
	if next.PublicKey != r.key {
		return fmt.Errorf("renew the connection of %s: the credential is for another key", next.Principal)
	}
	r.jwt.Store(&next.JWT)
	if err := r.ForceReconnect(); err != nil {
		return fmt.Errorf("renew the connection of %s: %w", next.Principal, err)
	}
	t := time.NewTicker(renewPoll)
	defer t.Stop()
	for {
		switch r.Status() {
		case nats.CONNECTED:
			return nil
		case nats.CLOSED:
			return fmt.Errorf("renew the connection of %s: %w", next.Principal, nats.ErrConnectionClosed)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("renew the connection of %s: %w", next.Principal, ctx.Err())
		case <-t.C:
		}
	}
}
