package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/wire"
)

// PlaneTTL is how long a plane claim stands unrefreshed: an auth service that died leaves the
// plane free after it. The holder refreshes it every third of it.
const PlaneTTL = 30 * time.Second

// PlaneHold is a held plane claim, refreshed until Release.
type PlaneHold struct {
	l     *Ledger
	claim authstore.PlaneClaim
	// shared marks a claim the auth services of a cluster's authority nodes hold together.
	shared bool
	stop   context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	rev uint64 // guarded by mu; 0 while a co-holder holds a shared claim
}

// HoldPlane claims the space's auth plane for holder (authority.ErrPlaneHeld while another
// service holds it) and keeps it refreshed; lost is called, once, if a refresh finds the claim
// gone to someone else or cannot be made before it expires: the holder must then stop acting as
// the space's auth service.
func (l *Ledger) HoldPlane(ctx context.Context, holder string, lost func(error)) (*PlaneHold, error) {
	return l.holdPlane(ctx, holder, false, lost)
}

// SharePlane is HoldPlane for the auth services of a cluster's authority nodes, which serve the
// space as one and share holder: whichever claims the plane first holds it, the others stand by as
// its co-holders, and one of them claims it once the holder's claim lapses. A plane held under
// another name is refused, and lost is called if one ever is.
func (l *Ledger) SharePlane(ctx context.Context, holder string, lost func(error)) (*PlaneHold, error) {
	return l.holdPlane(ctx, holder, true, lost)
}

func (l *Ledger) holdPlane(ctx context.Context, holder string, shared bool, lost func(error)) (*PlaneHold, error) {
	host, _ := os.Hostname()
	c := authstore.PlaneClaim{Holder: holder, Host: host, PID: os.Getpid(), ClaimedAt: wire.MillisOf(time.Now())}
	rctx, stop := context.WithCancel(context.Background())
	h := &PlaneHold{l: l, claim: c, shared: shared, stop: stop, done: make(chan struct{})}
	if err := h.once(ctx); err != nil {
		stop()
		return nil, err
	}
	go h.refresh(rctx, lost)
	return h, nil
}

// refresh rewrites the claim every third of PlaneTTL until ctx ends; a claim it cannot keep is
// reported to lost.
func (h *PlaneHold) refresh(ctx context.Context, lost func(error)) {
	defer close(h.done)
	t := time.NewTicker(PlaneTTL / 3)
	defer t.Stop()
	written := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := h.once(ctx)
		switch {
		case err == nil:
			written = time.Now()
		case ctx.Err() != nil:
			return
		case errors.Is(err, authstore.ErrConflict) || errors.Is(err, authstore.ErrPlaneHeld):
			lost(err) // another service holds it
			return
		case !h.shared && time.Since(written) > PlaneTTL*2/3:
			// A lone holder that cannot refresh may have let it lapse to another service. The
			// nodes of a cluster hold it under one name: a store that does not answer for a while
			// hands nothing to anyone else, and the claim is taken again once it answers.
			lost(err)
			return
		}
	}
}

// once claims the plane (a shared claim a co-holder holds is left to it) or refreshes the claim
// held.
func (h *PlaneHold) once(ctx context.Context) error {
	s, err := h.l.store.get(ctx)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var rev uint64
	if h.rev == 0 {
		rev, err = s.ClaimPlane(ctx, h.claim, PlaneTTL)
	} else {
		rev, err = s.RefreshPlane(ctx, h.claim, h.rev, PlaneTTL)
	}
	if err == nil {
		h.rev = rev
		return nil
	}
	if h.shared && (errors.Is(err, authstore.ErrPlaneHeld) || errors.Is(err, authstore.ErrConflict)) {
		have, rerr := s.Plane(ctx)
		if rerr != nil {
			return rerr
		}
		if have == nil || have.Holder == h.claim.Holder {
			h.rev = 0 // a co-holder holds it, or it lapsed: claimed again at the next tick
			return nil
		}
		return fmt.Errorf("%w: %s holds it", authstore.ErrPlaneHeld, have.Holder)
	}
	return err
}

// Release stops the refreshes and removes the claim, so the next service need not wait for it to
// expire.
func (h *PlaneHold) Release(ctx context.Context) error {
	h.stop()
	<-h.done
	s, err := h.l.store.get(ctx)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.rev == 0 {
		return nil // a co-holder holds the shared claim
	}
	return s.ReleasePlane(ctx, h.rev)
}
