package ledger

import (
	"time"

	"github.com/nats-io/nats.go"
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
