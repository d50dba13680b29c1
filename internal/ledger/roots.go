package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/wire"
)

// ErrRootRefused is a root credential that refuses its incarnation's exchanges or connects:
// revoked, expired, or not the incarnation its principal's head names.
var ErrRootRefused = errors.New("the root credential refuses")

// EnsureRoot returns the root credential id of the incarnation uid of owner.actor (SPEC §13.1),
// issuing it first when needed: the lifecycle is activated (an older incarnation of the principal,
// left by an earlier grant, is retired first and its credentials refused), then its root committed
// through its gate. A revoked or expired root is ErrRootRefused: the incarnation is over.
func (l *Ledger) EnsureRoot(ctx context.Context, owner, actor string, uid wire.LifecycleUID) (string, error) {
	p, err := wire.NewPrincipal(owner, actor)
	if err != nil {
		return "", err
	}
	lc := wire.Lifecycle{Principal: p, UID: uid}
	s, err := l.store.get(ctx)
	if err != nil {
		return "", err
	}
	if row, err := s.Root(ctx, uid); err != nil || row != nil {
		if err != nil {
			return "", err
		}
		return row.CredentialID, checkRoot(row, p, time.Now())
	}
	h, _, err := s.Head(ctx, p)
	if err != nil {
		return "", err
	}
	var og *authstore.ObservedGate
	switch {
	case h != nil && h.State == authstore.HeadActive && h.LifecycleUID == uid:
		og, err = s.ObserveGate(ctx, uid)
	default:
		if h != nil && h.State == authstore.HeadActive {
			if err := l.takeOver(ctx, s, p); err != nil {
				return "", fmt.Errorf("retire the earlier incarnation of %s: %w", p, err)
			}
		}
		og, err = s.Activate(ctx, lc, activateOp(lc))
	}
	if err != nil {
		return "", err
	}
	row, err := s.IssueRoot(ctx, l.keys, og, p, uid)
	if err != nil {
		return "", err
	}
	return row.CredentialID, checkRoot(row, p, time.Now())
}

// CheckRoot proves credentialID at a connect: the root row of owner.actor's incarnation uid,
// active and unexpired, and the incarnation still the one its principal's head names.
func (l *Ledger) CheckRoot(ctx context.Context, owner, actor string, uid wire.LifecycleUID, credentialID string) error {
	p, err := wire.NewPrincipal(owner, actor)
	if err != nil {
		return err
	}
	if credentialID != authstore.RootCredentialID(uid) {
		return fmt.Errorf("%w: %s is not the root of lifecycle %s", ErrRootRefused, credentialID, uid)
	}
	s, err := l.store.get(ctx)
	if err != nil {
		return err
	}
	row, err := s.Root(ctx, uid)
	if err != nil {
		return err
	}
	if row == nil {
		return fmt.Errorf("%w: lifecycle %s has no root", ErrRootRefused, uid)
	}
	if err := checkRoot(row, p, time.Now()); err != nil {
		return err
	}
	h, _, err := s.Head(ctx, p)
	if err != nil {
		return err
	}
	if h == nil || h.State != authstore.HeadActive || h.LifecycleUID != uid {
		return fmt.Errorf("%w: %s no longer names lifecycle %s", ErrRootRefused, p, uid)
	}
	return nil
}

// checkRoot refuses a root row that is not p's, not active or expired at now.
func checkRoot(row *authstore.CredentialRow, p wire.Principal, now time.Time) error {
	switch {
	case row.Principal != p.String():
		return fmt.Errorf("%w: the root of lifecycle %s is held by %s", ErrRootRefused, row.LifecycleUID, row.Principal)
	case row.State != authstore.CredActive:
		return fmt.Errorf("%w: the root of %s is %s", ErrRootRefused, p, row.State)
	case row.ExpiresAt != 0 && !now.Before(row.ExpiresAt.Time()):
		return fmt.Errorf("%w: the root of %s expired", ErrRootRefused, p)
	}
	return nil
}
