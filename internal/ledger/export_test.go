package ledger

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/wire"
)

// StoreConn returns the connection the ledger's auth store is open on.
func (l *Ledger) StoreConn() *nats.Conn {
	l.store.mu.Lock()
	defer l.store.mu.Unlock()
	return l.store.nc
}

// AgeStoreCredential makes the store's credential look as if it expired at exp.
func (l *Ledger) AgeStoreCredential(exp time.Time) {
	l.store.mu.Lock()
	defer l.store.mu.Unlock()
	l.store.expires = exp
}

// RenewServing renews a serving credential of endpoint in place.
func (l *Ledger) RenewServing(ctx context.Context, endpoint wire.EndpointName, cred *authority.Credential, life time.Duration) (*authority.Credential, error) {
	return l.renewServing(ctx, endpoint, cred, life)
}

// ReleaseServing revokes a serving credential of endpoint.
func (l *Ledger) ReleaseServing(ctx context.Context, endpoint wire.EndpointName, instance wire.LifecycleUID, credentialID string) error {
	return l.releaseServing(ctx, endpoint, instance, credentialID)
}
