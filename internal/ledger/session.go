package ledger

import (
	"context"
	"fmt"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/wire"
)

// The session ledger's trusted path (SPEC §13.6): a session is redeemed once, its two halves are
// released only to their parties, and ending it revokes both at the broker.

// RedeemSession redeems a session grant for its holder and serving instance: the row goes
// issuing → active and the caller half is released (authstore.Store.RedeemSession). A
// second redeem by another holder, or of an ended session, is authority.ErrConflict.
func (l *Ledger) RedeemSession(ctx context.Context, req authstore.SessionRequest) (*authority.Credential, error) {
	var cred *authority.Credential
	err := l.withStore(ctx, func(s *authstore.Store, keys *authority.SpaceKeys) ([]string, error) {
		var err error
		cred, err = s.RedeemSession(ctx, keys, req)
		return nil, err
	})
	return cred, err
}

// SessionCaller releases the caller half of an active session to holder, the lifecycle its row
// names; it never creates a session.
func (l *Ledger) SessionCaller(ctx context.Context, sessionID string, holder wire.Lifecycle) (*authority.Credential, error) {
	return l.release(ctx, func(s *authstore.Store, keys *authority.SpaceKeys) (*authority.Credential, error) {
		return s.CallerCredential(ctx, keys, sessionID, holder)
	})
}

// release runs one release of a session half, asked again while the broker briefly has no
// JetStream responder (it applies an account update a revocation just pushed): a release reads
// rows and returns the credential a row already holds, so asking again changes nothing.
func (l *Ledger) release(ctx context.Context, fn func(*authstore.Store, *authority.SpaceKeys) (*authority.Credential, error)) (*authority.Credential, error) {
	var cred *authority.Credential
	err := retryUnanswered(ctx, func(ctx context.Context) error {
		return l.withStore(ctx, func(s *authstore.Store, keys *authority.SpaceKeys) ([]string, error) {
			var err error
			cred, err = fn(s, keys)
			return nil, err
		})
	})
	return cred, err
}

// SessionServing releases the serving half of an active session to the manager instance that
// serves it at epoch.
func (l *Ledger) SessionServing(ctx context.Context, sessionID string, instance wire.LifecycleUID, epoch int64) (*authority.Credential, error) {
	return l.release(ctx, func(s *authstore.Store, keys *authority.SpaceKeys) (*authority.Credential, error) {
		return s.ServingCredential(ctx, keys, sessionID, authstore.Endpoint{Name: wire.ManagerEndpoint.Token(), InstanceID: instance}, epoch)
	})
}

// CloseSession ends a session for closer, a party of it or the operator: the row goes to (closed
// when empty) and both halves are revoked and refused by the broker, their connections closed.
// Closing an ended session again retries any revocation left unfinished.
func (l *Ledger) CloseSession(ctx context.Context, sessionID string, closer authstore.SessionCloser, to authstore.SessionState) error {
	return l.run(ctx, func(s *authstore.Store) ([]string, error) {
		t, err := s.CloseSession(ctx, sessionID, closer, to)
		if t == nil {
			return nil, err
		}
		return t.RevokedKeys, err
	})
}

// Session reads a session's row; nil when there is none.
func (l *Ledger) Session(ctx context.Context, sessionID string) (*authstore.ObservedSession, error) {
	s, err := l.store.get(ctx)
	if err != nil {
		return nil, err
	}
	return s.Session(ctx, sessionID)
}

// SessionHolder returns the lifecycle that holds a session a caller asks for, with its process
// epoch: the caller's own lifecycle, or for a control instrument (whose one-shot uid no lifecycle
// holds) the standing lifecycle of its principal, which the instrument's credential row is under.
func (l *Ledger) SessionHolder(ctx context.Context, caller wire.Lifecycle) (wire.Lifecycle, int64, error) {
	s, err := l.store.get(ctx)
	if err != nil {
		return wire.Lifecycle{}, 0, err
	}
	holder := caller
	if reserved, err := s.Reserved(ctx, caller.UID); err != nil {
		return wire.Lifecycle{}, 0, err
	} else if !reserved {
		h, _, err := s.Head(ctx, caller.Principal)
		if err != nil {
			return wire.Lifecycle{}, 0, err
		}
		if h == nil || h.State != authstore.HeadActive {
			return wire.Lifecycle{}, 0, fmt.Errorf("%s has no active lifecycle to hold a session", caller.Principal)
		}
		holder.UID = h.LifecycleUID
	}
	epoch, err := s.CurrentEpoch(ctx, holder)
	return holder, epoch, err
}
