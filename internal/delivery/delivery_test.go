package delivery_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/delivery"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
)

const wait = 20 * time.Second

// collector records what a client surfaces.
type collector struct {
	mu  sync.Mutex
	got []*cotal.Delivery
}

func (c *collector) handle(_ context.Context, d *cotal.Delivery) error {
	c.mu.Lock()
	c.got = append(c.got, d)
	c.mu.Unlock()
	return nil
}

func (c *collector) texts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, d := range c.got {
		out[d.Message.Parts[0].Text]++
	}
	return out
}

// within polls cond until it holds, failing the test if it does not within d.
func within(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// runDaemon starts a delivery daemon on its own delivery credential; stop cancels it (releasing
// the lease), kill closes its connection without a word (the lease then lapses).
func runDaemon(t *testing.T, m *meshtest.Mesh, name string) (stop, kill func()) {
	t.Helper()
	return runDaemonWith(t, m, name, nil, nil)
}

// runDaemonWith is runDaemon with a handler hook (see delivery.SetHook), and returned, a call of
// returned made as soon as Run has returned.
func runDaemonWith(t *testing.T, m *meshtest.Mesh, name string, hook func(context.Context, string) func(), returned func()) (stop, kill func()) {
	t.Helper()
	c := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileDelivery, Name: name}))
	d, err := delivery.New(c.Conn, delivery.Config{Space: m.Space, Holder: "local." + name, Standby: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if hook != nil {
		delivery.SetHook(d, hook)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := d.Run(ctx)
		if returned != nil {
			returned()
		}
		if err != nil {
			t.Errorf("daemon %s: %v", name, err)
		}
	}()
	stop = sync.OnceFunc(func() { cancel(); <-done })
	kill = sync.OnceFunc(func() { c.Conn.Close(); cancel(); <-done })
	t.Cleanup(stop)
	return stop, kill
}

func say(s string) []wire.Part { return []wire.Part{wire.TextPart(s)} }

// setChannel writes a channel's config as a channel-writer.
func setChannel(t *testing.T, m *meshtest.Mesh, channel string, cfg wire.ChannelConfig) {
	t.Helper()
	w := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileChannelWriter, Name: "writer"}))
	kv, err := w.JS.KeyValue(t.Context(), string(m.Space.ChannelsBucket()))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(cfg)
	if _, err := kv.Put(t.Context(), channel, b); err != nil {
		t.Fatal(err)
	}
}

func connect(t *testing.T, m *meshtest.Mesh, creds []byte, col *collector) *cotal.Client {
	t.Helper()
	opts := []cotal.Option{cotal.WithCredsData(creds), cotal.WithHeartbeat(200 * time.Millisecond)}
	if col != nil {
		opts = append(opts, cotal.WithHandler(col.handle))
	}
	c, err := cotal.Connect(t.Context(), m.URL(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// inboxDrained waits until the fan-out has settled every post and the reader every copy.
func inboxDrained(t *testing.T, m *meshtest.Mesh) {
	t.Helper()
	js := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileDelivery, Name: "inspector"})).JS
	settled := func(stream, durable string) bool {
		c, err := js.Consumer(t.Context(), stream, durable)
		if err != nil {
			return false
		}
		info := c.CachedInfo()
		return info.NumPending == 0 && info.NumAckPending == 0
	}
	meshtest.Eventually(t, wait+delivery.LeaseTTL, "the fan-out and the inbox reader to settle", func() bool {
		return settled(m.Space.ChatStream(), meshwire.FanoutDurable) && settled(meshwire.InboxStream(m.Space), meshwire.ReaderDurable)
	})
}

