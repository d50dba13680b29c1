package authstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// Checkup is the outcome of Check: how many rows were read and what was wrong with any.
type Checkup struct {
	Rows     int
	Problems []error
}

// Check reads every row of the auth store and reports each one that is malformed, for
// `cotal doctor auth` and sweeps: a bad row is collected and reported, never a reason to stop
// checking the others. The store's shape was proven when it was opened.
func (s *Store) Check(ctx context.Context) (*Checkup, error) {
	keys, err := s.keys(ctx, ">")
	if err != nil {
		return nil, fmt.Errorf("list the auth store: %w", err)
	}
	c := &Checkup{}
	for _, key := range keys {
		c.Rows++
		if err := s.checkRow(ctx, key); err != nil {
			c.Problems = append(c.Problems, err)
		}
	}
	return c, nil
}

func (s *Store) checkRow(ctx context.Context, key string) error {
	switch {
	case strings.HasPrefix(key, keyGate):
		_, err := s.ObserveGate(ctx, wire.LifecycleUID(strings.TrimPrefix(key, keyGate)))
		return err
	case strings.HasPrefix(key, keyHead):
		p, err := wire.ParsePrincipal(strings.TrimPrefix(key, keyHead))
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
		}
		h, _, err := s.Head(ctx, p)
		if err == nil && h != nil && (h.Owner != p.Owner() || h.Actor != p.Actor()) {
			err = fmt.Errorf("%w: %s names %s.%s", ErrCorrupt, key, h.Owner, h.Actor)
		}
		return err
	case strings.HasPrefix(key, keyUID):
		r, err := s.readNeverDeleted(ctx, key)
		if err != nil || r == nil {
			return err
		}
		var res uidReservation
		if err := decodeStrict(r.Value, &res); err != nil || keyUID+string(res.LifecycleUID) != key {
			return fmt.Errorf("%w: %s is not a reservation of its lifecycle", ErrCorrupt, key)
		}
		return nil
	case strings.HasPrefix(key, keyCred):
		u, id, ok := strings.Cut(strings.TrimPrefix(key, keyCred), ".")
		if !ok {
			return fmt.Errorf("%w: %s is not cred.<lifecycleUid>.<credentialId>", ErrCorrupt, key)
		}
		_, _, err := s.credential(ctx, wire.LifecycleUID(u), id)
		return err
	case strings.HasPrefix(key, meshwire.EndpointGatePrefix), strings.HasPrefix(key, keyEpCred):
		return s.checkEndpointRow(ctx, key)
	case strings.HasPrefix(key, keySession):
		_, err := s.readSession(ctx, key)
		return err
	case strings.HasPrefix(key, keyStageSession):
		r, err := s.readNeverDeleted(ctx, key)
		if err != nil || r == nil {
			return err
		}
		var pin stagePin
		if err := decodeStrict(r.Value, &pin); err != nil || !strings.HasSuffix(key, "."+string(pin.Party)) {
			return fmt.Errorf("%w: %s is not a stage pin of its half", ErrCorrupt, key)
		}
		return nil
	}
	return nil // rows of planes this implementation does not own
}
