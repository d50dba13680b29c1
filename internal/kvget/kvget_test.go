package kvget_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
)

// TestReadsRideOutClaimPushes reads a key from several goroutines while the ledger revokes one
// credential after another. Each revocation pushes new account claims, and while the broker
// applies them the account's JetStream API import is gone for a moment: a single request then
// meets no responder (counted, for the log), but not one read through kvget may fail.
func TestReadsRideOutClaimPushes(t *testing.T) {
	if raceDetector {
		// nats-server 2.15.2 races with itself here: a claims push re-enables the account's
		// JetStream service imports (Account.enableAllJetStreamServiceImportsAndMappings) while a
		// client's request reads them (client.processServiceImport), and the race detector flags
		// the embedded broker, not this package. .ci/run runs this test without it.
		t.Skip("the embedded nats-server races with itself under claim pushes; run without -race")
	}
	m := meshtest.Start(t)
	l := m.Ledger("")
	ctx := t.Context()
	prov := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileProvisioner, Name: "prov"}))
	b := m.Space.ChannelsBucket()
	var stop atomic.Bool
	var reads, bare atomic.Int64
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for !stop.Load() {
				if _, err := kvget.Get(ctx, prov.Conn, b, "none"); !errors.Is(err, kvget.ErrNotFound) {
					t.Errorf("read %d: %v", reads.Load(), err)
					return
				}
				reads.Add(1)
			}
		})
	}
	wg.Go(func() {
		body := []byte(`{"last_by_subj":"` + b.Subject("none") + `"}`)
		for !stop.Load() {
			if _, err := prov.RequestWithContext(ctx, jsapi.MsgGet+b.Stream(), body); errors.Is(err, nats.ErrNoResponders) {
				bare.Add(1)
			}
		}
	})
	const pushes = 150
	for range pushes {
		cred := m.Mint(t, ledger.Request{Profile: authority.ProfileMembership, Name: "gone"})
		if _, err := l.RevokeUserKey(context.WithoutCancel(ctx), cred.PublicKey, "test"); err != nil {
			t.Error(err)
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d reads over %d claim pushes; %d single requests met no responder", reads.Load(), pushes, bare.Load())
}
