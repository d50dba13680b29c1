package authority_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// The endpoint rows on a real broker: what an agent, an agent with the spawn capability, the
// operator's control instrument and the manager's serving credential may and may not do on the
// ep rails and the planes beside them.

// epRoute is a request route of caller on the legacy rail.
type epRoute = wire.EndpointRoute

// epSubject builds the request subject of r in space s, with a fresh nonce.
func epSubject(t *testing.T, s wire.Space, r epRoute) string {
	t.Helper()
	if r.Nonce == "" {
		r.Nonce = wire.NewNonce()
	}
	subj, err := s.RequestSubject(r)
	if err != nil {
		t.Fatal(err)
	}
	return subj
}

func lifecycleOf(c *authority.Credential) wire.Lifecycle {
	return wire.Lifecycle{Principal: c.Principal, UID: c.LifecycleUID}
}

func TestAgentEndpointRowsOnTheBroker(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	s := m.Space
	aliceCred, alice := m.Agent(t, ledger.Request{Name: "alice"})
	carolCred, carol := m.Agent(t, ledger.Request{Name: "carol", Capabilities: []string{authority.CapabilitySpawn}})
	bobCred := m.AgentCred(t, ledger.Request{Name: "bob"})
	me, c, bob := lifecycleOf(aliceCred), lifecycleOf(carolCred), lifecycleOf(bobCred)
	next := wire.Lifecycle{Principal: me.Principal, UID: wire.NewLifecycleUID()} // the next lifecycle of the name
	iid := wire.NewLifecycleUID()
	forged := "u_bbbbbbbbbbbbbbbbbbbbbbbbbb"
	rq := func(caller wire.Lifecycle, address wire.Addressing, endpoint wire.EndpointName, command string, mode wire.AuthzMode, owner string) string {
		r := epRoute{Address: address, Endpoint: endpoint, Command: command, Mode: mode, Caller: caller}
		if address == wire.AddressInst {
			r.Instance = iid
		}
		if mode.TargetTokens() == 1 {
			r.Target.Owner = owner
		}
		return epSubject(t, s, r)
	}
	mgr := wire.ManagerEndpoint
	route := epRoute{Address: wire.AddressOne, Endpoint: mgr, Command: "stop", Mode: wire.ModeSelf, Caller: me, Nonce: wire.NewNonce()}
	answer, err := s.ReplySubject(route, iid, 0)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("baseline", func(t *testing.T) {
		run(t, alice, []check{
			pub("describe the manager", rq(me, wire.AddressOne, mgr, "describe", "", ""), true),
			pub("describe any endpoint", rq(me, wire.AddressOne, "com.acme.search", "describe", "", ""), true),
			pub("describe on the scatter rail", rq(me, wire.AddressAll, mgr, "describe", "", ""), false),
			pub("describe one instance", rq(me, wire.AddressInst, mgr, "describe", "", ""), false),
			pub("describe as another agent", rq(bob, wire.AddressOne, mgr, "describe", "", ""), false),
			pub("describe as the name's next lifecycle", rq(next, wire.AddressOne, mgr, "describe", "", ""), false),
			pub("stop itself", rq(me, wire.AddressOne, mgr, "stop", wire.ModeSelf, ""), true),
			pub("stop another in self mode", rq(bob, wire.AddressOne, mgr, "stop", wire.ModeSelf, ""), false),
			pub("stop in owner mode", rq(me, wire.AddressOne, mgr, "stop", wire.ModeOwner, "local"), false),
			pub("spawn without the capability", rq(me, wire.AddressOne, mgr, "spawn", "", ""), false),
			pub("despawn without the capability", rq(me, wire.AddressOne, mgr, "despawn", wire.ModeOwner, "local"), false),
			pub("ps", rq(me, wire.AddressOne, mgr, "ps", "", ""), false),
			pub("answer as the manager", answer, false),
			sub("its reply rail", s.ReplyReadGrant(me, ""), true),
			sub("one request's replies", s.ReplyFilter(route), true),
			sub("another agent's reply rail", s.ReplyReadGrant(bob, ""), false),
			sub("every reply", s.Prefix()+".ep.reply.>", false),
			sub("goal progress without the capability", s.GoalProgressFilter(mgr, me), false),
			pub("fetch a contract artifact", jsapi.DirectGet+meshwire.ContractStream(s)+"."+fbMust(s.ContractSubject(strings.Repeat("ab", 32))), true),
			pub("a bare direct get on the contract stream", jsapi.DirectGet+meshwire.ContractStream(s), false),
		})
	})
	t.Run("spawn", func(t *testing.T) {
		run(t, carol, []check{
			pub("spawn", rq(c, wire.AddressOne, mgr, "spawn", "", ""), true),
			pub("spawn on the scatter rail", rq(c, wire.AddressAll, mgr, "spawn", "", ""), false),
			pub("spawn on one instance", rq(c, wire.AddressInst, mgr, "spawn", "", ""), false),
			pub("spawn as another agent", rq(me, wire.AddressOne, mgr, "spawn", "", ""), false),
			pub("despawn its owner's", rq(c, wire.AddressOne, mgr, "despawn", wire.ModeOwner, "local"), true),
			pub("despawn another owner's", rq(c, wire.AddressOne, mgr, "despawn", wire.ModeOwner, forged), false),
			pub("despawn in any mode", rq(c, wire.AddressOne, mgr, "despawn", wire.ModeAny, "local"), false),
			pub("attach its owner's", rq(c, wire.AddressOne, mgr, "attach", wire.ModeOwner, "local"), true),
			pub("attach another owner's", rq(c, wire.AddressOne, mgr, "attach", wire.ModeOwner, forged), false),
			pub("inspect", rq(c, wire.AddressOne, mgr, "inspect", "", ""), true),
			pub("list personas", rq(c, wire.AddressOne, mgr, "list-personas", "", ""), true),
			pub("show a persona", rq(c, wire.AddressOne, mgr, "show-persona", "", ""), true),
			pub("define a persona", rq(c, wire.AddressOne, mgr, "define-persona", "", ""), true),
			pub("purge", rq(c, wire.AddressOne, mgr, "purge", "", ""), false),
			pub("spawn on another endpoint", rq(c, wire.AddressOne, "com.acme.search", "spawn", "", ""), false),
			sub("its goals' progress", s.GoalProgressFilter(mgr, c), true),
			sub("another's goals' progress", s.GoalProgressFilter(mgr, me), false),
		})
	})
}

