package cotal_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
)

// watchEnd bounds how long the broker takes to end a watch whose stream went away: the watch's
// ordered consumer notices two missed idle heartbeats, five seconds apart, then fails to
// recreate itself.
const watchEnd = 30 * time.Second

// awaitReport waits until c reports an error matching target on Errors, and fails t otherwise.
func awaitReport(t *testing.T, c *cotal.Client, target error, within time.Duration) error {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case err := <-c.Errors():
			if errors.Is(err, target) {
				return err
			}
		case <-deadline:
			t.Fatalf("no %v reported within %s", target, within)
		}
	}
}

// awaitPeer waits until the roster reports, on Changes, a change of key that cond accepts.
func awaitPeer(t *testing.T, r *cotal.Roster, key string, within time.Duration, cond func(cotal.Peer) bool) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case p := <-r.Changes():
			if p.Key == key && cond(p) {
				return
			}
		case <-r.Done():
			t.Fatalf("the roster ended while waiting for a change of %s", key)
		case <-deadline:
			t.Fatalf("no change of %s reported within %s", key, within)
		}
	}
}

// awaitPeers waits until the roster has reported, on Changes, a change of each key that its
// condition accepts, in any order.
func awaitPeers(t *testing.T, r *cotal.Roster, within time.Duration, want map[string]func(cotal.Peer) bool) {
	t.Helper()
	deadline := time.After(within)
	for len(want) > 0 {
		select {
		case p := <-r.Changes():
			if cond, ok := want[p.Key]; ok && cond(p) {
				delete(want, p.Key)
			}
		case <-r.Done():
			t.Fatalf("the roster ended while waiting for changes of %d peers", len(want))
		case <-deadline:
			t.Fatalf("no change of %d peers reported within %s: %v", len(want), within, keysOf(want))
		}
	}
}

func keysOf(m map[string]func(cotal.Peer) bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// drain discards the changes the roster has reported so far.
func drain(r *cotal.Roster) {
	for {
		select {
		case <-r.Changes():
		default:
			return
		}
	}
}

func online(p cotal.Peer) bool { return p.Online }
func gone(p cotal.Peer) bool   { return p.Presence == nil && !p.Online }

// TestRosterWatchesAgainAfterTheBrokerEndsIt: the broker ends a roster's watch (the presence
// stream, and the watch's consumer with it, is deleted). The roster reports the restart, not its
// end, and watches again once the stream is back: a peer still heartbeating is online again, a
// peer that left while the watch was down is reported gone rather than kept, a peer that arrives
// afterwards is reported, and Done stays open until the client closes.
func TestRosterWatchesAgainAfterTheBrokerEndsIt(t *testing.T) {
	if testing.Short() {
		t.Skip("long (waits out the broker ending a consumer): runs without -short")
	}
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	hb := cotal.WithHeartbeat(200 * time.Millisecond)
	alice, _ := agent(t, m, ledger.Request{Name: "alice"}, hb)
	bob, _ := agent(t, m, ledger.Request{Name: "bob"}, hb)
	carol, _ := agent(t, m, ledger.Request{Name: "carol"}, hb)
	roster, err := alice.Roster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer roster.Stop()
	for _, p := range []*cotal.Client{bob, carol} {
		if len(roster.Find(p.Principal().String())) != 1 {
			t.Fatalf("%s is not in the roster", p.Principal())
		}
	}

	presence := m.Space.PresenceBucket().Stream()
	teardown := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileTeardown, Name: "teardown"}))
	if err := teardown.JS.DeleteStream(ctx, presence); err != nil {
		t.Fatal(err)
	}
	awaitReport(t, alice, cotal.ErrRosterRestarted, watchEnd)
	select {
	case <-roster.Done():
		t.Fatal("the roster ended when the broker ended its watch")
	default:
	}
	// carol leaves while there is no watch; her final offline row has nowhere to go.
	if err := carol.Close(context.WithoutCancel(ctx)); err == nil {
		t.Log("carol's offline row was stored by a stream that should be gone")
	}
	drain(roster) // what comes next, the new watch delivered
	prov := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileProvisioner, Name: "setup"}))
	if _, err := space.Provision(ctx, prov.JS, m.Space, wire.ChannelDefaults{DeliveryClass: wire.ClassDurable}); err != nil {
		t.Fatal(err)
	}

	// The new watch reports bob online and carol gone in whichever order its replay meets them.
	awaitPeers(t, roster, wait+watchEnd, map[string]func(cotal.Peer) bool{
		bob.Principal().String(): online, carol.Principal().String(): gone})
	dave, _ := agent(t, m, ledger.Request{Name: "dave"}, hb)
	awaitPeer(t, roster, dave.Principal().String(), wait, online)
	if ps := roster.Find("bob"); len(ps) != 1 || !ps[0].Online {
		t.Errorf("bob in the roster after the restart: %+v", ps)
	}
	select {
	case <-roster.Done():
		t.Fatal("the roster ended")
	default:
	}
}

// TestRosterEndsWhenItsClientCloses: a roster whose client closes ends, and says so with
// ErrRosterEnded; it is the one end that is reported.
func TestRosterEndsWhenItsClientCloses(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	alice, _ := agent(t, m, ledger.Request{Name: "alice"})
	roster, err := alice.Roster(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	errs := alice.Errors()
	if err := alice.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-roster.Done():
	case <-time.After(wait):
		t.Fatal("Done did not close after the client closed")
	}
	for {
		select {
		case err := <-errs:
			if errors.Is(err, cotal.ErrRosterRestarted) {
				t.Errorf("a closed client's roster reported a restart: %v", err)
			}
			if errors.Is(err, cotal.ErrRosterEnded) {
				return
			}
		default:
			t.Fatal("the end of the roster was not reported as ErrRosterEnded")
		}
	}
}

// TestRosterSurvivesItsConsumerDeleted: the broker deletes the consumer of a roster's watch (as the
// warden does to a consumer it judges). The roster goes on reporting presence changes: a peer that
// arrives afterwards is reported.
func TestRosterSurvivesItsConsumerDeleted(t *testing.T) {
	if testing.Short() {
		t.Skip("long (waits out the broker ending a consumer): runs without -short")
	}
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	alice, _ := agent(t, m, ledger.Request{Name: "alice"}, cotal.WithHeartbeat(200*time.Millisecond))
	roster, err := alice.Roster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer roster.Stop()
	warden := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileWarden, Name: "warden"}))
	presence, err := warden.JS.Stream(ctx, m.Space.PresenceBucket().Stream())
	if err != nil {
		t.Fatal(err)
	}
	deleted := 0
	list := presence.ListConsumers(ctx)
	for info := range list.Info() {
		if err := presence.DeleteConsumer(ctx, info.Name); err != nil {
			t.Fatal(err)
		}
		deleted++
	}
	if err := list.Err(); err != nil {
		t.Fatal(err)
	}
	if deleted == 0 {
		t.Fatal("no consumer of the presence stream to delete")
	}
	drain(roster)
	bob, _ := agent(t, m, ledger.Request{Name: "bob"}, cotal.WithHeartbeat(200*time.Millisecond))
	awaitPeer(t, roster, bob.Principal().String(), wait+watchEnd, online)
}
