package ledger

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/gocotal/cotal/internal/anchor"
	"github.com/gocotal/cotal/wire"
)

// The space's sessions key (SPEC §13.10): the ledger that establishes sessions signs their
// grants with a key of its own, held in memory only and registered as an anchor of role
// sessions scoped to the manager endpoint. It rotates before its window runs short: the
// successor is registered, then the predecessor's window is closed, so every grant it signed
// still verifies until the grant itself expires.

const (
	// SessionKeyLife is how long a sessions key may sign.
	SessionKeyLife = 48 * time.Hour
	// sessionKeyReserve is how much of its window a key keeps when it is replaced: more than a
	// grant's longest life, so a grant never outlives the window it was signed in by much.
	sessionKeyReserve = 25 * time.Hour
	// AnchorOwner owns the keys the auth plane registers.
	AnchorOwner = "ai.cotal.auth"
)

// sessionKeys is a ledger's sessions key, made when the first session is established.
type sessionKeys struct {
	mu  sync.Mutex
	cur *anchor.Signer
	// closing are replaced keys whose windows are still to be closed in the registry: a close
	// that failed is tried again at the next use.
	closing []string
	// life is SessionKeyLife unless a test shortens it.
	life, reserve time.Duration
}

// current returns the key to sign with now, registering a fresh one (and closing its
// predecessor's window) when there is none or the one there is runs short.
func (k *sessionKeys) current(ctx context.Context, l *Ledger) (*anchor.Signer, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	if k.cur != nil && k.cur.Anchor.ValidTo.Time().Sub(now) > k.reserve {
		k.closePending(ctx, l, now)
		return k.cur, nil
	}
	next, err := anchor.NewSigner(anchor.RoleSessions, []string{wire.ManagerEndpoint.Token()}, AnchorOwner, now.Add(-time.Second), k.life)
	if err != nil {
		return nil, err
	}
	reg, err := l.registry(ctx)
	if err != nil {
		return nil, err
	}
	if err := reg.Register(ctx, &next.Anchor); err != nil {
		return nil, err
	}
	if k.cur != nil {
		k.closing = append(k.closing, k.cur.Anchor.KeyID)
	}
	k.cur = next
	k.closePending(ctx, l, now)
	return next, nil
}

// closePending closes the windows of the replaced keys at now, keeping those whose close fails
// for the next try: the successor signs meanwhile, and a replaced key's private half is gone, so
// its open window signs nothing more.
func (k *sessionKeys) closePending(ctx context.Context, l *Ledger, now time.Time) {
	if len(k.closing) == 0 {
		return
	}
	reg, err := l.registry(ctx)
	if err != nil {
		return
	}
	k.closing = slices.DeleteFunc(k.closing, func(id string) bool { return reg.CloseWindow(ctx, id, now) == nil })
}

// retire closes the window of the ledger's key as the ledger closes: its private half goes with
// the process.
func (k *sessionKeys) retire(l *Ledger) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cur != nil {
		k.closing = append(k.closing, k.cur.Anchor.KeyID)
		k.cur = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	k.closePending(ctx, l, time.Now())
}

// WithSessionKeyLife shortens the life of the ledger's sessions keys, and the reserve at which
// one is replaced, for tests of the rotation.
func WithSessionKeyLife(life, reserve time.Duration) Option {
	return func(l *Ledger) { l.sessions.life, l.sessions.reserve = life, reserve }
}

// registry returns the space's anchor registry, read and written on the ledger's provisioner
// connection.
func (l *Ledger) registry(ctx context.Context) (anchor.Registry, error) {
	js, err := l.prov.get(ctx)
	if err != nil {
		return anchor.Registry{}, err
	}
	return anchor.Registry{Space: l.sp, Conn: js.Conn(), JS: js}, nil
}

// Anchors lists the space's registered anchors.
func (l *Ledger) Anchors(ctx context.Context) ([]anchor.Anchor, error) {
	reg, err := l.registry(ctx)
	if err != nil {
		return nil, err
	}
	return reg.List(ctx)
}
