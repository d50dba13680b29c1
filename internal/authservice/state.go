package authservice

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/remotemgr"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/internal/userauth/oidc"
	"github.com/gocotal/cotal/wire"
)

// State is a space's user-auth state: the people ledger and the registry of remote managers, in
// the space's user-auth store, and the owner secret, in a directory on the host. The host's CLI
// (`cotal actor`) reads and writes it directly; the auth service reads it fresh on every request.
type State struct {
	Dir      string
	Space    wire.Space
	People   *userauth.People
	Registry *remotemgr.Registry
	secret   []byte
}

// OpenState opens the user-auth state of space sp: the owner secret in dir (made, with dir, on
// first use), and the people ledger and the registry of remote managers in kv, the space's
// user-auth store (ledger.Ledger.UserAuthStore). A ledger and registry that dir still holds as
// files, as they were kept before the store, are imported into it first, once (importFiles).
func OpenState(ctx context.Context, dir string, sp wire.Space, kv jetstream.KeyValue) (*State, error) {
	if err := atomicfile.MkdirPrivate(dir); err != nil {
		return nil, err
	}
	secret, err := userauth.LoadOrCreateOwnerSecret(filepath.Join(dir, ownerSecretFile))
	if err != nil {
		return nil, err
	}
	people, err := userauth.OpenPeople(kv)
	if err != nil {
		return nil, err
	}
	reg, err := remotemgr.OpenRegistry(kv)
	if err != nil {
		return nil, err
	}
	if err := importFiles(ctx, dir, people, reg); err != nil {
		return nil, fmt.Errorf("import the people ledger and remote managers of %s into its user-auth store: %w", sp, err)
	}
	return &State{Dir: dir, Space: sp, People: people, Registry: reg, secret: secret}, nil
}

// Owner returns the owner token of the person the pinned IdP knows as subject.
func (s *State) Owner(subject string) (string, error) {
	idp, err := PinnedIdP(s.Dir)
	if err != nil {
		return "", err
	}
	return userauth.DeriveOwner(s.secret, idp.Issuer, subject)
}

// Revoke deletes owner.actor's row, retires its incarnation (its bearers are refused at the next
// connect), closes the connections the person has open on every server, and evicts the remote
// managers it registered, retiring their agents.
//
// The row is deleted as it was read (People.RevokeOver): one a grant replaced meanwhile is read
// again, so the incarnation deleted is the one retired.
func (s *State) Revoke(ctx context.Context, l *ledger.Ledger, owner, actor string) error {
	var row *userauth.Row
	for try := 1; ; try++ {
		var err error
		if row, err = s.People.Get(ctx, owner, actor); err != nil {
			return err
		}
		err = s.People.RevokeOver(ctx, row)
		if err == nil {
			break
		}
		if !errors.Is(err, userauth.ErrChanged) || try == changeTries {
			return err
		}
	}
	_, evictErr := l.EvictConnectionsOf(ctx, row.Principal())
	return errors.Join(s.retire(ctx, l, row), evictErr, s.EvictManagers(ctx, l, owner, actor))
}

// retire retires the incarnation row names, if it was ever activated.
func (s *State) retire(ctx context.Context, l *ledger.Ledger, row *userauth.Row) error {
	if err := l.Retire(ctx, wire.Lifecycle{Principal: row.Principal(), UID: row.LifecycleUID}); err != nil {
		return fmt.Errorf("retire %s: %w", row.Principal(), err)
	}
	return nil
}

// EvictManagers ends the remote managers owner.actor registered.
func (s *State) EvictManagers(ctx context.Context, l *ledger.Ledger, owner, actor string) error {
	_, err := remotemgr.EvictOwner(ctx, l, s.Registry, s.People, owner, actor, "its holder's supervise scope was revoked")
	return err
}

// verifier adapts an OIDC ID-token verifier to the exchange.
type verifier struct{ v *oidc.Verifier }

// VerifyIdentity implements userauth.IdentityVerifier: an outage is ErrUnavailable, a bad token
// a refusal.
func (v verifier) VerifyIdentity(ctx context.Context, idToken string) (string, string, time.Time, error) {
	id, err := v.v.Verify(ctx, idToken)
	if err != nil {
		if errors.Is(err, oidc.ErrInvalidToken) {
			return "", "", time.Time{}, err
		}
		return "", "", time.Time{}, fmt.Errorf("%w: %v", userauth.ErrUnavailable, err)
	}
	return id.Issuer, id.Subject, id.Expires, nil
}

// roots adapts the ledger's root credentials to the exchange: a refusal stays one, anything else
// is the store not answering.
type roots struct{ l *ledger.Ledger }

// EnsureRoot implements userauth.RootCredentials.
func (r roots) EnsureRoot(ctx context.Context, owner, actor string, uid wire.LifecycleUID) (string, error) {
	id, err := r.l.EnsureRoot(ctx, owner, actor, uid)
	return id, unavailable(err)
}

// CheckRoot implements userauth.RootCredentials.
func (r roots) CheckRoot(ctx context.Context, owner, actor string, uid wire.LifecycleUID, credentialID string) error {
	return unavailable(r.l.CheckRoot(ctx, owner, actor, uid, credentialID))
}

func unavailable(err error) error {
	if err == nil || errors.Is(err, ledger.ErrRootRefused) {
		return err
	}
	return fmt.Errorf("%w: %v", userauth.ErrUnavailable, err)
}

// people adapts the exchange's human check to the remote-manager route.
type people struct{ ex *userauth.Exchange }

// Authenticate implements remotemgr.Authenticator.
func (p people) Authenticate(ctx context.Context, idToken, actor string) (*remotemgr.Person, error) {
	row, _, err := p.ex.VerifyHuman(ctx, idToken, actor)
	if err != nil {
		return nil, err
	}
	return &remotemgr.Person{Owner: row.Owner, Scopes: row.Scope}, nil
}
