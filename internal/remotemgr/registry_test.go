package remotemgr_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/broker/brokertest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/remotemgr"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
)

// registryStore makes the user-auth store of "main" on a bare broker of the test's own, as
// provisioning makes it, and returns it with the broker's URL.
func registryStore(t *testing.T) (jetstream.KeyValue, string) {
	t.Helper()
	url := brokertest.Start(t)
	kv := bindStore(t, url, true)
	return kv, url
}

// bindStore binds the user-auth store of "main" on a connection of its own to url, creating it
// first when create is set.
func bindStore(t *testing.T, url string, create bool) jetstream.KeyValue {
	t.Helper()
	js := brokertest.JetStreamAt(t, url)
	if create {
		if _, err := js.CreateStream(t.Context(), space.UserAuthStoreConfig("main")); err != nil {
			t.Fatal(err)
		}
	}
	kv, err := js.KeyValue(t.Context(), string(meshwire.UserAuthBucket("main")))
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

func openRegistry(t *testing.T, kv jetstream.KeyValue) *remotemgr.Registry {
	t.Helper()
	g, err := remotemgr.OpenRegistry(kv)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func registration(owner string) remotemgr.Registration {
	return remotemgr.Registration{V: 1, Owner: owner, Actor: "cli", InstanceID: string(wire.NewLifecycleUID()), LifecycleUID: string(wire.NewLifecycleUID())}
}

// TestRegistryClaim shows a claim recorded, a new incarnation keeping the agents and keys the one
// before left, and another owner's claim of the instance refused.
func TestRegistryClaim(t *testing.T) {
	kv, _ := registryStore(t)
	g := openRegistry(t, kv)
	ctx := t.Context()
	r := registration(alice)
	if prev, err := g.Claim(ctx, r); err != nil || prev != nil {
		t.Fatalf("first claim: %+v %v", prev, err)
	}
	agent := remotemgr.Target{Owner: alice, Actor: "bot", LifecycleUID: string(wire.NewLifecycleUID())}
	if err := g.AddAgent(ctx, r.InstanceID, agent); err != nil {
		t.Fatal(err)
	}
	if err := g.AddKey(ctx, r.InstanceID, "UKEY", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	next := r
	next.LifecycleUID = string(wire.NewLifecycleUID())
	prev, err := g.Claim(ctx, next)
	if err != nil || prev == nil || prev.LifecycleUID != r.LifecycleUID {
		t.Fatalf("a new incarnation's claim: %+v %v", prev, err)
	}
	got, err := g.Get(ctx, r.InstanceID)
	if err != nil || got.LifecycleUID != next.LifecycleUID || !slices.Equal(got.Agents, []remotemgr.Target{agent}) || !slices.Equal(got.Keys, []string{"UKEY"}) {
		t.Fatalf("after the new claim: %+v %v", got, err)
	}
	foreign := next
	foreign.Owner = bob
	if _, err := g.Claim(ctx, foreign); !errors.Is(err, remotemgr.ErrForeignInstance) {
		t.Fatalf("another owner's claim: %v, want ErrForeignInstance", err)
	}
	if err := g.AddKey(ctx, string(wire.NewLifecycleUID()), "UKEY", time.Now().Add(time.Hour)); err == nil {
		t.Fatal("a key recorded for an instance never claimed")
	}
	// A deleted registration is none: the instance may be claimed afresh.
	if err := kv.Delete(ctx, "manager."+r.InstanceID); err != nil {
		t.Fatal(err)
	}
	if prev, err := g.Claim(ctx, foreign); err != nil || prev != nil {
		t.Fatalf("a claim after the registration's deletion: %+v %v", prev, err)
	}
}

// TestRegistryForgetsExpiredKeys: a key is kept while a credential signed for it can still
// connect, its expiry moved on by each new one, and forgotten after; a key recorded without an
// expiry (by an older host) is kept.
func TestRegistryForgetsExpiredKeys(t *testing.T) {
	kv, _ := registryStore(t)
	g := openRegistry(t, kv)
	ctx := t.Context()
	r := registration(alice)
	r.Keys = []string{"ULEGACY"}
	if _, err := g.Claim(ctx, r); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for key, exp := range map[string]time.Time{"UGONE": now.Add(-2 * time.Minute), "URENEWED": now.Add(30 * time.Second), "UALIVE": now.Add(time.Hour)} {
		if err := g.AddKey(ctx, r.InstanceID, key, exp); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.AddKey(ctx, r.InstanceID, "URENEWED", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, err := g.Get(ctx, r.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got.Keys)
	if want := []string{"UALIVE", "ULEGACY", "URENEWED"}; !slices.Equal(got.Keys, want) || len(got.KeyExpiry) != 2 {
		t.Fatalf("keys %v (expiry %v), want %v", got.Keys, got.KeyExpiry, want)
	}
	if got.KeyExpiry["URENEWED"] != now.Add(time.Hour).Unix() {
		t.Errorf("the renewed key expires at %d, want its latest credential's %d", got.KeyExpiry["URENEWED"], now.Add(time.Hour).Unix())
	}
}

// TestRegistryWritersOnSeveralNodes shows registries on connections of their own (the authority
// nodes of a cluster) writing one registration at once: no write is lost.
func TestRegistryWritersOnSeveralNodes(t *testing.T) {
	kv, url := registryStore(t)
	ctx := t.Context()
	r := registration(alice)
	if _, err := openRegistry(t, kv).Claim(ctx, r); err != nil {
		t.Fatal(err)
	}
	// Each lost compare-and-set is another writer's write: with fewer of those than a change's
	// attempts, none of them can run out.
	const writers, each = 3, 3
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		g := openRegistry(t, bindStore(t, url, false))
		wg.Go(func() {
			for i := range each {
				errs <- g.AddKey(ctx, r.InstanceID, fmt.Sprintf("KEY_%d_%d", w, i), time.Now().Add(time.Hour))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := openRegistry(t, kv).Get(ctx, r.InstanceID)
	if err != nil || len(got.Keys) != writers*each {
		t.Fatalf("after %d concurrent writes: %d keys, %v", writers*each, len(got.Keys), err)
	}
}

// TestRegistryOf shows a person's registrations listed by instance beside the store's other
// records, and one that cannot be read reported by its key without hiding the others.
func TestRegistryOf(t *testing.T) {
	kv, _ := registryStore(t)
	g := openRegistry(t, kv)
	ctx := t.Context()
	if regs, err := g.Of(ctx, alice, ""); err != nil || len(regs) != 0 {
		t.Fatalf("Of on an empty store: %+v %v", regs, err)
	}
	var mine []string
	for _, owner := range []string{alice, alice, bob} {
		r := registration(owner)
		if _, err := g.Claim(ctx, r); err != nil {
			t.Fatal(err)
		}
		if owner == alice {
			mine = append(mine, r.InstanceID)
		}
	}
	slices.Sort(mine)
	for _, key := range []string{"actor." + alice + ".cli", "node.n1"} {
		if _, err := kv.Put(ctx, key, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	regs, err := g.Of(ctx, alice, "")
	if err != nil || len(regs) != 2 || regs[0].InstanceID != mine[0] || regs[1].InstanceID != mine[1] {
		t.Fatalf("Of(alice) = %+v, %v; want %v", regs, err, mine)
	}
	if regs, err := g.Of(ctx, alice, "other"); err != nil || len(regs) != 0 {
		t.Fatalf("Of(alice, other) = %+v, %v", regs, err)
	}
	bad := "manager." + string(wire.NewLifecycleUID())
	if _, err := kv.Put(ctx, bad, []byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	if regs, err := g.Of(ctx, alice, ""); err == nil || !strings.Contains(err.Error(), bad) || len(regs) != 2 {
		t.Fatalf("Of beside an unreadable registration = %d, %v; want both of alice's and an error naming %s", len(regs), err, bad)
	}
}

// TestRegistryImport shows an import writing a registration only where the key holds none or
// the very same one.
func TestRegistryImport(t *testing.T) {
	kv, _ := registryStore(t)
	g := openRegistry(t, kv)
	ctx := t.Context()
	r := registration(alice)
	for range 2 {
		if err := g.Import(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := g.Get(ctx, r.InstanceID); err != nil || got.LifecycleUID != r.LifecycleUID {
		t.Fatalf("imported: %+v %v", got, err)
	}
	other := r
	other.LifecycleUID = string(wire.NewLifecycleUID())
	if err := g.Import(ctx, other); err == nil || !strings.Contains(err.Error(), "manager."+r.InstanceID) {
		t.Fatalf("an import over another registration: %v, want an error naming its key", err)
	}
}