func TestDurableChannelBackstop(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	runDaemon(t, m, "delivery")
	ctx := t.Context()
	setChannel(t, m, "team", wire.ChannelConfig{Replay: ptr(false)}) // no history replay: only the backstop catches up
	team := []string{"team"}
	alice := connect(t, m, m.AgentCred(t, ledger.Request{Name: "alice", AllowPublish: team, Subscribe: team}).Creds, nil)
	bobCred := m.AgentCred(t, ledger.Request{Name: "bob", Subscribe: team})
	bobCol := &collector{}
	bob := connect(t, m, bobCred.Creds, bobCol)
	var res *cotal.JoinResult
	meshtest.Eventually(t, wait+delivery.LeaseTTL, "bob's durable join", func() bool {
		var err error
		if res != nil {
			return true
		}
		r, err := bob.Join(ctx, "team")
		if err != nil {
			t.Fatal(err)
		}
		if !r.Durable {
			_ = bob.Leave(ctx, "team") // the daemon was not active yet; try again
			return false
		}
		res = r
		return true
	})
	if res.Generation != 1 {
		t.Errorf("join = %+v", res)
	}

	// bob goes offline; alice posts; bob comes back and gets every post, once.
	if err := bob.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"one", "two", "three"} {
		if _, err := alice.Post(ctx, "team", say(s)); err != nil {
			t.Fatal(err)
		}
	}
	back := &collector{}
	connect(t, m, bobCred.Creds, back)
	meshtest.Eventually(t, wait+delivery.LeaseTTL, "the three durable copies", func() bool { return len(back.texts()) == 3 })
	inboxDrained(t, m)
	for s, n := range back.texts() {
		if n != 1 {
			t.Errorf("%q surfaced %d times", s, n)
		}
	}
	for _, d := range back.got {
		if d.Kind != wire.DeliveryChannel || d.Historical || d.Channel != "team" || d.Sender.String() != "local.alice" {
			t.Errorf("durable copy surfaced as %+v", d)
		}
	}
}

// teamBackstop starts a mesh with a delivery daemon and the durable channel team without
// history replay (only the backstop catches up), and connects alice, who posts there.
func teamBackstop(t *testing.T) (*meshtest.Mesh, *cotal.Client) {
	t.Helper()
	m := meshtest.Start(t)
	runDaemon(t, m, "delivery")
	setChannel(t, m, "team", wire.ChannelConfig{Replay: ptr(false)})
	team := []string{"team"}
	return m, connect(t, m, m.AgentCred(t, ledger.Request{Name: "alice", AllowPublish: team, Subscribe: team}).Creds, nil)
}

func TestLeaveAndRevocationStopTheBackstop(t *testing.T) {
	t.Parallel()
	m, alice := teamBackstop(t)
	ctx := t.Context()
	team := []string{"team"}
	bobCred := m.AgentCred(t, ledger.Request{Name: "bob", Subscribe: team})
	bob := connect(t, m, bobCred.Creds, nil)
	joinDurable(t, bob, "team")
	if err := bob.Leave(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	carolCred := m.AgentCred(t, ledger.Request{Name: "carol", Subscribe: team})
	carol := connect(t, m, carolCred.Creds, nil)
	joinDurable(t, carol, "team")
	// Revoke carol's read ACL (a provisioner narrows it to nothing).
	prov := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileProvisioner, Name: "prov"}))
	carolLife := wire.Lifecycle{Principal: carolCred.Principal, UID: carolCred.LifecycleUID}
	if err := space.WriteACL(ctx, prov.JS, m.Space, carolLife, nil, false); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*cotal.Client{bob, carol} {
		if err := c.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := alice.Post(ctx, "team", say("after")); err != nil {
		t.Fatal(err)
	}
	inboxDrained(t, m)
	js := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileDelivery, Name: "check"})).JS
	st, err := js.Stream(ctx, m.Space.DLVStream())
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 0 {
		t.Errorf("%d hand-offs after a leave and a revocation, want 0", n)
	}
}

func TestMentionReachesOnlyAnAuthorisedTarget(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	runDaemon(t, m, "delivery")
	ctx := t.Context()
	setChannel(t, m, "ops", wire.ChannelConfig{DeliveryClass: wire.ClassLive})
	alice := connect(t, m, m.AgentCred(t, ledger.Request{Name: "alice", AllowPublish: []string{"ops"}}).Creds, nil)
	carolCol, daveCol := &collector{}, &collector{}
	connect(t, m, m.AgentCred(t, ledger.Request{Name: "carol", AllowSubscribe: []string{"ops"}}).Creds, carolCol)
	connect(t, m, m.AgentCred(t, ledger.Request{Name: "dave", AllowSubscribe: []string{"other"}}).Creds, daveCol)
	r, err := alice.Roster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	meshtest.Eventually(t, wait+delivery.LeaseTTL, "carol and dave present", func() bool { return len(r.Find("carol")) == 1 && len(r.Find("dave")) == 1 })
	// The daemon resolves names from its own view of presence, which catches up on its own: post
	// until a copy reaches carol, then check none ever reached dave.
	meshtest.Eventually(t, wait+delivery.LeaseTTL, "a mention copy for carol", func() bool {
		if len(carolCol.texts()) > 0 {
			return true
		}
		_, err := alice.Post(ctx, "ops", say("@carol @dave look"), cotal.Mentions("carol", "dave", "nobody"))
		return err != nil && t.Failed()
	})
	inboxDrained(t, m)
	if n := len(daveCol.texts()); n != 0 {
		t.Errorf("dave, who may not read ops, got %d messages", n)
	}
}

