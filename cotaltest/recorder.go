package cotaltest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gocotal/cotal"
)

// RecorderWait bounds how long Recorder.Next waits for a delivery: one that should come within a
// round trip or two. The bound only keeps a broken test from hanging.
const RecorderWait = 10 * time.Second

// Recorder is a cotal.Handler that records every delivery it surfaces, as
// httptest.ResponseRecorder records a response: pass its Handle to cotal.WithHandler, then read
// what arrived. Every delivery is surfaced, so a durable one is acknowledged. Create one with
// NewRecorder; it is safe for concurrent use.
type Recorder struct {
	mu   sync.Mutex
	got  []*cotal.Delivery // guarded by mu
	more chan struct{}     // signalled after each delivery
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{more: make(chan struct{}, 1)} }

// Handle records d; it is a cotal.Handler and never fails.
func (r *Recorder) Handle(_ context.Context, d *cotal.Delivery) error {
	r.mu.Lock()
	r.got = append(r.got, d)
	r.mu.Unlock()
	select {
	case r.more <- struct{}{}:
	default:
	}
	return nil
}

// Deliveries returns what was recorded so far, in arrival order.
func (r *Recorder) Deliveries() []*cotal.Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// Next waits up to RecorderWait for a recorded delivery that match accepts and returns the first
// one; it fails t, naming what, when none comes.
func (r *Recorder) Next(t testing.TB, what string, match func(*cotal.Delivery) bool) *cotal.Delivery {
	t.Helper()
	deadline := time.NewTimer(RecorderWait)
	defer deadline.Stop()
	for {
		for _, d := range r.Deliveries() {
			if match(d) {
				return d
			}
		}
		select {
		case <-r.more:
		case <-deadline.C:
			t.Fatalf("no %s within %s; %d other deliveries", what, RecorderWait, len(r.Deliveries()))
			return nil
		}
	}
}

// Text returns a match for Next: a delivery whose first part's text is s.
func Text(s string) func(*cotal.Delivery) bool {
	return func(d *cotal.Delivery) bool { return len(d.Message.Parts) > 0 && d.Message.Parts[0].Text == s }
}