func TestControlInstrumentOnTheBroker(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	s := m.Space
	aliceCred, _ := m.Agent(t, ledger.Request{Name: "alice"})
	alice := lifecycleOf(aliceCred)
	cred, err := m.Ledger(s).Issue(ctx, ledger.Request{Profile: authority.ProfileControlAdmin, Name: "operator"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := cotal.ParseCreds(cred.Creds)
	if err != nil {
		t.Fatal(err)
	}
	if g.Lifecycle == "" || g.Lifecycle == cred.LifecycleUID || g.Profile != string(authority.ProfileControlAdmin) {
		t.Fatalf("the instrument lifecycle is %q (the ledger row's %q), profile %q", g.Lifecycle, cred.LifecycleUID, g.Profile)
	}
	me := wire.Lifecycle{Principal: cred.Principal, UID: g.Lifecycle}
	cl := m.Connect(t, cred)
	iid := wire.NewLifecycleUID()
	rq := func(caller wire.Lifecycle, r epRoute) string {
		r.Caller = caller
		return epSubject(t, s, r)
	}
	one := epRoute{Address: wire.AddressOne, Endpoint: wire.ManagerEndpoint, Command: "ps"}
	all := epRoute{Address: wire.AddressAll, Endpoint: wire.ManagerEndpoint, Command: "ps"}
	inst := epRoute{Address: wire.AddressInst, Endpoint: wire.ManagerEndpoint, Instance: iid, Command: "ps"}
	self := epRoute{Address: wire.AddressOne, Endpoint: wire.ManagerEndpoint, Command: "stop", Mode: wire.ModeSelf}
	anyMode := epRoute{Address: wire.AddressAll, Endpoint: wire.ManagerEndpoint, Command: "despawn", Mode: wire.ModeAny, Target: wire.EndpointTarget{Owner: "local"}}
	handle := epRoute{Address: wire.AddressInst, Endpoint: "com.acme.search", Instance: iid, Command: "turn", Mode: wire.ModeHandle,
		Target: wire.EndpointTarget{Owner: "local", Actor: "alice", UID: alice.UID}}
	versioned := one
	versioned.Generation = strings.Repeat("a", 32)
	records := meshwire.RecordsBucket(s)
	run(t, cl, []check{
		pub("call on the class rail", rq(me, one), true),
		pub("scatter", rq(me, all), true),
		pub("call one instance", rq(me, inst), true),
		pub("a self-mode command", rq(me, self), true),
		pub("an any-mode command", rq(me, anyMode), true),
		pub("a handle-mode command", rq(me, handle), true),
		pub("call as an agent", rq(alice, one), false),
		pub("scatter as an agent", rq(alice, all), false),
		pub("call as its ledger lifecycle", rq(wire.Lifecycle{Principal: cred.Principal, UID: cred.LifecycleUID}, one), false),
		pub("call on the versioned rail", rq(me, versioned), false),
		sub("its reply rail", s.ReplyReadGrant(me, ""), true),
		sub("an agent's reply rail", s.ReplyReadGrant(alice, ""), false),
		sub("every reply", s.Prefix()+".ep.reply.>", false),
		sub("its goals' progress", s.GoalProgressFilter(wire.ManagerEndpoint, me), true),
		sub("an agent's goals' progress", s.GoalProgressFilter(wire.ManagerEndpoint, alice), false),
		sub("serve the manager", s.Prefix()+".ep.all.manager.ps.>", false),
		pub("read a record", jsapi.MsgGet+records.Stream(), true),
		pub("watch the registry", jsapi.ConsumerCreate+records.Stream()+".w1."+records.Subject("svc.manager.>"), true),
		pub("watch the goal records", jsapi.ConsumerCreate+records.Stream()+".w1."+records.Subject("goal.>"), false),
		pub("watch the whole records bucket", jsapi.ConsumerCreate+records.Stream()+".w1."+records.Subject(">"), false),
		pub("write a svc record", records.Subject(meshwire.ServiceKey(wire.ManagerEndpoint, iid, meshwire.ServiceSpecLeaf)), false),
		pub("answer as the manager", fbMust(s.ReplySubject(epRoute{Address: wire.AddressOne, Endpoint: wire.ManagerEndpoint, Command: "ps", Caller: me, Nonce: wire.NewNonce()}, iid, 0)), false),
	})
	// The registry watch works through the jetstream client, as `cotal ps` reads it.
	kv, err := cl.JS.KeyValue(ctx, string(records))
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(ctx, meshwire.ServiceRegistryKeys())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	select {
	case e := <-w.Updates():
		if e != nil {
			t.Errorf("an empty registry delivered %s", e.Key())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the registry watch did not start")
	}
}

func TestManagerServeRowsOnTheBroker(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	s := m.Space
	carolCred, carol := m.Agent(t, ledger.Request{Name: "carol", Capabilities: []string{authority.CapabilitySpawn}})
	c := lifecycleOf(carolCred)
	iid := wire.NewLifecycleUID()
	cred, epoch, err := m.Ledger(s).Serve(ctx, wire.ManagerEndpoint, "cotal_manager", iid, []string{"spawn", "ps", "stop"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	mc := m.Connect(t, cred)
	mgr := wire.ManagerEndpoint
	queue := meshwire.QueueGroup(mgr)

	// The class rail admits a queue subscription in the endpoint's group, and nothing else.
	for _, tc := range []struct {
		name, subject, queue string
		allowed              bool
	}{
		{"queue-subscribe the class rail", first(meshwire.ServeFilters(s, mgr, iid, "spawn", false)), queue, true},
		{"queue-subscribe the versioned class rail", first(meshwire.ServeFilters(s, mgr, iid, "spawn", true)), queue, true},
		{"queue-subscribe describe", first(meshwire.ServeFilters(s, mgr, iid, "describe", false)), queue, true},
		{"plain-subscribe the class rail", first(meshwire.ServeFilters(s, mgr, iid, "spawn", false)), "", false},
		{"plain-subscribe the versioned class rail", first(meshwire.ServeFilters(s, mgr, iid, "spawn", true)), "", false},
		{"queue-subscribe in another group", first(meshwire.ServeFilters(s, mgr, iid, "spawn", false)), "other", false},
		{"queue-subscribe every command", s.Prefix() + ".ep.one.manager.>", queue, false},
		{"queue-subscribe a command it does not serve", first(meshwire.ServeFilters(s, mgr, iid, "purge", false)), queue, false},
		{"queue-subscribe another endpoint", first(meshwire.ServeFilters(s, "com.acme.search", iid, "spawn", false)), "com_acme_search", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A connection per case: the verdicts on one subject must not mix.
			cc := m.Connect(t, cred)
			if _, err := cc.QueueSubscribeSync(tc.subject, tc.queue); err != nil {
				t.Fatal(err)
			}
			refused, err := cc.Refused("Subscription", tc.subject)
			if err != nil {
				t.Fatal(err)
			}
			if refused == tc.allowed {
				t.Errorf("subscribe %q in %q: refused=%v, want allowed=%v", tc.subject, tc.queue, refused, tc.allowed)
			}
		})
	}

	route := epRoute{Address: wire.AddressOne, Endpoint: mgr, Command: "spawn", Caller: c, Nonce: wire.NewNonce()}
	reply := func(endpoint wire.EndpointName, instance wire.LifecycleUID, e int64, generation string) string {
		r := route
		r.Endpoint, r.Generation = endpoint, generation
		return fbMust(s.ReplySubject(r, instance, e))
	}
	gen := strings.Repeat("b", 32)
	goal := func(endpoint wire.EndpointName, topic []string) string {
		return fbMust(s.FactSubject(endpoint, topic...))
	}
	event := func(e int64) string { return fbMust(s.EventSubject(mgr, iid, e, wire.GoalProgressTopic(c, "g1")...)) }
	_, all, inst := meshwire.ServeFilters(s, mgr, iid, "spawn", false)
	_, _, otherInst := meshwire.ServeFilters(s, mgr, wire.NewLifecycleUID(), "spawn", false)
	records := meshwire.RecordsBucket(s)
	run(t, mc, []check{
		sub("the scatter rail", all, true),
		sub("its instance rail", inst, true),
		sub("another instance's rail", otherInst, false),
		pub("reply at its epoch", reply(mgr, iid, epoch, ""), true),
		pub("reply at its epoch on the versioned rail", reply(mgr, iid, epoch, gen), true),
		pub("reply at another epoch", reply(mgr, iid, epoch+1, ""), false),
		pub("reply as another instance", reply(mgr, wire.NewLifecycleUID(), epoch, ""), false),
		pub("reply as another endpoint", reply("com.acme.search", iid, epoch, ""), false),
		pub("an event at its epoch", event(epoch), true),
		pub("an event at another epoch", event(epoch+1), false),
		pub("a goal's result", goal(mgr, wire.GoalResultTopic(c, "g1")), true),
		pub("a goal's bind", goal(mgr, wire.GoalBindTopic(c, "g1")), false),
		pub("another endpoint's goal result", goal("com.acme.search", wire.GoalResultTopic(c, "g1")), false),
		pub("a contract artifact", fbMust(s.ContractSubject(strings.Repeat("cd", 32))), true),
		pub("its svc spec", records.Subject(meshwire.ServiceKey(mgr, iid, meshwire.ServiceSpecLeaf)), true),
		pub("its svc status", records.Subject(meshwire.ServiceKey(mgr, iid, meshwire.ServiceStatusLeaf)), true),
		pub("another instance's svc spec", records.Subject(meshwire.ServiceKey(mgr, wire.NewLifecycleUID(), meshwire.ServiceSpecLeaf)), false),
		pub("a goal record", records.Subject("goal.manager.x"), false),
		pub("call the manager", epSubject(t, s, epRoute{Address: wire.AddressOne, Endpoint: mgr, Command: "ps", Caller: c}), false),
		sub("a caller's reply rail", s.ReplyReadGrant(c, ""), false),
	})

	// End to end: a caller's request reaches the queue subscription, and the answer on the
	// derived reply subject reaches the caller's reply rail.
	srv, err := mc.QueueSubscribeSync(first(meshwire.ServeFilters(s, mgr, iid, "spawn", false)), queue)
	if err != nil {
		t.Fatal(err)
	}
	inbox, err := carol.SubscribeSync(s.ReplyFilter(route))
	if err != nil {
		t.Fatal(err)
	}
	if err := carol.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := mc.Flush(); err != nil {
		t.Fatal(err)
	}
	request := fbMust(s.RequestSubject(route))
	if err := carol.Publish(request, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	got, err := srv.NextMsg(5 * time.Second)
	if err != nil || got.Subject != request {
		t.Fatalf("the manager got %v, %v", got, err)
	}
	parsed, err := meshwire.ParseRequestSubject(s, got.Subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.Publish(fbMust(s.ReplySubject(parsed, iid, epoch)), []byte(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	if ans, err := inbox.NextMsg(5 * time.Second); err != nil || string(ans.Data) != `{"ok":true}` {
		t.Fatalf("the caller got %v, %v", ans, err)
	}

	// The create-only JetStream publishes need only the subject rows and its inbox: a goal's
	// result fact and a contract artifact land once, and a second write is refused by the stream.
	for _, subject := range []string{goal(mgr, wire.GoalResultTopic(c, "g2")), fbMust(s.ContractSubject(strings.Repeat("ef", 32)))} {
		if _, err := mc.JS.Publish(ctx, subject, []byte(`{}`), jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
			t.Fatalf("create %s: %v", subject, err)
		}
		var apiErr *jetstream.APIError
		if _, err := mc.JS.Publish(ctx, subject, []byte(`{}`), jetstream.WithExpectLastSequencePerSubject(0)); !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
			t.Errorf("a second create of %s = %v, want wrong last sequence", subject, err)
		}
	}
	// Its svc records through the KV client, as the registry writes them (the checks above
	// wrote both once): a watch of its own subtree reads their revisions, a revision-pinned
	// update rewrites each, and the spec is deleted at its revision.
	kv, err := mc.JS.KeyValue(ctx, string(records))
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(ctx, meshwire.ServiceKey(mgr, iid, ">"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	revs := map[string]uint64{}
	for e := range w.Updates() {
		if e == nil {
			break
		}
		revs[e.Key()] = e.Revision()
	}
	if len(revs) != 2 {
		t.Fatalf("the watch of its subtree saw %v, want its spec and status", revs)
	}
	for key, rev := range revs {
		next, err := kv.Update(ctx, key, []byte(`{"v":1}`), rev)
		if err != nil {
			t.Fatalf("update %s: %v", key, err)
		}
		revs[key] = next
	}
	spec := meshwire.ServiceKey(mgr, iid, meshwire.ServiceSpecLeaf)
	if err := kv.Delete(ctx, spec, jetstream.LastRevision(revs[spec])); err != nil {
		t.Errorf("deregister: %v", err)
	}
}

// first returns the first of three serve filters: the class rail.
func first(one, _, _ string) string { return one }
