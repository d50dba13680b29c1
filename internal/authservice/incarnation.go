package authservice

import (
	"context"
	"errors"
	"fmt"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/userauth"
)

// grant writes row as a new incarnation of its person's row (People.Grant) and readies it: its
// durables are made (its DM inbox, its delivery queue, its role's task queue) and its read ACL
// recorded, so the person's clients receive their direct messages durably from the grant on, as
// an agent's do. The incarnation prev held, when there was one, is retired first, with its
// durables: its bearers are refused from then on. Each step may be taken again, so a grant that
// failed half-way is completed by the next: a retired incarnation is retired again at no cost,
// and one never readied is retired as prev.
//
// row is written only over prev as it was read (People.GrantOver): when the row changed since,
// grant fails matching userauth.ErrChanged; Change reads it again and grants over it.
func (s *State) grant(ctx context.Context, l *ledger.Ledger, prev, row *userauth.Row) (*userauth.Row, error) {
	if prev != nil {
		if err := s.retire(ctx, l, prev); err != nil {
			return nil, err
		}
	}
	got, err := s.People.GrantOver(ctx, prev, row)
	if err != nil {
		return nil, err
	}
	// The grant that wrote prev may have readied it after the retirement above (it read the
	// row before this write): retired again now that the row names got, it stays retired.
	if prev != nil {
		if err := s.retire(ctx, l, prev); err != nil {
			return nil, err
		}
	}
	cred := &authority.Credential{Principal: got.Principal(), LifecycleUID: got.LifecycleUID}
	req := ledger.Request{Owner: got.Owner, Name: got.Actor, Role: got.Role, AllowSubscribe: got.AllowSubscribe}
	var perr error
	for range provisionTries { // a concurrent retirement of got can fail one (its ACL row moved)
		if perr = l.ProvisionAgent(ctx, cred, req); perr == nil {
			break
		}
	}
	// A change that superseded got meanwhile (it read got, and its row carries got's changes on)
	// retired got, perhaps before the provisioning above: got is retired again, for good.
	now, err := s.People.Get(ctx, got.Owner, got.Actor)
	if errors.Is(err, userauth.ErrNoRow) || err == nil && now.LifecycleUID != got.LifecycleUID {
		return got, s.retire(ctx, l, got)
	}
	if perr != nil {
		return nil, fmt.Errorf("provision the durables of %s: %w", got.Principal(), perr)
	}
	return got, nil
}

// provisionTries bounds how often grant makes an incarnation's durables.
const provisionTries = 3

// changeTries bounds how often Change reads a row that other changes keep replacing.
const changeTries = 8

// Change grants the person (owner, actor) a new incarnation of their row, as change makes it from
// the row they hold (nil when none), and returns the row it replaced and the one it wrote. A row
// another change replaced between the read and the write is read again and changed again, so
// concurrent changes (two operators granting one person on two nodes) all take effect, each
// retiring the incarnation it replaced.
func (s *State) Change(ctx context.Context, l *ledger.Ledger, owner, actor string, change func(have *userauth.Row) (*userauth.Row, error)) (prev, got *userauth.Row, err error) {
	for try := 1; ; try++ {
		prev, err = s.People.Get(ctx, owner, actor)
		switch {
		case errors.Is(err, userauth.ErrNoRow):
			prev = nil
		case err != nil:
			return nil, nil, err
		}
		row, err := change(prev)
		if err != nil {
			return nil, nil, err
		}
		got, err = s.grant(ctx, l, prev, row)
		if !errors.Is(err, userauth.ErrChanged) || try == changeTries {
			return prev, got, err
		}
	}
}
