package remotemgr

import (
	"context"
	"errors"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/wire"
)

// Hosted agents: on a user-auth mesh the host's own manager also runs agents for people, as it
// does when a person's manifest deploy launches through their deployer view, or a person with no
// remote manager spawns through their manager-caller view. Such an agent is the person's managed
// agent, exactly as one a remote manager spawns: a managed row of theirs within the caller's row,
// connecting on bearers exchanged for its actor token. Only the host's registry of remote
// managers does not list it: it runs on no remote manager, so no eviction of one ends it, and
// its launch's retirement does.

// HostedAgent is a managed agent enrolled for the host's own manager to launch.
type HostedAgent struct {
	Principal    wire.Principal
	LifecycleUID wire.LifecycleUID
	// ActorToken is the secret the agent exchanges for its bearers; the host keeps its hash.
	ActorToken string
	// Grant is what the agent's row grants, as its bearers will.
	Grant AgentGrant
}

// SpawnRow returns the row of caller when caller is a current incarnation of a person's row (an
// interactive row, or a managed agent's within its envelope) that holds spawn: the most an agent
// it has the host's manager spawn may get. It returns an error naming why otherwise.
func (h *Host) SpawnRow(ctx context.Context, caller wire.Lifecycle) (*userauth.Row, error) {
	if h.Managed == nil {
		return nil, errors.New("this host keeps no people")
	}
	row, err := h.currentRow(ctx, caller)
	switch {
	case err != nil:
		return nil, err
	case row == nil:
		return nil, refuse(wire.CodePermissionDenied, "%s is no current incarnation of a granted row", caller)
	case !row.Has(userauth.ScopeSpawn):
		return nil, refuse(wire.CodePermissionDenied, "the row of %s holds no spawn scope", caller.Principal)
	}
	return row, nil
}

// EnrollHosted enrolls a managed agent for the host's own manager to launch on behalf of parent,
// which must hold spawn (SpawnRow): a row of parent's owner named e.Name, holding scope (the
// agent's capabilities), within parent's row. Retire it with RetireHosted.
func (h *Host) EnrollHosted(ctx context.Context, parent wire.Lifecycle, e Enrollment, scope []string) (*HostedAgent, error) {
	if _, err := h.SpawnRow(ctx, parent); err != nil {
		return nil, err
	}
	if meshwire.IsRemoteManagerActor(e.Name) || e.Name == parent.Principal.Actor() {
		return nil, refuse(wire.CodePermissionDenied, "an agent may not take the name %s", e.Name)
	}
	row, token, err := h.enrollManaged(ctx, parent.Principal, &e, scope, "spawned by the host's manager for "+parent.Principal.String(), nil,
		func(ctx context.Context, t Target) error { return h.RetireHosted(ctx, t) })
	if err != nil {
		return nil, err
	}
	return &HostedAgent{Principal: row.Principal(), LifecycleUID: row.LifecycleUID, ActorToken: token,
		Grant: AgentGrant{Role: row.Role, AllowSubscribe: row.AllowSubscribe, AllowPublish: row.AllowPublish}}, nil
}

// RetireHosted ends a managed agent the host's own manager ran: its row deleted, if it is still
// this incarnation's, and its lifecycle retired with its credentials and durables.
func (h *Host) RetireHosted(ctx context.Context, t Target) error {
	return retireAgent(ctx, h.Ledger, nil, h.Managed, "", t)
}

// currentRow returns the ledger row of caller when it is a current incarnation (a person's
// interactive row, or a managed agent's within its envelope); nil otherwise. A people ledger that
// did not answer is an unavailable refusal, never taken for a missing row: a caller retries it,
// or moves on to another node of a cluster, rather than being denied.
func (h *Host) currentRow(ctx context.Context, caller wire.Lifecycle) (*userauth.Row, error) {
	row, err := h.Managed.Get(ctx, caller.Principal.Owner(), caller.Principal.Actor())
	switch {
	case errors.Is(err, userauth.ErrUnavailable):
		return nil, refuse(wire.CodeUnavailable, "read the row of %s: %v", caller.Principal, err)
	case err != nil || row.LifecycleUID != caller.UID:
		return nil, nil
	}
	if row.Kind == userauth.KindManaged {
		switch err := h.Managed.CheckEnvelope(ctx, row); {
		case errors.Is(err, userauth.ErrUnavailable):
			return nil, refuse(wire.CodeUnavailable, "check the envelope of %s: %v", caller.Principal, err)
		case err != nil:
			return nil, nil
		}
	}
	return row, nil
}
