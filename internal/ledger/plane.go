package ledger

import (
	"context"
	"errors"
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
	stop  context.CancelFunc
	done  chan struct{}

	mu  sync.Mutex
	rev uint64 // guarded by mu
}

// HoldPlane claims the space's auth plane for holder (authority.ErrPlaneHeld while another
// service holds it) and keeps it refreshed; lost is called, once, if a refresh finds the claim
// gone to someone else or cannot be made before it expires: the holder must then stop acting as
// the space's auth service.
func (l *Ledger) HoldPlane(ctx context.Context, holder string, lost func(error)) (*PlaneHold, error) {
	host, _ := os.Hostname()
	c := authstore.PlaneClaim{Holder: holder, Host: host, PID: os.Getpid(), ClaimedAt: wire.MillisOf(time.Now())}
	s, err := l.store.get(ctx)
	if err != nil {
		return nil, err
	}
	rev, err := s.ClaimPlane(ctx, c, PlaneTTL)
	if err != nil {
		return nil, err
	}
	rctx, stop := context.WithCancel(context.Background())
	h := &PlaneHold{l: l, claim: c, rev: rev, stop: stop, done: make(chan struct{})}
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
		case errors.Is(err, authstore.ErrConflict) || time.Since(written) > PlaneTTL*2/3:
			lost(err)
			return
		}
	}
}

func (h *PlaneHold) once(ctx context.Context) error {
	s, err := h.l.store.get(ctx)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	rev, err := s.RefreshPlane(ctx, h.claim, h.rev, PlaneTTL)
	if err == nil {
		h.rev = rev
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
	return s.ReleasePlane(ctx, h.rev)
}