func TestDaemonKilledStandbyTakesOver(t *testing.T) {
	meshtest.Long(t, "waits out a killed daemon's delivery lease")
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	_, kill := runDaemon(t, m, "first")
	runDaemon(t, m, "second") // standby
	setChannel(t, m, "team", wire.ChannelConfig{Replay: ptr(false)})
	team := []string{"team"}
	alice := connect(t, m, m.AgentCred(t, ledger.Request{Name: "alice", AllowPublish: team, Subscribe: team}).Creds, nil)
	bobCred := m.AgentCred(t, ledger.Request{Name: "bob", Subscribe: team})
	bob := connect(t, m, bobCred.Creds, nil)
	meshtest.Eventually(t, wait+delivery.LeaseTTL, "bob's durable join", func() bool {
		r, err := bob.Join(ctx, "team")
		if err != nil {
			t.Fatal(err)
		}
		if !r.Durable {
			_ = bob.Leave(ctx, "team")
		}
		return r.Durable
	})
	if err := bob.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Post(ctx, "team", say("before the crash")); err != nil {
		t.Fatal(err)
	}
	// Let the first daemon hand that post over before it dies; what it holds unacknowledged at
	// the crash would come back only after the 60 s ack wait, which this test need not sit out.
	inboxDrained(t, m)
	kill() // mid-stream: the lease is not released and must lapse
	if _, err := alice.Post(ctx, "team", say("during the outage")); err != nil {
		t.Fatal(err)
	}
	probe := connect(t, m, m.AgentCred(t, ledger.Request{Name: "prober"}).Creds, nil)
	meshtest.Eventually(t, wait+delivery.LeaseTTL, "the standby to take over", func() bool {
		res, err := probe.Probe(ctx, wire.PlaneDelivery)
		return err == nil && res.Verdict == wire.ResponderBound
	})
	back := &collector{}
	connect(t, m, bobCred.Creds, back)
	meshtest.Eventually(t, wait+delivery.LeaseTTL, "both posts after the takeover", func() bool {
		got := back.texts()
		return got["before the crash"] == 1 && got["during the outage"] == 1
	})
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// TestLivenessVerdicts: the delivery plane answers bound while the daemon holds a ready lease,
// stale once the lease names another incarnation, and nobody answers (unbound) without a daemon.
func TestLivenessVerdicts(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	probe := connect(t, m, m.AgentCred(t, ledger.Request{Name: "prober"}).Creds, nil)
	verdict := func() wire.ResponderState {
		res, err := probe.Probe(ctx, wire.PlaneDelivery)
		if err != nil {
			t.Fatal(err)
		}
		return res.Verdict
	}
	if v := verdict(); v != wire.ResponderUnbound {
		t.Errorf("no daemon: %s", v)
	}
	c := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileDelivery, Name: "delivery"}))
	d, err := delivery.New(c.Conn, delivery.Config{Space: m.Space, Holder: "local.delivery", Renew: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(dctx) }()
	t.Cleanup(func() { cancel(); <-done })
	meshtest.Eventually(t, wait+delivery.LeaseTTL, "bound", func() bool { return verdict() == wire.ResponderBound })
	// Another incarnation takes the lease row (the daemon renews only hourly here).
	other := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileDelivery, Name: "usurper"}))
	row, _ := json.Marshal(meshwire.DeliveryLease{Holder: "local.usurper", Incarnation: "x", Since: wire.MillisOf(time.Now()), Ready: true})
	if _, err := other.JS.Publish(ctx, meshwire.DeliveryBucket(m.Space).Subject(meshwire.LeaseKey(0)), row); err != nil {
		t.Fatal(err)
	}
	if v := verdict(); v != wire.ResponderStale {
		t.Errorf("lease held by another incarnation: %s", v)
	}
}

