package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// RemoteManagers is the ledger's part in the space's remote manager instances (SPEC §13.6):
// their serve gates, activation, standing credentials, eviction and deregistration.
type RemoteManagers struct{ l *Ledger }

// RemoteManagers returns the ledger's remote manager operations.
func (l *Ledger) RemoteManagers() *RemoteManagers { return &RemoteManagers{l: l} }

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

// ObserveGate returns the serve gate of manager instance, or nil when there is none.
func (r *RemoteManagers) ObserveGate(ctx context.Context, instance wire.LifecycleUID) (*authstore.ObservedEndpointGate, error) {
	g, err := r.l.managerGate(ctx, instance)
	if err != nil {
		return nil, err
	}
	return g.Observe(ctx)
}

// HeldIdentity is one of a remote manager's identities: its principal and the public key it
// generated and keeps.
type HeldIdentity struct {
	Principal wire.Principal
	Key       string
}

// RemoteServe are the identities a remote manager's activation issues to: the serve identity the
// gate names, and its goal-writer and session-ledger siblings.
type RemoteServe struct {
	Serve, GoalWriter, SessionLedger HeldIdentity
}

// RemoteActivation is what an activation issued, each credential as its JWT alone.
type RemoteActivation struct {
	Serve, GoalWriter, SessionLedger *authority.Credential
	// Epoch is the epoch the instance serves at.
	Epoch int64
}

// Activate issues a remote manager instance's serve credential, serving commands,
// and its goal-writer and session-ledger siblings, each living life, for the keys ids name. The
// gate must exist (ErrNoGate: nothing is minted) and name ids.Serve (ErrForeignGate). It then
// moves as a local manager's does (Serve): frozen, every serving credential of an older
// epoch revoked and evicted, reopened at the next epoch. The three credentials are issued through
// the gate at that epoch, each against the revision the issue before it left, so a gate that moves
// in between (another incarnation) stops the activation with ErrConflict; all three are fenced
// together by the next.
func (r *RemoteManagers) Activate(ctx context.Context, ids RemoteServe, instance wire.LifecycleUID, commands []string, life time.Duration) (*RemoteActivation, error) {
	g, err := r.l.managerGate(ctx, instance)
	if err != nil {
		return nil, err
	}
	og, err := g.Observe(ctx)
	switch {
	case err != nil:
		return nil, err
	case og == nil:
		return nil, fmt.Errorf("activate manager %s: %w", instance, ErrNoGate)
	case og.Row.Principal != ids.Serve.Principal.String():
		return nil, fmt.Errorf("activate manager %s for %s: %w (%s)", instance, ids.Serve.Principal, ErrForeignGate, og.Row.Principal)
	}
	serving := func(epoch int64) *authority.ServeRows {
		return &authority.ServeRows{Endpoint: wire.ManagerEndpoint, Instance: instance, Epoch: epoch, Commands: commands}
	}
	sibling := func(epoch int64) *authority.ServeRows {
		return &authority.ServeRows{Endpoint: wire.ManagerEndpoint, Instance: instance, Epoch: epoch}
	}
	reqs := func(epoch int64) []authority.MintRequest {
		return []authority.MintRequest{
			{Profile: authority.ProfileEndpointServe, Grant: authority.Grant{Principal: ids.Serve.Principal, Serve: serving(epoch)}, Expires: life},
			{Profile: authority.ProfileGoalWriter, Grant: authority.Grant{Principal: ids.GoalWriter.Principal, Serve: sibling(epoch)}, Expires: life},
			{Profile: authority.ProfileSessionLedger, Grant: authority.Grant{Principal: ids.SessionLedger.Principal}, Expires: life},
		}
	}
	keys := []string{ids.Serve.Key, ids.GoalWriter.Key, ids.SessionLedger.Key}
	// A dry run before the gate moves, as Serve's.
	for i, mr := range reqs(og.Row.ProcessEpoch + 1) {
		if _, err := r.l.keys.SignUser(mr, keys[i]); err != nil {
			return nil, err
		}
	}
	if og, err = r.l.advanceServeGate(ctx, g, og, ids.Serve.Principal, "serve-"+nuid.Next()); err != nil {
		return nil, err
	}
	epoch := og.Row.ProcessEpoch
	issued := make([]*authority.Credential, 3)
	for i, mr := range reqs(epoch) {
		if i > 0 { // the issue before moved the gate's revision, never its epoch
			if og, err = g.Observe(ctx); err != nil {
				return nil, err
			}
			if og == nil || og.Row.State != authstore.GateOpen || og.Row.ProcessEpoch != epoch {
				return nil, fmt.Errorf("activate manager %s: %w: the gate moved during the activation", instance, authstore.ErrConflict)
			}
		}
		if issued[i], err = g.IssueHeld(ctx, r.l.keys, og, mr, nuid.Next(), keys[i]); err != nil {
			return nil, err
		}
	}
	return &RemoteActivation{Serve: issued[0], GoalWriter: issued[1], SessionLedger: issued[2], Epoch: epoch}, nil
}

