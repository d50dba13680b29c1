package faulttest

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// TestDeliveryDaemonKilledMidFanout runs the mesh without its in-process delivery daemon and two
// `cotal deliver` processes beside it: one holds the space's delivery lease, the other stands by.
// Three members of a durable channel take its posts only through the backstop (they joined
// durably, then came back without a live subscription), while a poster posts a burst; the
// active daemon is killed with SIGKILL part way through the burst's fan-out, the poster goes on
// posting through the outage, and a last burst follows the takeover. The standby must take the
// lease once it lapses (meshwire.DeliveryLeaseTTL) and every stored post must reach every member
// exactly once after de-duplication by id: none lost, duplicates counted and logged.
//
// Counts: a 150-post burst, posts every 250 ms during the outage, and a 50-post burst after the
// takeover by default; 1,000 and 500 with COTAL_SOAK=1. CHAT keeps the newest 1,000 messages per
// subject (max_msgs_per_subject, discard old; the poster on the channel is one subject): with the
// soak counts the poster outgrows it while no daemon fans out, and CHAT drops the oldest posts the
// killed daemon had not yet handed to every member. What the contract owes the members is what
// CHAT still stores at the end, read back after the last post: each member must receive every
// one of those; the posts it evicted are counted and logged, and at the default counts, within
// the limit, none may be evicted.
//
// The hand-offs the killed daemon held unacknowledged come back after its consumers' ack wait
// (meshwire.AckWait, 60 s), not with the lease: that wait, not the lease TTL, bounds the test.
func TestDeliveryDaemonKilledMidFanout(t *testing.T) {
	meshtest.Long(t, "kills and restarts real processes")
	t.Parallel()
	burst, after := count(150, 1000), count(50, 500)
	ctx := bounded(t, 3*time.Minute)
	m := startMesh(t, "--no-delivery", "--no-manager")
	l := m.ledger(ctx)

	const channel = "ops"
	poster := startAgent(ctx, t, l, ledger.Request{Name: "poster", Subscribe: []string{channel}})
	pc := connect(ctx, t, m.url, poster)

	daemons := map[string]*child{}
	startDaemon := func(name string) {
		cmd := exec.Command(cotalBin, "deliver", "--dir", m.root, "--name", name)
		daemons["local."+name] = startChild(t, name, m.root, cmd, false)
	}
	lease := func() *meshwire.DeliveryLease {
		ls, err := readLease(ctx, pc.Conn())
		if err != nil {
			t.Logf("read the lease: %v", err)
		}
		return ls
	}
	startDaemon("d1")
	if !waitFor(ctx, 100*time.Millisecond, func() bool { ls := lease(); return ls != nil && ls.Holder == "local.d1" && ls.Ready }) {
		t.Fatalf("d1 did not take the delivery lease: %+v", lease())
	}
	startDaemon("d2")
	time.Sleep(2 * time.Second) // d2 tries the lease every second: it is standing by now
	if ls := lease(); ls == nil || ls.Holder != "local.d1" {
		t.Fatalf("the lease moved to %+v before any kill", ls)
	}

	// Members join durably, then come back with no live subscription: everything they get from
	// here on comes through the daemon's fan-out and hand-off.
	members := make([]*tally, 3)
	for i := range members {
		cred := startAgent(ctx, t, l, ledger.Request{Name: fmt.Sprintf("m%d", i+1), Subscribe: []string{channel}})
		c := connect(ctx, t, m.url, cred)
		if res, err := c.Join(ctx, channel); err != nil || !res.Durable {
			t.Fatalf("m%d's durable join: %+v, %v", i+1, res, err)
		}
		if err := c.Close(ctx); err != nil {
			t.Fatal(err)
		}
		members[i] = newTally()
		connect(ctx, t, m.url, cred, cotal.WithHandler(members[i].handle))
	}
	minDelivered := func(want []string) int {
		least := len(want)
		for _, mt := range members {
			least = min(least, len(want)-len(mt.missing(want)))
		}
		return least
	}

	var mu sync.Mutex
	var sent []string
	post := func(i int, what string) {
		for {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			s, err := pc.Post(sctx, channel, []wire.Part{wire.TextPart(fmt.Sprintf("%s %d", what, i))})
			cancel()
			if err == nil {
				mu.Lock()
				sent = append(sent, s.ID)
				mu.Unlock()
				return
			}
			if ctx.Err() != nil {
				t.Errorf("post %s %d: %v", what, i, err)
				return
			}
		}
	}
	sentIDs := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), sent...)
	}

	// The burst: kill the active daemon once a third of it has reached every member.
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range burst {
			post(i, "burst")
		}
	})
	if !waitFor(ctx, 10*time.Millisecond, func() bool { return minDelivered(sentIDs()) >= burst/3 }) {
		t.Fatalf("the burst's fan-out did not get a third of the way: %d", minDelivered(sentIDs()))
	}
	active := lease()
	if active == nil || daemons[active.Holder] == nil {
		t.Fatalf("no daemon of ours holds the lease: %+v", active)
	}
	standby := "local.d2"
	if active.Holder == standby {
		standby = "local.d1"
	}
	atKill := sentIDs()
	delivered := minDelivered(atKill)
	daemons[active.Holder].kill()
	killed := time.Now()
	t.Logf("killed the active daemon %s with %d posts stored and %d of them delivered to every member", active.Holder, len(atKill), delivered)

	// Through the outage: keep posting until the standby holds the lease and is ready.
	var tookOver time.Duration
	var during atomic.Int64
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			if ls := lease(); ls != nil && ls.Holder == standby && ls.Ready {
				tookOver = time.Since(killed)
				return
			}
			post(i, "outage")
			during.Add(1)
			time.Sleep(250 * time.Millisecond)
		}
	})
	wg.Wait()
	if tookOver == 0 {
		t.Fatalf("the standby %s did not take over within the test's deadline (lease: %+v)", standby, lease())
	}
	for i := range after {
		post(i, "after")
	}
	want := sentIDs()
	t.Logf("the standby %s took the lease %s after the kill (lease TTL %s); %d posts during the outage, %d after", standby, tookOver.Round(time.Millisecond), meshwire.DeliveryLeaseTTL, during.Load(), after)

	kept := m.retainedPosts(ctx, channel, want) // final: no post follows
	for i, mt := range members {
		if miss := mt.waitAll(ctx, kept); len(miss) > 0 {
			t.Errorf("m%d lost %d of %d stored posts across the daemon's kill (%s of the %d sent): %q", i+1, len(miss), len(kept), positions(want, miss), len(want), sample(miss, 3))
		}
	}
	for i, mt := range members {
		stored, all := len(kept)-len(mt.missing(kept)), len(want)-len(mt.missing(want))
		t.Logf("m%d: %d/%d stored posts and %d of the %d evicted, %d duplicates surfaced", i+1, stored, len(kept), all-stored, len(want)-len(kept), mt.duplicates(want))
	}
	// kept is in send order and atKill a prefix of want: the stored posts sent before the kill
	// come first.
	before := 0
	for before < len(kept) && slices.Contains(atKill, kept[before]) {
		before++
	}
	if last := lastOf(members, kept); !last.IsZero() {
		// Hand-offs the killed daemon held unacknowledged come back after the ack wait of its
		// consumers, not with the lease.
		since := func(ids []string) string {
			if len(ids) == 0 {
				return "-"
			}
			return lastOf(members, ids).Sub(killed).Round(time.Millisecond).String()
		}
		t.Logf("every stored post reached every member %s after the kill; the %d stored before the kill by %s, the later ones by %s",
			last.Sub(killed).Round(time.Millisecond), before, since(kept[:before]), since(kept[before:]))
	}
}

// lastOf returns when the last post of want first reached the last member (zero if one is
// missing).
func lastOf(members []*tally, want []string) time.Time {
	var last time.Time
	for _, mt := range members {
		at := mt.lastArrival(want)
		if at.IsZero() {
			return at
		}
		if at.After(last) {
			last = at
		}
	}
	return last
}
