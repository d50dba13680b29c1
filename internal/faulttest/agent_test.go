package faulttest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// TestAgentKilledWithUnackedDMs kills an agent process with SIGKILL while it holds direct
// messages it was handed and never acknowledged, and proves what SPEC.md §8 and §13.1 make of
// them: a DM durable (dm_<owner>-<actor>-<uid>) belongs to one lifecycle.
//
//   - A supervised restart preserves the lifecycle (§13.1: the takeover barrier revokes the dead
//     process's credential and advances the process epoch; the lifecycle UID stays): the
//     restarted process, on a credential issued for the same lifecycle, gets every
//     unacknowledged DM again (once the durable's ack wait, meshwire.AckWait, has run out), each
//     exactly once after de-duplication, none lost.
//   - A fresh lifecycle of the same name (a new mint, which retires the old lifecycle by
//     takeover) inherits none of its predecessor's pending DMs (§8: a same-name successor's
//     consumers start after its own activation frontier), gets the DMs sent to it afterwards,
//     and the predecessor's credential is refused by the broker; the predecessor's DMs stay
//     in its own durable, unacknowledged, where no credential can bind them.
//
// The wait for the ack wait (60 s) bounds the test's length.
func TestAgentKilledWithUnackedDMs(t *testing.T) {
	meshtest.Long(t, "kills and restarts real processes")
	t.Parallel()
	n := count(20, 200)
	ctx := bounded(t, 3*time.Minute)
	m := startMesh(t, "--no-manager")
	l := m.ledger(ctx)
	prov := m.provisioner(ctx)

	senderCred := startAgent(ctx, t, l, ledger.Request{Name: "sender"})
	sender := connect(ctx, t, m.url, senderCred)
	bob1 := startAgent(ctx, t, l, ledger.Request{Name: "bob"})
	life1 := wire.Lifecycle{Principal: bob1.Principal, UID: bob1.LifecycleUID}

	sendAll := func(what string) []string {
		var out []string
		for _, msg := range textMessages(n, what, bob1.Principal, "") {
			if _, err := sender.Send(ctx, msg); err != nil {
				t.Fatalf("send %s: %v", what, err)
			}
			out = append(out, msg.ID)
		}
		return out
	}
	// ackPending waits until the lifecycle's dm_ durable has handed out want DMs that nobody
	// acknowledged, and returns its state.
	ackPending := func(lc wire.Lifecycle, want int) *jetstream.ConsumerInfo {
		var info *jetstream.ConsumerInfo
		waitFor(ctx, 50*time.Millisecond, func() bool {
			cons, err := prov.Consumer(ctx, space.DMStream(), wire.DMDurable(lc))
			if err != nil {
				t.Logf("read %s: %v", wire.DMDurable(lc), err)
				return false
			}
			info = cons.CachedInfo()
			return info.NumAckPending == want
		})
		return info
	}

	// The first process: handed every DM, acknowledges none, dies.
	proc1 := startBlockingAgent(ctx, t, m.root, m.url, bob1, "bob-1")
	batch1 := sendAll("batch1")
	if _, err := proc1.next(ctx, "delivery"); err != nil {
		t.Fatal(err)
	}
	if info := ackPending(life1, n); info == nil || info.NumAckPending != n {
		t.Fatalf("the first process holds %+v unacknowledged DMs, want all %d", info, n)
	}
	proc1.kill()
	killed := time.Now()

	// The supervised restart: the barrier, then a credential for the same lifecycle.
	epoch, err := l.Takeover(ctx, life1, "restart-"+nuid.Next())
	if err != nil {
		t.Fatalf("the takeover barrier on %s: %v", life1, err)
	}
	var bob2 *authority.Credential
	if err := meshtest.WithStore(t, l.URL(), m.keyring(), l.Space(), func(s *authstore.Store, keys *authority.SpaceKeys) error {
		var err error
		bob2, err = s.Issue(ctx, keys, authority.MintRequest{Profile: authority.ProfileAgent, Grant: authority.Grant{Principal: life1.Principal, LifecycleUID: life1.UID}}, nuid.Next())
		return err
	}); err != nil {
		t.Fatalf("issue the restarted process's credential: %v", err)
	}
	if no, err := refused(ctx, m.url, bob1); err != nil || !no {
		t.Errorf("the dead process's credential after the barrier: refused=%v, %v", no, err)
	}
	restarted := newTally()
	c2 := connect(ctx, t, m.url, bob2, cotal.WithHandler(restarted.handle))
	if miss := restarted.waitAll(ctx, batch1); len(miss) > 0 {
		t.Fatalf("the restarted lifecycle (epoch %d) lost %d of %d unacknowledged DMs: %q", epoch, len(miss), n, sample(miss, 10))
	}
	t.Logf("the restarted process (same lifecycle, epoch %d) got all %d unacknowledged DMs %s after the kill (ack wait %s), %d duplicates surfaced",
		epoch, n, restarted.lastArrival(batch1).Sub(killed).Round(time.Millisecond), meshwire.AckWait, restarted.duplicates(batch1))
	if info := ackPending(life1, 0); info == nil || info.NumAckPending != 0 || info.NumPending != 0 {
		t.Errorf("the durable after the restart: %+v, want nothing pending", info)
	}
	if err := c2.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// The restarted process dies too, with a second batch unacknowledged; then a fresh lifecycle
	// takes the name.
	proc2 := startBlockingAgent(ctx, t, m.root, m.url, bob2, "bob-2")
	batch2 := sendAll("batch2")
	if _, err := proc2.next(ctx, "delivery"); err != nil {
		t.Fatal(err)
	}
	if info := ackPending(life1, n); info == nil || info.NumAckPending != n {
		t.Fatalf("the second process holds %+v unacknowledged DMs, want all %d", info, n)
	}
	proc2.kill()

	bob3 := startAgent(ctx, t, l, ledger.Request{Name: "bob"})
	if bob3.LifecycleUID == life1.UID {
		t.Fatal("a fresh mint reused the lifecycle")
	}
	fresh := newTally()
	connect(ctx, t, m.url, bob3, cotal.WithHandler(fresh.handle))
	batch3 := sendAll("batch3")
	if miss := fresh.waitAll(ctx, batch3); len(miss) > 0 {
		t.Fatalf("the fresh lifecycle lost %d of %d DMs sent to it: %q", len(miss), n, sample(miss, 10))
	}
	// The fresh durable delivers in stream order from its frontier: with batch3 in, anything of
	// the earlier batches would have come first.
	var inherited []string
	for _, id := range append(batch1, batch2...) {
		if fresh.has(id) {
			inherited = append(inherited, id)
		}
	}
	if len(inherited) > 0 {
		t.Errorf("the fresh lifecycle inherited %d of its predecessor's DMs: %q", len(inherited), sample(inherited, 10))
	}
	if no, err := refused(ctx, m.url, bob2); err != nil || !no {
		t.Errorf("the retired lifecycle's credential: refused=%v, %v", no, err)
	}
	// What is left of the predecessor's durable: a takeover by a fresh mint retires the lifecycle
	// in the ledger but does not deprovision it (ledger.Retire would), so its durable stays,
	// holding the unacknowledged batch and capturing every later DM to the name.
	var left string
	if cons, err := prov.Consumer(ctx, space.DMStream(), wire.DMDurable(life1)); errors.Is(err, jetstream.ErrConsumerNotFound) {
		left = "its dm_ durable is gone"
	} else if err != nil {
		t.Errorf("read the retired lifecycle's durable: %v", err)
	} else {
		info := cons.CachedInfo()
		left = fmt.Sprintf("its dm_ durable %s is still there, with %d DMs handed out and never acknowledged and %d more not yet handed out (the successor's, which its filter also matches)",
			info.Name, info.NumAckPending, info.NumPending)
	}
	t.Logf("the fresh lifecycle got its %d DMs and none of the %d its predecessor left unacknowledged; %s", n, n, left)
}
