package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/metrics"
)

// MinHeldLifetime is the shortest credential lifetime Hold accepts: the credential is renewed at
// two thirds of it, and a renewal takes a reconnect.
const MinHeldLifetime = 10 * time.Second

// renewRetry bounds the wait before a failed renewal is tried again.
const renewRetry = 10 * time.Second

// releaseWait bounds how long Release takes to revoke the credential.
const releaseWait = 15 * time.Second

// Held is a connection on a credential for a long-running holder (a daemon, the supervisor):
// the credential is renewed in place before two thirds of its lifetime, so the connection's
// subscriptions and consumers outlive any one JWT, and on Release it is let go (a ledger-issued
// one revoked).
type Held struct {
	*dial.Renewing
	life    time.Duration
	log     *slog.Logger
	renew   func(context.Context, *authority.Credential) (*authority.Credential, error)
	release func(context.Context, *authority.Credential) error
	stop    context.CancelFunc
	done    chan struct{}

	mu   sync.Mutex
	cred *authority.Credential // guarded by mu: the last renewal
}

// Hold issues a credential for req, whose Expires is its lifetime (at least MinHeldLifetime),
// connects it and keeps it renewed until Release. A renewal that fails is logged on log (which
// may be nil) and tried again until the credential expires; the broker then closes the
// connection, and its holder stops as it would on any lost connection. Renewals stop for good
// once the connection is closed or the credential is revoked or retired.
func (l *Ledger) Hold(ctx context.Context, req Request, log *slog.Logger) (*Held, error) {
	if req.Expires < MinHeldLifetime {
		return nil, fmt.Errorf("hold a %s credential for %s: its lifetime %s must be at least %s", req.Profile, req.Name, req.Expires, MinHeldLifetime)
	}
	cred, err := l.Issue(ctx, req)
	if err != nil {
		return nil, err
	}
	revoke := func(ctx context.Context, c *authority.Credential) error {
		_, err := l.Revoke(ctx, c.LifecycleUID, c.CredentialID, "its holder stopped")
		return err
	}
	h, err := hold(ctx, l.URL(), cred, req.Expires, log,
		func(ctx context.Context, c *authority.Credential) (*authority.Credential, error) {
			return l.Renew(ctx, c, req.Expires)
		},
		revoke)
	if err != nil {
		return nil, errors.Join(err, revoke(context.WithoutCancel(ctx), cred)) // nobody holds it
	}
	return h, nil
}

// HoldSystem mints a system-account user that may publish pubAllow and subscribe subAllow
// (beside its inbox), connects it to the ledger's broker and keeps it renewed for life (at least
// MinHeldLifetime) until Release, which only closes it: a system user has no ledger row, and
// expires on its own.
func (l *Ledger) HoldSystem(ctx context.Context, name string, pubAllow, subAllow []string, life time.Duration, log *slog.Logger) (*Held, error) {
	if life < MinHeldLifetime {
		return nil, fmt.Errorf("hold system user %s: its lifetime %s must be at least %s", name, life, MinHeldLifetime)
	}
	cred, err := l.kr.MintSystemUser(name, pubAllow, subAllow, life)
	if err != nil {
		return nil, err
	}
	return hold(ctx, l.url, cred, life, log,
		func(_ context.Context, c *authority.Credential) (*authority.Credential, error) {
			return l.kr.RenewSystemUser(c, life)
		},
		nil)
}

// hold connects cred and keeps it renewed with renew until Release, which lets it go with
// release (when set).
func hold(ctx context.Context, url string, cred *authority.Credential, life time.Duration, log *slog.Logger,
	renew func(context.Context, *authority.Credential) (*authority.Credential, error),
	release func(context.Context, *authority.Credential) error) (*Held, error) {
	rc, err := dial.AsRenewing(ctx, url, cred)
	if err != nil {
		return nil, err
	}
	rctx, stop := context.WithCancel(context.Background())
	h := &Held{Renewing: rc, life: life, log: log, renew: renew, release: release, stop: stop, done: make(chan struct{}), cred: cred}
	go h.keepRenewed(rctx)
	return h, nil
}

// Credential returns the credential as last renewed.
func (h *Held) Credential() *authority.Credential {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cred
}

// renewAt returns when a credential of lifetime life that expires at exp is renewed: once two
// thirds of its lifetime have passed.
func renewAt(exp time.Time, life time.Duration) time.Time { return exp.Add(-life / 3) }

// renewalSlack is how late a renewal may be before RenewalOverdue reports it: a retry's wait.
const renewalSlack = renewRetry

// RenewalOverdue reports whether the credential of row, held and renewed at two thirds of its
// lifetime, has missed its renewal at now: its holder stopped, or renewals fail.
func RenewalOverdue(row authstore.CredentialRow, now time.Time) bool {
	if row.State != authstore.CredActive || row.ExpiresAt == 0 {
		return false
	}
	exp, issued := row.ExpiresAt.Time(), row.IssuedAt.Time()
	return now.After(renewAt(exp, exp.Sub(issued)).Add(renewalSlack))
}

// keepRenewed renews the credential until ctx ends, or for good once the connection is closed,
// the credential is revoked or retired (ErrConflict), or it has expired.
func (h *Held) keepRenewed(ctx context.Context) {
	defer close(h.done)
	retry := min(renewRetry, h.life/10)
	for {
		cred := h.Credential()
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(renewAt(cred.Expires, h.life))):
		}
		for {
			if h.IsClosed() || !time.Now().Before(cred.Expires) {
				h.warn("stop renewing a held credential: its connection is closed or it expired", cred, nil)
				return
			}
			next, err := h.renew(ctx, cred)
			if errors.Is(err, authstore.ErrConflict) {
				h.warn("stop renewing a held credential: it was revoked or its lifecycle retired", cred, err)
				return
			}
			if err == nil {
				h.mu.Lock()
				h.cred = next // the row holds the new JWT whether or not the reconnect finishes
				h.mu.Unlock()
				err = h.Renew(ctx, next)
			}
			if ctx.Err() != nil {
				break
			}
			metrics.Renewals.WithLabelValues(string(cred.Profile), metrics.Result(err)).Inc()
			if err == nil {
				break
			}
			h.warn("renew a held credential", cred, err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(retry):
			}
		}
	}
}

// warn logs msg about cred, when the holder gave a log.
func (h *Held) warn(msg string, cred *authority.Credential, err error) {
	if h.log != nil {
		h.log.Warn(msg, "principal", cred.Principal, "profile", cred.Profile, "expires", cred.Expires, "err", err)
	}
}

// Release stops the renewals, closes the connection and lets the credential go: a ledger-issued
// one is revoked, as no process holds it any more. A failed revocation is returned; the
// credential still expires on its own.
func (h *Held) Release() error {
	h.stop()
	<-h.done
	h.Close()
	if h.release == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseWait)
	defer cancel()
	return h.release(ctx, h.Credential())
}