// Renew renews a remote manager's serve credential in place (authority
// ServeGate.RenewHeld): the same key, a fresh JWT living life, refused once the gate has moved.
func (r *RemoteManagers) Renew(ctx context.Context, instance wire.LifecycleUID, credentialID string, life time.Duration) (*authority.Credential, error) {
	g, err := r.l.managerGate(ctx, instance)
	if err != nil {
		return nil, err
	}
	return g.RenewHeld(ctx, r.l.keys, credentialID, life)
}

// Evict ends what manager instance holds: each of its active serving credentials is
// revoked for reason, with the sessions it serves (superseded: their holders' halves are refused
// too), and the broker refuses those keys and keys (a remote manager's other
// identities, which have no ledger row) and closes their connections. The gate stays, so the
// instance may be activated again, at the next epoch, once its holder is allowed to.
func (r *RemoteManagers) Evict(ctx context.Context, instance wire.LifecycleUID, reason string, keys ...string) error {
	return r.l.run(ctx, func(s *authstore.Store) ([]string, error) {
		g, err := s.ServeGate(authstore.Endpoint{Name: wire.ManagerEndpoint.Token(), InstanceID: instance})
		if err != nil {
			return keys, err
		}
		rows, err := g.Credentials(ctx)
		for _, r := range rows {
			keys = append(keys, r.UserKey)
			if r.State != authstore.CredActive {
				continue // revoked already, and the session a serving half served ended with it
			}
			if _, rerr := g.Revoke(ctx, r.CredentialID, reason); rerr != nil {
				err = errors.Join(err, rerr)
				continue
			}
			// A session the instance served ends with it, its holder's half refused too: its rails
			// have nobody to serve them any more.
			more, serr := s.SupersedeSessions(ctx, r)
			keys = append(keys, more...)
			err = errors.Join(err, serr)
		}
		return keys, err
	})
}

// Deregister marks manager instance exited in the service registry, for an instance that
// cannot do it itself because it was evicted: a one-shot credential pinned to the instance's
// service records, held for this call alone, writes what its own deregistration would have. An
// instance already exited, never registered, or live again (activated since) is left as it is.
func (r *RemoteManagers) Deregister(ctx context.Context, instance wire.LifecycleUID) error {
	// An instance activated again since its eviction serves: its record is its own.
	if _, live, err := r.Live(ctx, instance); err != nil || live {
		return err
	}
	p, err := wire.NewPrincipal(wire.DevOwner, deregistrarActor)
	if err != nil {
		return err
	}
	cred, err := r.l.keys.Mint(authority.MintRequest{Profile: authority.ProfileEndpointServe, Expires: authority.OneShotLifetime,
		Grant: authority.Grant{Principal: p, Serve: &authority.ServeRows{Endpoint: wire.ManagerEndpoint, Instance: instance}}})
	if err != nil {
		return err
	}
	return r.l.withOneShot(ctx, cred, func(_ *nats.Conn, js jetstream.JetStream) error {
		kv, err := js.KeyValue(ctx, string(meshwire.RecordsBucket(r.l.sp)))
		if err != nil {
			return fmt.Errorf("open the records of space %s: %w", r.l.sp, err)
		}
		return endpoint.MarkExited(ctx, kv, wire.ManagerEndpoint, instance)
	})
}

// Instances lists every manager instance that holds or held a serving credential.
func (r *RemoteManagers) Instances(ctx context.Context) ([]wire.LifecycleUID, error) {
	s, err := r.l.store.get(ctx)
	if err != nil {
		return nil, err
	}
	return s.ServingInstances(ctx, wire.ManagerEndpoint.Token())
}

// Live returns the principal manager instance serves as while it is live: its serve gate
// open, and a serving credential of the gate's principal active and unexpired. ok is false for an
// instance that is not live (no gate, a frozen or retired one, no such credential).
func (r *RemoteManagers) Live(ctx context.Context, instance wire.LifecycleUID) (p wire.Principal, ok bool, err error) {
	og, err := r.ObserveGate(ctx, instance)
	if err != nil || og == nil || og.Row.State != authstore.GateOpen {
		return wire.Principal{}, false, err
	}
	rows, err := r.Credentials(ctx, instance)
	if err != nil {
		return wire.Principal{}, false, err
	}
	now := time.Now()
	for _, r := range rows {
		if r.Principal == og.Row.Principal && r.State == authstore.CredActive && (r.ExpiresAt == 0 || r.ExpiresAt.Time().After(now)) {
			p, err := wire.ParsePrincipal(r.Principal)
			return p, err == nil, err
		}
	}
	return wire.Principal{}, false, nil
}

// Credentials lists the serving credential rows of manager instance.
func (r *RemoteManagers) Credentials(ctx context.Context, instance wire.LifecycleUID) ([]authstore.CredentialRow, error) {
	g, err := r.l.managerGate(ctx, instance)
	if err != nil {
		return nil, err
	}
	return g.Credentials(ctx)
}