// control sends one request on the ctl.delivery rail as me, over nc, and returns the reply.
func control(ctx context.Context, nc *nats.Conn, sp wire.Space, me wire.Principal, op string, args any) (*wire.ControlReply, error) {
	body, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	req, err := json.Marshal(wire.ControlRequest{Op: op, Args: body, From: wire.EndpointRef{ID: me.String()}})
	if err != nil {
		return nil, err
	}
	subject := sp.ControlSubject(wire.ControlDelivery, me)
	reply := wire.ReplySubject(subject, nuid.Next())
	sub, err := nc.SubscribeSync(reply)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }() // one reply per request
	if err := nc.Flush(); err != nil {
		return nil, err
	}
	if err := nc.PublishMsg(&nats.Msg{Subject: subject, Reply: reply, Data: req}); err != nil {
		return nil, err
	}
	msg, err := sub.NextMsgWithContext(ctx)
	if err != nil {
		return nil, err
	}
	var rep wire.ControlReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// TestStopDrainsHandlers: stopping a daemon ends its handlers' contexts (they derive from the
// active term) and returns only once every handler has returned. A fan-out, a reader hand-off
// and a durableJoin each block until their context ends and then until the test lets them
// go; Run must not return before that, and no handler may run once it has.
func TestStopDrainsHandlers(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	var running, atReturn atomic.Int32
	var mu sync.Mutex
	entered, ended := map[string]bool{}, map[string]bool{} // mu guards both
	release := make(chan struct{})
	hook := func(hctx context.Context, handler string) func() {
		running.Add(1)
		mu.Lock()
		entered[handler] = true
		mu.Unlock()
		<-hctx.Done()
		mu.Lock()
		ended[handler] = true
		mu.Unlock()
		<-release
		return func() { running.Add(-1) }
	}
	returned := make(chan struct{})
	stop, _ := runDaemonWith(t, m, "delivery", hook, func() {
		atReturn.Store(running.Load())
		close(returned)
	})
	letGo := sync.OnceFunc(func() { close(release) })
	t.Cleanup(letGo) // before the daemon's own cleanup stops it, should the test fail early
	seen := func(set map[string]bool, names ...string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, n := range names {
				if !set[n] {
					return false
				}
			}
			return true
		}
	}

	// A durableJoin, retried until the daemon is active and the join blocks in the hook.
	aliceCred := m.AgentCred(t, ledger.Request{Name: "alice", AllowPublish: []string{"team"}, Subscribe: []string{"team"}})
	alice := m.Connect(t, aliceCred)
	joined := make(chan error, 1)
	go func() { // owned: received from below
		for {
			rep, err := control(ctx, alice.Conn, m.Space, aliceCred.Principal, wire.OpDurableJoin, wire.DurableJoinArgs{Channel: "team"})
			if err != nil || seen(entered, wire.OpDurableJoin)() {
				joined <- err
				return
			}
			if rep.OK {
				joined <- errors.New("a join completed although the hook blocks every join")
				return
			}
		}
	}()
	meshtest.Eventually(t, wait+delivery.LeaseTTL, "a durableJoin in its handler", seen(entered, wire.OpDurableJoin))
	// A post, for the fan-out.
	poster := connect(t, m, aliceCred.Creds, nil)
	if _, err := poster.Post(ctx, "team", say("held")); err != nil {
		t.Fatal(err)
	}
	// An inbox entry, for the reader, written where the fan-out would.
	inj := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileDelivery, Name: "injector"}))
	entry, _ := json.Marshal(meshwire.InboxEntry{Msg: &wire.CotalMessage{ID: "m1"}, Channel: "team", Seq: 1, Reason: meshwire.ReasonDurableChannel, Generation: 1})
	life := wire.Lifecycle{Principal: aliceCred.Principal, UID: aliceCred.LifecycleUID}
	if _, err := inj.JS.Publish(ctx, meshwire.DinboxSubject(m.Space, life), entry); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, wait+delivery.LeaseTTL, "a fan-out and a reader hand-off in their handlers", seen(entered, "fanout", "reader"))

	stopped := make(chan struct{})
	go func() { // owned: received from below
		defer close(stopped)
		stop()
	}()
	// Well before any handler's own timeout (20 s): the contexts end with the term.
	within(t, 5*time.Second, "every handler's context to end with the term", seen(ended, wire.OpDurableJoin, "fanout", "reader"))
	select {
	case <-returned:
		t.Fatal("Run returned while handlers were still running")
	default:
	}
	letGo()
	<-stopped
	if n := atReturn.Load(); n != 0 {
		t.Errorf("%d handlers were running when Run returned", n)
	}
	if n := running.Load(); n != 0 {
		t.Errorf("%d handlers are running after Run returned", n)
	}
	if err := <-joined; err != nil {
		t.Errorf("the join: %v", err)
	}
}

