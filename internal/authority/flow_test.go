package authority_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// TestAgentCredentialWorks proves the positive side of the agent profile with the real client
// APIs: live channel delivery, a direct message through the pre-created durable, its own presence
// key, a history read, and its role's task durable; and that the durable it may only bind it
// cannot create.
func TestAgentCredentialWorks(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	aliceCred, alice := m.Agent(t, ledger.Request{Name: "alice", AllowPublish: []string{"team.backend"}, Subscribe: []string{"team.backend"}, Role: "reviewer"})
	bobCred, bob := m.Agent(t, ledger.Request{Name: "bob", Subscribe: []string{"team.>"}})
	sp := m.Space

	// Live multicast: bob reads the channel alice posts to.
	live, err := bob.SubscribeSync(must(sp.ChatFilter("team.backend")))
	if err != nil {
		t.Fatal(err)
	}
	if err := bob.Flush(); err != nil {
		t.Fatal(err)
	}
	subject := must(sp.ChatSubject(aliceCred.Principal, "team.backend"))
	if err := alice.Publish(subject, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if msg, err := live.NextMsg(5 * time.Second); err != nil || string(msg.Data) != "hello" {
		t.Fatalf("bob did not receive the post: %v", err)
	}

	// Direct message: alice publishes through JetStream, bob binds its dm_ durable and acks.
	dm := sp.DMSubject(bobCred.Principal, aliceCred.Principal)
	if _, err := alice.JS.Publish(ctx, dm, []byte("psst"), jetstream.WithMsgID("m1")); err != nil {
		t.Fatalf("alice cannot send a dm: %v", err)
	}
	bobLife := wire.Lifecycle{Principal: bobCred.Principal, UID: bobCred.LifecycleUID}
	cons, err := bob.JS.Consumer(ctx, sp.DMStream(), wire.DMDurable(bobLife))
	if err != nil {
		t.Fatalf("bob cannot bind its dm durable: %v", err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got int
	for msg := range batch.Messages() {
		got++
		if string(msg.Data()) != "psst" {
			t.Errorf("dm body %q", msg.Data())
		}
		if err := msg.DoubleAck(ctx); err != nil {
			t.Errorf("bob cannot ack its dm: %v", err)
		}
	}
	if got != 1 {
		t.Fatalf("bob fetched %d dms, want 1 (%v)", got, batch.Error())
	}

	// An agent binds but never creates its durables: the broker refuses the request, so it is
	// sent without waiting for a reply that will not come.
	create := "$JS.API.CONSUMER.CREATE." + sp.DMStream() + ".mine." + meshwire.DMFilter(sp, bobCred.Principal)
	if err := bob.Publish(create, []byte(`{"stream_name":"DM_main","config":{"durable_name":"mine"}}`)); err != nil {
		t.Fatal(err)
	}
	if refused, err := bob.Refused("Publish", create); err != nil || !refused {
		t.Fatalf("the broker did not refuse bob a consumer on DM (%v)", err)
	}

	// Presence: its own key, through the KV API.
	kv, err := alice.JS.KeyValue(ctx, string(sp.PresenceBucket()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, wire.PresenceKey(aliceCred.Principal), []byte(`{}`)); err != nil {
		t.Errorf("alice cannot write her presence: %v", err)
	}

	// A history read in the ACL, on the lifecycle's chathist name.
	aliceLife := wire.Lifecycle{Principal: aliceCred.Principal, UID: aliceCred.LifecycleUID}
	hist, err := alice.JS.CreateConsumer(ctx, sp.ChatStream(), jetstream.ConsumerConfig{
		Name: wire.ChatHistConsumer(aliceLife), FilterSubject: must(sp.ChatFilter("team.backend")),
		AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true, InactiveThreshold: 30 * time.Second,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: 1,
	})
	if err != nil {
		t.Fatalf("alice cannot read channel history: %v", err)
	}
	if err := alice.JS.DeleteConsumer(ctx, sp.ChatStream(), hist.CachedInfo().Name); err != nil {
		t.Errorf("alice cannot delete her history consumer: %v", err)
	}

	// Anycast: a task for the role reaches alice's shared svc_ durable.
	task, err := sp.AnycastSubject("reviewer", bobCred.Principal)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.JS.Publish(ctx, task, []byte("review")); err != nil {
		t.Fatalf("bob cannot hand out a task: %v", err)
	}
	svc, err := alice.JS.Consumer(ctx, sp.TaskStream(), must(wire.TaskDurable("reviewer")))
	if err != nil {
		t.Fatalf("alice cannot bind her role's durable: %v", err)
	}
	if msg, err := svc.Next(jetstream.FetchMaxWait(5 * time.Second)); err != nil || string(msg.Data()) != "review" {
		t.Fatalf("alice did not get the task: %v", err)
	}
}

// TestSpacesAreIsolated runs two spaces on one broker: a post in one never reaches the other,
// even to a credential reading the same channel name.
func TestSpacesAreIsolated(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t, meshtest.WithSpaces("main", "other"))
	aliceCred, alice := m.Agent(t, ledger.Request{Name: "alice", AllowPublish: []string{"general"}})
	_, here := m.Agent(t, ledger.Request{Name: "bob", Subscribe: []string{"general"}})
	_, there := m.Agent(t, ledger.Request{Space: "other", Name: "bob", Subscribe: []string{"general"}})
	watcher := m.Connect(t, m.Mint(t, ledger.Request{Space: "other", Profile: authority.ProfileObserver, Name: "watcher"}))

	subHere, err := here.SubscribeSync(must(wire.Space("main").ChatFilter("general")))
	if err != nil {
		t.Fatal(err)
	}
	subThere, err := there.SubscribeSync(must(wire.Space("other").ChatFilter("general")))
	if err != nil {
		t.Fatal(err)
	}
	// The other account's observer taps every subject its grants allow, and the same subject
	// name as the post: neither is in main's account.
	tapThere, err := watcher.SubscribeSync(wire.Space("other").KindAll(wire.KindChat))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*meshtest.Client{here, there, watcher} {
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := alice.Publish(must(wire.Space("main").ChatSubject(aliceCred.Principal, "general")), []byte("main only")); err != nil {
		t.Fatal(err)
	}
	if _, err := subHere.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("the post did not reach its own space: %v", err)
	}
	// The post has been routed (its own space got it); nothing may be pending in the other.
	if err := there.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]interface{ Pending() (int, int, error) }{"agent": subThere, "observer": tapThere} {
		if n, _, err := s.Pending(); err != nil || n != 0 {
			t.Errorf("the other space's %s received %d messages from main (%v)", name, n, err)
		}
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}
