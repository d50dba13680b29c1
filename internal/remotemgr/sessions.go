package remotemgr

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/sessiongrant"
	"github.com/gocotal/cotal/wire"
)

// remoteSessions establishes a remote manager's attach sessions through its host, the trusted
// auth path (SPEC §13.6): the host's ledger resolves the holder, the host redeems the session
// there for it, and signs the serving half for the manager's own key. The holder takes its half
// from the host's ledger (the host's operator directly, the manager's own person through the
// host's session-holder route); either party ends the session there (the manager as its serving
// party), which has the broker refuse the holder's half. The manager's serving half, recorded by
// the host against the instance, is dropped with the bridge and lapses with the session, or is
// revoked with the manager.
type remoteSessions struct {
	c *Client

	mu sync.Mutex
	// serving holds each established session's serving half until its bridge connects on it.
	serving map[string]*authority.Credential
}

func newRemoteSessions(c *Client) *remoteSessions {
	return &remoteSessions{c: c, serving: map[string]*authority.Credential{}}
}

// SessionHolder asks the host which lifecycle holds caller's session, and at which epoch.
func (r *remoteSessions) SessionHolder(ctx context.Context, caller wire.Lifecycle) (wire.Lifecycle, int64, error) {
	h, err := r.c.SessionHolder(ctx, caller)
	if err != nil {
		return wire.Lifecycle{}, 0, err
	}
	lc, err := h.Lifecycle()
	if err != nil {
		return wire.Lifecycle{}, 0, fmt.Errorf("the host's session holder: %w", err)
	}
	return lc, h.ProcessEpoch, nil
}

// RedeemSession has the host redeem the session for its holder and sign its grant, and keeps
// the serving half for the bridge. The caller's half stays in the host's ledger for the holder.
func (r *remoteSessions) RedeemSession(ctx context.Context, req authstore.SessionRequest) (*sessiongrant.Grant, error) {
	if req.Target == nil {
		return nil, fmt.Errorf("session %s names no target", req.SessionID)
	}
	holder := SessionHolder{ID: req.Holder.Principal.String(), LifecycleUID: string(req.Holder.UID), ProcessEpoch: req.HolderEpoch}
	serving, g, err := r.c.Session(ctx, req.SessionID, req.ServingEpoch, req.Expires, holder, *req.Target)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.serving[req.SessionID] = serving
	r.mu.Unlock()
	return g, nil
}

// SessionServing hands the bridge the serving half RedeemSession kept, once.
func (r *remoteSessions) SessionServing(_ context.Context, sessionID string, _ wire.LifecycleUID, _ int64) (*authority.Credential, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cred, ok := r.serving[sessionID]
	if !ok {
		return nil, fmt.Errorf("session %s was not established here, or is served already", sessionID)
	}
	delete(r.serving, sessionID)
	return cred, nil
}

// CloseSession has the host end the session in its ledger, as its serving party, which revokes
// the holder's half; one the host holds no row of (its redeem failed) or already ended is no
// error.
func (r *remoteSessions) CloseSession(ctx context.Context, sessionID string, _ authstore.SessionCloser, to authstore.SessionState) error {
	r.mu.Lock()
	delete(r.serving, sessionID)
	r.mu.Unlock()
	err := r.c.EndSession(ctx, sessionID, to)
	if ref, ok := errors.AsType[*Refusal](err); ok && ref.Code == wire.CodeNotFound {
		return nil
	}
	return err
}
