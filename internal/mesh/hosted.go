package mesh

import (
	"context"
	"errors"
	"fmt"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/remotemgr"
	"github.com/gocotal/cotal/wire"
)

// hostedPeople is a user-auth mesh's people as the host's own manager serves them: a person's
// current row that holds spawn is what it may hand an agent, and the agent it spawns for them is
// their managed agent, connecting on bearers from the exchange.
type hostedPeople struct {
	host     *remotemgr.Host
	exchange string
	sentinel []byte
}

// servePeople lets the host's managers serve the people of a user-auth mesh: from now on a
// person's spawn or launch is theirs to ask for.
func (ds *Daemons) servePeople(p *hostedPeople) { ds.people.Store(p) }

// callerGrant is the manager's CallerGrant: a person's current row on a user-auth mesh, else the
// caller's own agent credential in the ledger.
func (ds *Daemons) callerGrant(l *ledger.Ledger) func(context.Context, wire.Lifecycle) (*cotal.Grant, error) {
	return func(ctx context.Context, caller wire.Lifecycle) (*cotal.Grant, error) {
		if p := ds.people.Load(); p != nil && wire.IsDerivedOwner(caller.Principal.Owner()) {
			row, err := p.host.SpawnRow(ctx, caller)
			if err != nil {
				return nil, err
			}
			return &cotal.Grant{Principal: caller.Principal, Lifecycle: caller.UID, Role: row.Role,
				AllowSubscribe: row.AllowSubscribe, AllowPublish: row.AllowPublish, Capabilities: row.Scope}, nil
		}
		token, err := l.ActiveCredential(ctx, caller.UID, authority.ProfileAgent)
		if err != nil {
			return nil, err
		}
		return cotal.ParseJWT(token)
	}
}

// issuer is the manager's Issuer: an agent a person asked for is their managed agent, enrolled
// through the host; any other is the ledger's (AgentIssuer).
func (ds *Daemons) issuer(l *ledger.Ledger) manager.Issuer {
	local := AgentIssuer(l)
	return func(ctx context.Context, spec manager.Spec) (*manager.Launch, error) {
		if !wire.IsDerivedOwner(spec.Owner) {
			return local(ctx, spec)
		}
		p := ds.people.Load()
		if p == nil {
			return nil, errors.New("this mesh serves no people: its user auth is off")
		}
		parent, err := wire.ParseLifecycle(spec.SpawnedBy)
		if err != nil {
			return nil, fmt.Errorf("the spawn's caller: %w", err)
		}
		a, err := p.host.EnrollHosted(ctx, parent, remotemgr.Enrollment{Name: spec.Name, Role: spec.Role, Subscribe: spec.Subscribe,
			AllowSubscribe: spec.AllowSubscribe, AllowPublish: spec.AllowPublish}, spec.Capabilities)
		if err != nil {
			return nil, err
		}
		t := remotemgr.Target{Owner: a.Principal.Owner(), Actor: a.Principal.Actor(), LifecycleUID: string(a.LifecycleUID)}
		return &manager.Launch{Principal: a.Principal, UID: a.LifecycleUID, Retire: func(ctx context.Context) error { return p.host.RetireHosted(ctx, t) },
			Bearer: &manager.BearerLaunch{Exchange: p.exchange, ActorToken: a.ActorToken, SentinelCreds: p.sentinel,
				Role: a.Grant.Role, AllowSubscribe: a.Grant.AllowSubscribe, AllowPublish: a.Grant.AllowPublish}}, nil
	}
}
