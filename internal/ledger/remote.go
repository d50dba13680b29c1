package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nuid"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/wire"
)

// Remote managers (SPEC §13.1, §13.6): a manager on a machine without the space's signing key.
// Its executor registers the instance by writing the instance's serve gate, open and naming the
// serve principal; the host then issues the serve credential through that gate, for a user key
// the manager generated and keeps, so no seed crosses the wire.

// Refusals of a remote manager's serve issuance.
var (
	// ErrNoGate is an instance whose serve gate was never registered.
	ErrNoGate = errors.New("the instance has no serve gate")
	// ErrForeignGate is a gate that names another principal than the one asking.
	ErrForeignGate = errors.New("the serve gate names another principal")
)

// ObserveManagerGate returns the serve gate of manager instance, or nil when there is none.
func (l *Ledger) ObserveManagerGate(ctx context.Context, instance wire.LifecycleUID) (*authority.ObservedEndpointGate, error) {
	g, err := l.managerGate(ctx, instance)
	if err != nil {
		return nil, err
	}
	return g.Observe(ctx)
}

// ActivateRemoteManager issues the serve credential of remote manager instance to serve, the
// principal its gate names, for the public user key pub, serving commands and living life. The
// gate must exist (ErrNoGate: nothing is minted) and name serve (ErrForeignGate). It then moves
// as a local manager's does (ServeManager): frozen, every serving credential of an older epoch
// revoked and evicted, reopened at the next epoch, which the credential serves and which is
// returned. The credential comes back as its JWT alone.
func (l *Ledger) ActivateRemoteManager(ctx context.Context, serve wire.Principal, instance wire.LifecycleUID, commands []string, life time.Duration, pub string) (*authority.Credential, int64, error) {
	g, err := l.managerGate(ctx, instance)
	if err != nil {
		return nil, 0, err
	}
	og, err := g.Observe(ctx)
	switch {
	case err != nil:
		return nil, 0, err
	case og == nil:
		return nil, 0, fmt.Errorf("activate manager %s: %w", instance, ErrNoGate)
	case og.Row.Principal != serve.String():
		return nil, 0, fmt.Errorf("activate manager %s for %s: %w (%s)", instance, serve, ErrForeignGate, og.Row.Principal)
	}
	mr := authority.MintRequest{
		Profile: authority.ProfileEndpointServe,
		Grant:   authority.Grant{Principal: serve, Serve: &authority.ServeRows{Endpoint: wire.ManagerEndpoint, Instance: instance, Epoch: og.Row.ProcessEpoch + 1, Commands: commands}},
		Expires: life,
	}
	// A dry run before the gate moves, as ServeManager's.
	if _, err := l.keys.SignUser(mr, pub); err != nil {
		return nil, 0, err
	}
	if og, err = l.advanceServeGate(ctx, g, og, serve, "serve-"+nuid.Next()); err != nil {
		return nil, 0, err
	}
	mr.Grant.Serve.Epoch = og.Row.ProcessEpoch
	cred, err := g.IssueHeld(ctx, l.keys, og, mr, nuid.Next(), pub)
	if err != nil {
		return nil, 0, err
	}
	return cred, og.Row.ProcessEpoch, nil
}

// RenewRemoteManager renews a remote manager's serve credential in place (authority
// ServeGate.RenewHeld): the same key, a fresh JWT living life, refused once the gate has moved.
func (l *Ledger) RenewRemoteManager(ctx context.Context, instance wire.LifecycleUID, credentialID string, life time.Duration) (*authority.Credential, error) {
	g, err := l.managerGate(ctx, instance)
	if err != nil {
		return nil, err
	}
	return g.RenewHeld(ctx, l.keys, credentialID, life)
}

// EvictManager ends what manager instance holds: each of its active serving credentials is
// revoked for reason, and the broker refuses those keys and keys (a remote manager's other
// identities, which have no ledger row) and closes their connections. The gate stays, so the
// instance may be activated again, at the next epoch, once its holder is allowed to.
func (l *Ledger) EvictManager(ctx context.Context, instance wire.LifecycleUID, reason string, keys ...string) error {
	return l.run(ctx, func(s *authority.AuthStore) ([]string, error) {
		g, err := s.ServeGate(authority.Endpoint{Name: wire.ManagerEndpoint.Token(), InstanceID: instance})
		if err != nil {
			return keys, err
		}
		rows, err := g.Credentials(ctx)
		for _, r := range rows {
			if r.State == authority.CredActive {
				if _, rerr := g.Revoke(ctx, r.CredentialID, reason); rerr != nil {
					err = errors.Join(err, rerr)
				}
			}
			keys = append(keys, r.UserKey)
		}
		return keys, err
	})
}

// ManagerCredentials lists the serving credential rows of manager instance.
func (l *Ledger) ManagerCredentials(ctx context.Context, instance wire.LifecycleUID) ([]authority.CredentialRow, error) {
	g, err := l.managerGate(ctx, instance)
	if err != nil {
		return nil, err
	}
	return g.Credentials(ctx)
}

// EvictKeys has the broker refuse userKeys, which no ledger row holds (a remote manager's
// identities signed for keys its holder generated), and close their connections.
func (l *Ledger) EvictKeys(ctx context.Context, userKeys ...string) error {
	return l.evicted(ctx, userKeys, nil)
}
