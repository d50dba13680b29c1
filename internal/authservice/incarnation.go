package authservice

import (
	"context"
	"fmt"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/userauth"
)

// Grant writes row as a new incarnation of its person's row (People.Grant) and readies it: its
// durables are made (its DM inbox, its delivery queue, its role's task queue) and its read ACL
// recorded, so the person's clients receive their direct messages durably from the grant on, as
// an agent's do. The incarnation prev held, when there was one, is retired first, with its
// durables: its bearers are refused from then on. Each step may be taken again, so a grant that
// failed half-way is completed by the next: a retired incarnation is retired again at no cost,
// and one never readied is retired as prev.
func (s *State) Grant(ctx context.Context, l *ledger.Ledger, prev, row *userauth.Row) (*userauth.Row, error) {
	if prev != nil {
		if err := s.retire(ctx, l, prev); err != nil {
			return nil, err
		}
	}
	got, err := s.People.Grant(ctx, row)
	if err != nil {
		return nil, err
	}
	cred := &authority.Credential{Principal: got.Principal(), LifecycleUID: got.LifecycleUID}
	req := ledger.Request{Owner: got.Owner, Name: got.Actor, Role: got.Role, AllowSubscribe: got.AllowSubscribe}
	if err := l.ProvisionAgent(ctx, cred, req); err != nil {
		return nil, fmt.Errorf("provision the durables of %s: %w", got.Principal(), err)
	}
	return got, nil
}
