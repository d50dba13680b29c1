package authstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gocotal/cotal/wire"
)

// The plane claim (SPEC §13.1): one auth service per space admits connects and issues authority.
// It holds the key "plane" of the auth store, written create-only with a TTL and refreshed well
// within it, so a second service refuses to start while the first lives, and a service that died
// without releasing it leaves the plane free once the TTL runs out.

const keyPlane = "plane"

// ErrPlaneHeld is a plane another auth service holds.
var ErrPlaneHeld = errors.New("another auth service holds the plane")

// PlaneClaim is the plane row: who holds it.
type PlaneClaim struct {
	Holder    string           `json:"holder"`
	Host      string           `json:"host"`
	PID       int              `json:"pid"`
	ClaimedAt wire.EpochMillis `json:"claimedAt"`
}

// ClaimPlane writes c as the plane's holder for ttl and returns the row's revision. A plane held
// (its row present and unexpired) is ErrPlaneHeld, naming the holder.
func (s *Store) ClaimPlane(ctx context.Context, c PlaneClaim, ttl time.Duration) (uint64, error) {
	r, err := s.read(ctx, keyPlane)
	if err != nil {
		return 0, err
	}
	var rev uint64
	if r != nil {
		if !r.Deleted {
			var have PlaneClaim
			if err := decodeStrict(r.Value, &have); err != nil {
				return 0, fmt.Errorf("%w: %s: %v", ErrCorrupt, keyPlane, err)
			}
			return 0, fmt.Errorf("%w: %s (pid %d on %s, since %s)", ErrPlaneHeld, have.Holder, have.PID, have.Host, have.ClaimedAt.Time().UTC().Format(time.RFC3339))
		}
		rev = r.Revision
	}
	return s.writePlane(ctx, c, rev, ttl)
}

// Plane returns the plane's holder, nil when the plane is free.
func (s *Store) Plane(ctx context.Context) (*PlaneClaim, error) {
	r, err := s.read(ctx, keyPlane)
	if err != nil || r == nil || r.Deleted {
		return nil, err
	}
	var have PlaneClaim
	if err := decodeStrict(r.Value, &have); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, keyPlane, err)
	}
	return &have, nil
}

// RefreshPlane rewrites the claim at rev for another ttl; a plane someone else took is
// ErrConflict.
func (s *Store) RefreshPlane(ctx context.Context, c PlaneClaim, rev uint64, ttl time.Duration) (uint64, error) {
	return s.writePlane(ctx, c, rev, ttl)
}

// ReleasePlane removes the claim written at rev.
func (s *Store) ReleasePlane(ctx context.Context, rev uint64) error {
	return s.prune(ctx, keyPlane, rev)
}

func (s *Store) writePlane(ctx context.Context, c PlaneClaim, rev uint64, ttl time.Duration) (uint64, error) {
	raw, _ := json.Marshal(c) // strings and numbers always encode
	return s.write(ctx, keyPlane, raw, rev, ttl)
}
