package warden_test

import (
	"context"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/warden"
)

// TestWardenReadyOverAnExpiredBucket: a bucket whose every row has aged out (the manager bucket
// once a killed node's lease has lapsed and no manager has written since) holds nothing, yet its
// last sequence is past zero. A warden started then must still count it loaded, or it never
// watches and a restarted node never comes up.
func TestWardenReadyOverAnExpiredBucket(t *testing.T) {
	meshtest.Long(t, "waits out a bucket TTL")
	m := meshtest.Start(t)
	ctx := t.Context()
	inspector := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileWarden, Name: "inspector"})).Conn
	js := mustJS(t, inspector)
	bucket := meshwire.ManagerBucket(m.Space)
	if _, err := js.Publish(ctx, bucket.Subject("lapsed"), []byte(`{"v":1}`)); err != nil {
		t.Fatalf("write a lease row: %v", err)
	}
	stream, err := js.Stream(ctx, bucket.Stream())
	if err != nil {
		t.Fatal(err)
	}
	// The row ages out after meshwire.ManagerLeaseTTL.
	meshtest.Eventually(t, meshwire.ManagerLeaseTTL+20*time.Second, "the manager bucket emptied by age", func() bool {
		info, err := stream.Info(ctx)
		return err == nil && info.State.Msgs == 0 && info.State.LastSeq > 0
	})

	nc := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileWarden, Name: "restarted"})).Conn
	w, err := warden.New(nc, warden.Config{Space: m.Space})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(rctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the warden ended with %v", err)
		}
	}()
	select {
	case <-w.Ready():
	case err := <-done:
		t.Fatalf("the warden ended before it watched: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the warden never counted the expired bucket loaded")
	}
}
