package authstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/wire"
)

// Root credentials (SPEC §13.1, user-auth mode): the bearers an auth service issues for one
// incarnation of a person's actor derive from one credential row of that lifecycle, its root. The
// root is issued through the lifecycle's gate like any credential, under an id the lifecycle
// alone determines, so of any number of racing first exchanges exactly one row is written and all
// share it. Its JWT is a probe credential that is never released: the row exists to be revoked,
// and every connect checks it.

// rootSource marks a root credential's row in its source chain.
const rootSource = "root"

// RootLifetime is how long a root credential's row stands: past it, the incarnation's exchanges
// are refused until its holder is granted again.
const RootLifetime = 90 * 24 * time.Hour

// RootCredentialID returns the id of lifecycle uid's root credential.
func RootCredentialID(uid wire.LifecycleUID) string { return "root-" + string(uid) }

// IsRoot reports whether r is a root credential's row.
func (r CredentialRow) IsRoot() bool { return slices.Contains(r.SourceChain, rootSource) }

// IssueRoot commits the root credential of p's lifecycle uid through its gate observed at og, or
// returns the one a previous call committed. It returns the row.
func (s *Store) IssueRoot(ctx context.Context, keys *authority.SpaceKeys, og *ObservedGate, p wire.Principal, uid wire.LifecycleUID) (*CredentialRow, error) {
	req := authority.MintRequest{Profile: authority.ProfileProbe, Grant: authority.Grant{Principal: p, LifecycleUID: uid}, Expires: RootLifetime}
	row, _, err := s.commit(ctx, keys, og, req, RootCredentialID(uid), rootSource)
	if err != nil {
		return nil, fmt.Errorf("issue the root credential of %s.%s: %w", p, uid, err)
	}
	return row, nil
}

// Root returns the root credential row of lifecycle uid, or nil when none was issued.
func (s *Store) Root(ctx context.Context, uid wire.LifecycleUID) (*CredentialRow, error) {
	row, _, err := s.credential(ctx, uid, RootCredentialID(uid))
	if err != nil || row == nil {
		return nil, err
	}
	if !row.IsRoot() {
		return nil, fmt.Errorf("%w: %s is not marked as a root credential", ErrCorrupt, RootCredentialID(uid))
	}
	return row, nil
}
