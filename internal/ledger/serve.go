package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nuid"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/wire"
)

// The manager's serving credential (SPEC §13.1 serve issuance): a supervisor credential that also
// holds the serve rows of one manager instance at one epoch, issued through the instance's gate
// epgate.manager.<instanceId>, with its row under epcred.manager.<instanceId>.<credentialId>.
// Every issue after the first advances the epoch and fences the incarnations before it.

// Serve issues the serving credential of an instance of endpoint, which serves commands (and
// describe), for the principal local.<name>, living life (zero: the profile's default; negative:
// never). A manager's is a supervisor credential, which serves beside its other rows; any other
// endpoint's is endpoint-serve, which serves and does nothing else. It returns the credential and
// the epoch it serves at, the epoch the instance's replies, events and svc status carry.
//
// The instance's gate, epgate.<endpoint>.<instanceId>, decides the epoch. An instance with no gate is activated: its gate opens at
// epoch 0. An instance that has one is taken over: the gate freezes, every serving credential of
// an older epoch still active is revoked and evicted from the broker (verified), and the gate
// reopens at the next epoch; a barrier that stopped part way (the gate left frozen) is resumed
// the same way. The new credential's row is staged create-only and committed by rewriting the
// gate at the revision this call observed, so of two racing issues one loses with ErrConflict. A
// retired gate is ErrConflict.
func (l *Ledger) Serve(ctx context.Context, endpoint wire.EndpointName, name string, instance wire.LifecycleUID, commands []string, life time.Duration) (*authority.Credential, int64, error) {
	profile := authority.ProfileEndpointServe
	if endpoint == wire.ManagerEndpoint {
		profile = authority.ProfileSupervisor
	}
	p, err := wire.NewPrincipal(wire.DevOwner, name)
	if err != nil {
		return nil, 0, err
	}
	g, err := l.serveGate(ctx, endpoint, instance)
	if err != nil {
		return nil, 0, err
	}
	og, err := g.Observe(ctx)
	if err != nil {
		return nil, 0, err
	}
	next := int64(0)
	if og != nil {
		next = og.Row.ProcessEpoch + 1
	}
	mr := authority.MintRequest{
		Profile: profile,
		Grant:   authority.Grant{Principal: p, Serve: &authority.ServeRows{Endpoint: endpoint, Instance: instance, Epoch: next, Commands: commands}},
		Expires: life,
	}
	// A dry run before the gate moves: a grant that cannot be minted (a bad command, a JWT over
	// the size gate) must not fence the running incarnation.
	if _, err := l.keys.Mint(mr); err != nil {
		return nil, 0, err
	}
	opID := "serve-" + nuid.Next()
	if og, err = l.advanceServeGate(ctx, g, og, p, opID); err != nil {
		return nil, 0, err
	}
	mr.Grant.Serve.Epoch = og.Row.ProcessEpoch
	cred, err := g.Issue(ctx, l.keys, og, mr, nuid.Next())
	if err != nil {
		return nil, 0, err
	}
	return cred, og.Row.ProcessEpoch, nil
}

// advanceServeGate opens the gate of a serving instance observed at og (nil: absent) for a new
// incarnation served by p: an absent gate is activated open at epoch 0; an open one is frozen,
// fenced and reopened at the next epoch, a frozen one fenced and reopened.
func (l *Ledger) advanceServeGate(ctx context.Context, g *authstore.ServeGate, og *authstore.ObservedEndpointGate, p wire.Principal, opID string) (*authstore.ObservedEndpointGate, error) {
	if og == nil {
		return g.Move(ctx, nil, authstore.EndpointGateRow{
			State: authstore.GateOpen, Generation: 1, Principal: p.String(),
			Op: &authstore.EndpointGateOp{OpID: opID, Kind: authstore.OpActivation},
		})
	}
	op := &authstore.EndpointGateOp{OpID: opID, Kind: authstore.OpTakeover, Successor: p.String()}
	var err error
	switch og.Row.State {
	case authstore.GateOpen:
		frozen := og.Row
		frozen.State, frozen.Generation, frozen.Op = authstore.GateFrozen, og.Row.Generation+1, op
		if og, err = g.Move(ctx, og, frozen); err != nil {
			return nil, fmt.Errorf("freeze the serve gate: %w", err)
		}
	case authstore.GateFrozen: // a barrier that stopped part way: resume it
	default:
		return nil, fmt.Errorf("serve: %w: the gate is %s", authstore.ErrConflict, og.Row.State)
	}
	next := og.Row.ProcessEpoch + 1
	if err := l.fenceServing(ctx, g, next); err != nil {
		return nil, fmt.Errorf("fence the serving credentials before epoch %d (the gate stays frozen): %w", next, err)
	}
	open := og.Row
	open.State, open.Generation, open.ProcessEpoch, open.Principal, open.Op = authstore.GateOpen, og.Row.Generation+1, next, p.String(), op
	if og, err = g.Move(ctx, og, open); err != nil {
		return nil, fmt.Errorf("reopen the serve gate at epoch %d: %w", next, err)
	}
	return og, nil
}

