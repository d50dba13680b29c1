package ledger

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/wire"
)

// StoreConn returns the connection the ledger's auth store is open on.
func (l *Ledger) StoreConn() *nats.Conn { return heldConn(l.store) }

// AgeStoreCredential makes the store's credential look as if it expired at exp.
func (l *Ledger) AgeStoreCredential(exp time.Time) { age(l.store, exp) }

// UserAuthConn returns the connection the ledger's user-auth store is open on.
func (l *Ledger) UserAuthConn() *nats.Conn { return heldConn(l.userauth) }

// AgeUserAuthCredential makes the user-auth store's credential look as if it expired at exp.
func (l *Ledger) AgeUserAuthCredential(exp time.Time) { age(l.userauth, exp) }

func heldConn[T any](h *held[T]) *nats.Conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nc
}

func age[T any](h *held[T], exp time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.expires = exp
}

// RenewServing renews a serving credential of endpoint in place.
func (l *Ledger) RenewServing(ctx context.Context, endpoint wire.EndpointName, cred *authority.Credential, life time.Duration) (*authority.Credential, error) {
	return l.renewServing(ctx, endpoint, cred, life)
}

// ReleaseServing revokes a serving credential of endpoint.
func (l *Ledger) ReleaseServing(ctx context.Context, endpoint wire.EndpointName, instance wire.LifecycleUID, credentialID string) error {
	return l.releaseServing(ctx, endpoint, instance, credentialID)
}

// Holding reports whether this hold wrote the claim the plane holds now: false for a co-holder
// of a shared claim another one wrote.
func (h *PlaneHold) Holding() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rev != 0
}
