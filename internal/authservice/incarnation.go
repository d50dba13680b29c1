package authservice

import (
	"context"
	"fmt"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/userauth"
)

// Incarnate readies the incarnation a grant just wrote to row: its durables are made (its DM
// inbox, its delivery queue, its role's task queue) and its read ACL recorded, so the person's
// clients receive their direct messages durably from the grant on, as an agent's do. The
// incarnation prev held before, when it differs, is retired with its durables: its bearers are
// refused from then on.
func (s *State) Incarnate(ctx context.Context, l *ledger.Ledger, prev, row *userauth.Row) error {
	if prev != nil && prev.LifecycleUID != row.LifecycleUID {
		if err := s.retire(ctx, l, prev); err != nil {
			return err
		}
	}
	cred := &authority.Credential{Principal: row.Principal(), LifecycleUID: row.LifecycleUID}
	req := ledger.Request{Owner: row.Owner, Name: row.Actor, Role: row.Role, AllowSubscribe: row.AllowSubscribe}
	if err := l.ProvisionAgent(ctx, cred, req); err != nil {
		return fmt.Errorf("provision the durables of %s: %w", row.Principal(), err)
	}
	return nil
}