// TestSlowJoinsDoNotBlockControl: eight durableJoins stuck in their catch-up do not hold up a
// listMemberships, and a request finding the join queue full is told at once to retry.
func TestSlowJoinsDoNotBlockControl(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	var joins atomic.Int32
	release := make(chan struct{})
	hook := func(hctx context.Context, handler string) func() {
		if handler == wire.OpDurableJoin {
			joins.Add(1)
			select {
			case <-release:
			case <-hctx.Done():
			}
		}
		return func() {}
	}
	runDaemonWith(t, m, "delivery", hook, nil)
	cred := m.AgentCred(t, ledger.Request{Name: "alice", AllowSubscribe: []string{"*"}})
	nc := m.Connect(t, cred).Conn
	list := func() (*wire.ControlReply, error) {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return control(lctx, nc, m.Space, cred.Principal, meshwire.OpListMemberships, meshwire.ListMembershipsArgs{LifecycleUID: cred.LifecycleUID})
	}
	meshtest.Eventually(t, wait+delivery.LeaseTTL, "the daemon to serve", func() bool {
		rep, err := list()
		return err == nil && rep.OK
	})

	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(release) // runs before wg.Wait: the held joins finish
	replies := make(chan *wire.ControlReply, 8+64+1)
	var sent atomic.Int32
	join := func() {
		channel := fmt.Sprintf("team%d", sent.Add(1)) // each its own membership: none waits on another
		wg.Go(func() {
			rep, err := control(ctx, nc, m.Space, cred.Principal, wire.OpDurableJoin, wire.DurableJoinArgs{Channel: channel})
			if err != nil {
				t.Errorf("join: %v", err)
				return
			}
			replies <- rep
		})
	}
	for range 8 {
		join()
	}
	meshtest.Eventually(t, wait+delivery.LeaseTTL, "eight joins in their handlers", func() bool { return joins.Load() == 8 })
	start := time.Now()
	rep, err := list()
	if err != nil || !rep.OK {
		t.Fatalf("listMemberships behind eight slow joins = %+v, %v", rep, err)
	}
	t.Logf("listMemberships answered in %v behind eight held joins", time.Since(start))

	// Sixty-four more joins fill the queue; one more is refused at once.
	for range 64 + 1 {
		join()
	}
	select {
	case rep := <-replies:
		if rep.OK || !strings.Contains(rep.Error, "retry") || rep.Code != wire.ControlCodeRetry {
			t.Errorf("a join beyond the queue got %+v, want a refusal to retry", rep)
		}
	case <-time.After(wait):
		t.Fatal("a join beyond the full queue was not refused")
	}
	if n := joins.Load(); n != 8 {
		t.Errorf("%d joins ran while eight workers were held, want 8", n)
	}
}

// TestFailedTermStandsByAgain: a daemon whose term cannot start (a store it reads does not
// answer, as while a cluster elects a stream's leader) stands by and serves once it can, rather
// than stopping for good and leaving no standby for the next failover.
func TestFailedTermStandsByAgain(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	store := m.StoreClient(t)
	members := meshwire.MembersBucket(m.Space).Stream()
	st, err := store.JS.Stream(ctx, members)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if err := store.JS.DeleteStream(ctx, members); err != nil {
		t.Fatal(err)
	}
	runDaemon(t, m, "first") // its harness fails the test if Run returns an error
	probe := connect(t, m, m.AgentCred(t, ledger.Request{Name: "prober"}).Creds, nil)
	time.Sleep(500 * time.Millisecond) // a few terms fail on the missing members bucket
	if res, err := probe.Probe(ctx, wire.PlaneDelivery); err == nil && res.Verdict == wire.ResponderBound {
		t.Fatal("the daemon serves without its members bucket")
	}
	if _, err := store.JS.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, wait+delivery.LeaseTTL, "the daemon serving once its store answers", func() bool {
		res, err := probe.Probe(ctx, wire.PlaneDelivery)
		return err == nil && res.Verdict == wire.ResponderBound
	})
}
