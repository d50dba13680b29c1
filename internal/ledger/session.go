package ledger

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/sessiongrant"
	"github.com/gocotal/cotal/wire"
)

// The session ledger's trusted path (SPEC §13.6): a session is redeemed once, its two halves are
// released only to their parties, and ending it revokes both at the broker.

// RedeemSession establishes a session for its holder and serving instance, the row going
// issuing → active with both halves staged (authstore.Store.RedeemSession), and returns its
// grant, signed by the space's sessions key (SPEC §13.10). A second redeem by another holder,
// or of an ended session, is authority.ErrConflict.
func (l *Ledger) RedeemSession(ctx context.Context, req authstore.SessionRequest) (*sessiongrant.Grant, error) {
	err := l.withStore(ctx, func(s *authstore.Store, keys *authority.SpaceKeys) ([]string, error) {
		_, err := s.RedeemSession(ctx, keys, req)
		return nil, err
	})
	if err != nil {
		return nil, err
	}
	g, err := l.grantFor(ctx, req)
	if err != nil {
		// The session must not outlive a grant that never went out.
		cerr := l.CloseSession(context.WithoutCancel(ctx), req.SessionID, authstore.SessionCloser{Operator: true}, authstore.SessionClosed)
		return nil, errors.Join(fmt.Errorf("sign the grant of session %s: %w", req.SessionID, err), cerr)
	}
	return g, nil
}

// grantFor builds the grant of the session req established and signs it. It is stamped once the
// key is in hand, so the grant is issued inside the window of the key that signs it.
func (l *Ledger) grantFor(ctx context.Context, req authstore.SessionRequest) (*sessiongrant.Grant, error) {
	subj, err := sessiongrant.Rails(l.sp, req.Serving.Name, req.SessionID, req.ServingEpoch)
	if err != nil {
		return nil, err
	}
	signer, err := l.sessions.current(ctx, l)
	if err != nil {
		return nil, err
	}
	g := &sessiongrant.Grant{V: sessiongrant.Version, SessionID: req.SessionID, Space: string(l.sp), Endpoint: req.Serving.Name, Subjects: subj,
		Holder:  sessiongrant.Holder{ID: req.Holder.Principal.String(), LifecycleUID: req.Holder.UID, ProcessEpoch: req.HolderEpoch},
		Serving: sessiongrant.Serving{InstanceID: req.Serving.InstanceID, Epoch: req.ServingEpoch},
		Window:  meshwire.SessionWindowDefault, Iat: wire.MillisOf(time.Now()), Exp: wire.MillisOf(req.Expires), Nonce: newNonce()}
	return g, g.Sign(signer)
}

// newNonce returns a grant's nonce: 18 random bytes, 24 characters of base64url.
func newNonce() string {
	var b [18]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error since Go 1.24
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// SessionCaller releases the caller half of an active session to holder on the grant it
// presents: the grant must verify (its signature against the anchor it names, read afresh, its
// rails, its currency), name holder, and match the session's row; it never creates a session.
func (l *Ledger) SessionCaller(ctx context.Context, grant []byte, holder wire.Lifecycle) (*authority.Credential, error) {
	g, err := l.VerifyGrant(ctx, grant)
	if err != nil {
		return nil, err
	}
	if g.Holder.ID != holder.Principal.String() || g.Holder.LifecycleUID != holder.UID {
		return nil, wire.NewEndpointError(wire.CodePermissionDenied, wire.OutcomeNotExecuted, "session %s's grant names holder %s.%s, not %s", g.SessionID, g.Holder.ID, g.Holder.LifecycleUID, holder)
	}
	return l.release(ctx, func(s *authstore.Store, keys *authority.SpaceKeys) (*authority.Credential, error) {
		os, err := s.Session(ctx, g.SessionID)
		if err != nil {
			return nil, err
		}
		if os != nil && (os.Row.Endpoint != g.Endpoint || os.Row.Serving.InstanceID != g.Serving.InstanceID || os.Row.Serving.Epoch != g.Serving.Epoch) {
			return nil, fmt.Errorf("session %s: %w: its grant names another serving incarnation", g.SessionID, authstore.ErrConflict)
		}
		return s.CallerCredential(ctx, keys, g.SessionID, holder)
	})
}

// VerifyGrant verifies a session grant presented for this space now, resolving its signing key
// in the space's anchor registry (sessiongrant.Verify).
func (l *Ledger) VerifyGrant(ctx context.Context, grant []byte) (*sessiongrant.Grant, error) {
	reg, err := l.registry(ctx)
	if err != nil {
		return nil, err
	}
	return sessiongrant.Verify(grant, l.sp, reg.Resolver(ctx), time.Now())
}

// release runs one release of a session half, asked again while the broker briefly has no
// JetStream responder (it applies an account update a revocation just pushed): a release reads
// rows and returns the credential a row already holds, so asking again changes nothing.
func (l *Ledger) release(ctx context.Context, fn func(*authstore.Store, *authority.SpaceKeys) (*authority.Credential, error)) (*authority.Credential, error) {
	var cred *authority.Credential
	err := jsapi.RetryUnanswered(ctx, func(ctx context.Context) error {
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
