package authservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/remotemgr"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/wire"
)

// managers chooses the manager instance a manager-caller bearer addresses (SPEC §10), from the
// ledger's gates and serving credentials and the host's registry of remote managers. A person
// with a remote manager registered here addresses only their own remote managers, even while
// none of them is live: their calls never fall back to the host's manager. A person without one
// addresses the host's own manager. Exactly one live candidate is chosen unless the caller names
// one.
type managers struct {
	ledger   *ledger.Ledger
	registry *remotemgr.Registry
	log      *slog.Logger
}

// errNoManager is a refusal: no live candidate, or a requested instance that is not one.
var errNoManager = errors.New("no manager instance this owner may address is live")

// SelectManager implements userauth.ManagerSelector.
func (m managers) SelectManager(ctx context.Context, owner string, requested wire.LifecycleUID) (wire.LifecycleUID, error) {
	live, err := m.candidates(ctx, owner)
	if err != nil {
		return "", err
	}
	switch {
	case requested != "" && slices.Contains(live, requested):
		return requested, nil
	case requested != "":
		return "", fmt.Errorf("%w: %s is not one of the %d live", errNoManager, requested, len(live))
	case len(live) == 1:
		return live[0], nil
	case len(live) == 0:
		return "", errNoManager
	}
	return "", fmt.Errorf("%d manager instances are live for %s (%v): the caller must name one", len(live), owner, live)
}

// CheckManager implements userauth.ManagerSelector.
func (m managers) CheckManager(ctx context.Context, owner string, instance wire.LifecycleUID) error {
	_, err := m.SelectManager(ctx, owner, instance)
	return err
}

// candidates returns the live instances owner may address, sorted.
func (m managers) candidates(ctx context.Context, owner string) ([]wire.LifecycleUID, error) {
	regs, err := m.registry.Of(ctx, owner, "")
	if err != nil {
		return nil, fmt.Errorf("%w: read the remote managers of %s: %v", userauth.ErrUnavailable, owner, err)
	}
	remote := len(regs) > 0
	var ids []wire.LifecycleUID
	for _, r := range regs {
		ids = append(ids, wire.LifecycleUID(r.InstanceID))
	}
	if !remote {
		if ids, err = m.ledger.RemoteManagers().Instances(ctx); err != nil {
			return nil, fmt.Errorf("%w: list the manager instances: %v", userauth.ErrUnavailable, err)
		}
	}
	var live []wire.LifecycleUID
	for _, id := range ids {
		if !remote {
			// A remote manager is never the host's, whoever registered it: its rows are not read
			// for a host-manager caller.
			if reg, err := m.registry.Get(ctx, string(id)); err != nil || reg != nil {
				continue
			}
		}
		p, ok, err := m.ledger.RemoteManagers().Live(ctx, id)
		if err != nil {
			// One unreadable instance is not live; it does not deny the others.
			m.log.Warn("a manager instance's gate or credentials could not be read", "instance", id, "err", err)
			continue
		}
		// A remote manager serves as its owner's serve identity; the host's own as the host.
		if ok && (remote && p.String() == owner+"."+meshwire.RemoteManagerActorsOf(id).Serve || !remote && p.Owner() == wire.DevOwner) {
			live = append(live, id)
		}
	}
	slices.Sort(live)
	return live, nil
}