// fenceServing revokes every serving credential of the gate's instance issued before epoch (a row
// that names no epoch counts as older: a session's serving half, whose session is superseded
// with it) and has the broker refuse them and close their connections, verified. The keys of rows an earlier run already revoked are evicted again: a
// barrier resumed after a failed eviction must finish it. A row that cannot be read does not
// shield the others, but fails the fence: a credential it cannot revoke is not fenced.
func (l *Ledger) fenceServing(ctx context.Context, g *authstore.ServeGate, epoch int64) error {
	rows, err := g.Credentials(ctx)
	if err != nil && !errors.Is(err, authstore.ErrCorrupt) {
		return err
	}
	var keys []string
	for _, r := range rows {
		if e, ok := r.ServedEpoch(); ok && e >= epoch {
			continue
		}
		if r.State == authstore.CredActive {
			if _, rerr := g.Revoke(ctx, r.CredentialID, fmt.Sprintf("fenced by serve epoch %d", epoch)); rerr != nil {
				err = errors.Join(err, rerr)
				continue
			}
			// Its session goes with it; a half revoked before had its session ended then.
			if more, serr := l.supersedeSessions(ctx, r); serr != nil {
				err = errors.Join(err, serr)
			} else {
				keys = append(keys, more...)
			}
		}
		keys = append(keys, r.UserKey)
	}
	if len(keys) > 0 {
		err = errors.Join(err, l.evict.Evict(ctx, l.sp, keys...))
	}
	return err
}

// renewServing renews a serving credential of endpoint in place for life: the same key and
// permissions, a fresh JWT (authstore.ServeGate.Renew). Once a newer incarnation has taken the
// instance over it is authstore.ErrConflict.
func (l *Ledger) renewServing(ctx context.Context, endpoint wire.EndpointName, cred *authority.Credential, life time.Duration) (*authority.Credential, error) {
	g, err := l.serveGate(ctx, endpoint, cred.LifecycleUID)
	if err != nil {
		return nil, err
	}
	return g.Renew(ctx, l.keys, cred.CredentialID, life)
}

// releaseServing revokes a serving credential of endpoint at a clean stop, and has the broker
// refuse it. Releasing one already revoked (fenced by a newer epoch) is not an error.
func (l *Ledger) releaseServing(ctx context.Context, endpoint wire.EndpointName, instance wire.LifecycleUID, credentialID string) error {
	return l.run(ctx, func(s *authstore.Store) ([]string, error) {
		g, err := s.ServeGate(authstore.Endpoint{Name: endpoint.Token(), InstanceID: instance})
		if err != nil {
			return nil, err
		}
		row, err := g.Revoke(ctx, credentialID, "its holder stopped")
		if err != nil {
			return nil, err
		}
		return []string{row.UserKey}, nil
	})
}

// HoldServing issues the serving credential of an instance of endpoint (Serve) living life (at
// least MinHeldLifetime), connects it and keeps it renewed at its epoch until Release, which
// revokes it. It returns the epoch the connection serves at. Renewals stop for good once a newer
// incarnation fences it.
func (l *Ledger) HoldServing(ctx context.Context, endpoint wire.EndpointName, name string, instance wire.LifecycleUID, commands []string, life time.Duration, log *slog.Logger) (*Held, int64, error) {
	if life < MinHeldLifetime {
		return nil, 0, fmt.Errorf("hold the %s credential of %s: its lifetime %s must be at least %s", endpoint, name, life, MinHeldLifetime)
	}
	cred, epoch, err := l.Serve(ctx, endpoint, name, instance, commands, life)
	if err != nil {
		return nil, 0, err
	}
	release := func(ctx context.Context, c *authority.Credential) error {
		return l.releaseServing(ctx, endpoint, instance, c.CredentialID)
	}
	h, err := hold(ctx, l.URL(), cred, life, log,
		func(ctx context.Context, c *authority.Credential) (*authority.Credential, error) {
			return l.renewServing(ctx, endpoint, c, life)
		},
		release)
	if err != nil {
		return nil, 0, errors.Join(err, release(context.WithoutCancel(ctx), cred)) // nobody holds it
	}
	return h, epoch, nil
}

// managerGate returns the serve gate of a manager instance on the ledger's store.
func (l *Ledger) managerGate(ctx context.Context, instance wire.LifecycleUID) (*authstore.ServeGate, error) {
	return l.serveGate(ctx, wire.ManagerEndpoint, instance)
}

// serveGate returns the serve gate of an instance of endpoint on the ledger's store.
func (l *Ledger) serveGate(ctx context.Context, endpoint wire.EndpointName, instance wire.LifecycleUID) (*authstore.ServeGate, error) {
	s, err := l.store.get(ctx)
	if err != nil {
		return nil, err
	}
	return s.ServeGate(authstore.Endpoint{Name: endpoint.Token(), InstanceID: instance})
}

// Instrument reports whether caller is a control instrument of the space: the broker pins every
// caller's lifecycle on the subjects it may publish, an agent's to its own lifecycle, a control
// instrument's to a fresh uid no lifecycle holds. A caller whose uid the ledger reserved is not
// one; an unreadable ledger answers false with the error.
func (l *Ledger) Instrument(ctx context.Context, caller wire.Lifecycle) (bool, error) {
	s, err := l.store.get(ctx)
	if err != nil {
		return false, err
	}
	// Asked while the broker applies an account update (a revocation just pushed), the read can
	// find no responder; it is asked again rather than taken for a refusal.
	var reserved bool
	err = jsapi.RetryUnanswered(ctx, func(ctx context.Context) error {
		var rerr error
		reserved, rerr = s.Reserved(ctx, caller.UID)
		return rerr
	})
	return err == nil && !reserved, err
}

// supersedeSessions supersedes the sessions a fenced serving credential served.
func (l *Ledger) supersedeSessions(ctx context.Context, r authstore.CredentialRow) ([]string, error) {
	s, err := l.store.get(ctx)
	if err != nil {
		return nil, err
	}
	return s.SupersedeSessions(ctx, r)
}
