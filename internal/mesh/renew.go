package mesh

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/ledger"
)

// daemonConn is one daemon's connection on its own credential, renewed in place through the
// ledger before two thirds of its lifetime, and revoked when the daemon lets it go.
type daemonConn struct {
	*dial.Renewing
	l    *ledger.Ledger
	life time.Duration
	stop context.CancelFunc
	log  *slog.Logger
	mu   sync.Mutex
	cred *authority.Credential // guarded by mu: the last renewal
}

// MinDaemonLifetime is the shortest daemon credential lifetime a mesh accepts: each is renewed
// at two thirds of it, and a renewal takes a reconnect.
const MinDaemonLifetime = 10 * time.Second

// renewRetry bounds the wait before a failed renewal is tried again.
const renewRetry = 10 * time.Second

// renewAt returns when a credential of lifetime life that expires at exp is renewed: once two
// thirds of its lifetime have passed.
func renewAt(exp time.Time, life time.Duration) time.Time { return exp.Add(-life / 3) }

// keepRenewed renews the connection's credential until ctx ends. A renewal that fails is tried
// again every renewRetry (or sooner for a short lifetime) until the credential expires; the
// broker then closes the connection, and the daemon on it stops as it would on any lost
// connection.
func (dc *daemonConn) keepRenewed(ctx context.Context) {
	retry := min(renewRetry, dc.life/10)
	for {
		cred := dc.current()
		wait := time.Until(renewAt(cred.Expires, dc.life))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		for {
			next, err := dc.l.Renew(ctx, cred, dc.life)
			if err == nil {
				err = dc.Renew(ctx, next)
				dc.set(next) // the row holds the new JWT whether or not the reconnect finished
			}
			if err == nil || ctx.Err() != nil {
				break
			}
			if dc.log != nil {
				dc.log.Warn("renew a daemon credential", "principal", cred.Principal, "profile", cred.Profile, "expires", cred.Expires, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(retry):
			}
		}
	}
}

func (dc *daemonConn) current() *authority.Credential {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	return dc.cred
}

func (dc *daemonConn) set(c *authority.Credential) {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	dc.cred = c
}

// revokeWait bounds how long letting a daemon's credential go may take.
const revokeWait = 15 * time.Second

// release closes the connection and revokes its credential, which no process holds any more.
func (dc *daemonConn) release() {
	dc.stop()
	dc.Close()
	cred := dc.current()
	ctx, cancel := context.WithTimeout(context.Background(), revokeWait)
	defer cancel()
	if _, err := dc.l.Revoke(ctx, cred.LifecycleUID, cred.CredentialID, "the daemon stopped"); err != nil && dc.log != nil {
		dc.log.Warn("revoke a stopped daemon's credential", "principal", cred.Principal, "profile", cred.Profile, "err", err)
	}
}
