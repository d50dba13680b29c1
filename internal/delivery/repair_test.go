package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/delivery"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
)

// TestLeaseSurvivesARepair: the mesh's warden undoes a foreign row by writing the key's last
// valid row back, at a new revision. The daemon's next renewal finds its own row there and keeps
// the lease, instead of standing by until the lease lapses.
func TestLeaseSurvivesARepair(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	c := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileDelivery, Name: "keeper"}))
	d, err := delivery.New(c.Conn, delivery.Config{Space: m.Space, Holder: "local.keeper", Renew: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })

	inspector := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileWarden, Name: "inspector"})).Conn
	b := meshwire.DeliveryBucket(m.Space)
	read := func() (*meshwire.DeliveryLease, uint64) {
		e, err := kvget.Get(ctx, inspector, b, meshwire.LeaseKey(0))
		if err != nil || e.Deleted { // kvget.ErrNotFound when there is no lease
			return nil, 0
		}
		l, err := meshwire.DecodeDeliveryLease(e.Value)
		if err != nil {
			return nil, 0
		}
		return l, e.Revision
	}
	deadline := time.Now().Add(wait)
	var held *meshwire.DeliveryLease
	for held == nil || !held.Ready {
		if time.Now().After(deadline) {
			t.Fatal("the daemon never held its lease")
		}
		held, _ = read()
		time.Sleep(20 * time.Millisecond)
	}

	// The repair: the same row, written again at a new revision.
	js, err := jetstream.New(inspector)
	if err != nil {
		t.Fatal(err)
	}
	// The daemon renews every 100 ms: a renewal between the read and the write is a conflict,
	// and the repair is read and made again.
	for try := 1; ; try++ {
		e, err := kvget.Get(ctx, inspector, b, meshwire.LeaseKey(0))
		if err != nil {
			t.Fatalf("read the lease: %v", err)
		}
		_, err = js.Publish(ctx, b.Subject(meshwire.LeaseKey(0)), e.Value, jetstream.WithExpectLastSequencePerSubject(e.Revision))
		if err == nil {
			break
		}
		if !jsapi.Conflict(err) || try == 20 {
			t.Fatalf("write the lease back: %v", err)
		}
	}
	repaired := time.Now()

	// Renewals go on every 100 ms; without adopting the new revision the daemon stands by for
	// the lease's 30 s TTL and nobody renews it.
	deadline = time.Now().Add(5 * time.Second)
	for {
		l, _ := read()
		if l != nil && l.Incarnation == held.Incarnation && l.Since.Time().After(repaired) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not renew its lease after the repair: %+v", l)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
