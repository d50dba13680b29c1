package warden_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/warden"
	"github.com/gocotal/cotal/wire"
)

// consumerWait bounds how long a consumer test waits for the warden's verdict; it arrives within
// a revocation (a ledger write, a claims update, an eviction), the bound only keeps a broken test
// from hanging.
const consumerWait = 15 * time.Second

// The warden's messages at Warn; an ordinary agent must never cause one.
const (
	msgQuota    = "consumer quota exceeded"
	msgDeliver  = "consumer delivers outside its creator's inbox"
	msgRevoked  = "credential revoked"
	floodBudget = 2000
)

// find returns the first record in logs with message msg about userKey.
func find(logs *meshtest.Logs, msg, userKey string) (slog.Record, bool) {
	for _, r := range logs.Records() {
		if r.Message == msg && meshtest.Attr(r, "user_key") == userKey {
			return r, true
		}
	}
	return slog.Record{}, false
}

// consumerMesh is a mesh with its daemons and warden running, the warnings of its log, and a
// trusted view of every stream (a warden credential of the test's own).
type consumerMesh struct {
	*meshtest.Mesh
	warn *meshtest.Logs
	nc   *nats.Conn
	js   jetstream.JetStream
}

func startConsumerMesh(t *testing.T) *consumerMesh {
	t.Helper()
	w := &meshtest.Logs{Min: slog.LevelWarn}
	m := meshtest.Start(t, meshtest.WithDaemons(), func(o *mesh.Options) { o.Log = slog.New(w) })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := m.WardensReady(ctx); err != nil {
		t.Fatalf("warden not ready: %v; warnings: %v", err, w)
	}
	nc := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileWarden, Name: "consumer_inspector"})).Conn
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &consumerMesh{Mesh: m, warn: w, nc: nc, js: js}
}

// until polls cond until it holds or consumerWait passes, then fails with what cond last said.
func until(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(consumerWait)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s (%s)", what, consumerWait, last)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitRevoked waits until the ledger shows cred revoked with a reason containing why and the
// broker refuses it.
func (cm *consumerMesh) waitRevoked(t *testing.T, cred *authority.Credential, why string) {
	t.Helper()
	until(t, "ledger revokes "+cred.Principal.String(), func() (bool, string) {
		rows, err := cm.Ledger("").Credentials(t.Context())
		if err != nil {
			return false, err.Error()
		}
		for _, r := range rows {
			if r.UserKey == cred.PublicKey {
				return r.State == authstore.CredRevoked && strings.Contains(r.Reason, why), fmt.Sprintf("row %s %q; log: %v", r.State, r.Reason, cm.warn)
			}
		}
		return false, "no row"
	})
	// The ledger row moves first; the broker's refusal follows the claims update.
	until(t, "the broker refuses "+cred.Principal.String(), func() (bool, string) {
		ctx, cancel := context.WithTimeout(t.Context(), consumerWait)
		defer cancel()
		nc, err := dial.As(ctx, cm.URL(), cred)
		if err != nil {
			return true, ""
		}
		nc.Close()
		return false, "it still connects"
	})
}

// consumers lists the names of a stream's consumers that start with prefix.
func (cm *consumerMesh) consumers(t *testing.T, stream, prefix string) ([]string, error) {
	t.Helper()
	s, err := cm.js.Stream(t.Context(), stream)
	if err != nil {
		return nil, err
	}
	var names []string
	l := s.ListConsumers(t.Context())
	for ci := range l.Info() {
		if strings.HasPrefix(ci.Name, prefix) {
			names = append(names, ci.Name)
		}
	}
	return names, l.Err()
}

// waitNoConsumers waits until stream has no consumer whose name starts with prefix.
func (cm *consumerMesh) waitNoConsumers(t *testing.T, stream, prefix string) {
	t.Helper()
	until(t, "consumers "+prefix+"* on "+stream+" deleted", func() (bool, string) {
		names, err := cm.consumers(t, stream, prefix)
		if err != nil {
			return false, err.Error()
		}
		return len(names) == 0, fmt.Sprintf("%d left", len(names))
	})
}

// createRequest is a raw consumer create on a bucket's stream, in the extended form that names
// the consumer and its filter in the subject; filter "" is the whole bucket, deliverSubject ""
// a durable pull consumer.
func createRequest(t *testing.T, b wire.Bucket, name, filter, deliverSubject string) (subject string, body []byte) {
	t.Helper()
	if filter == "" {
		filter = b.Subject(">")
	}
	cfg := map[string]any{"name": name, "filter_subject": filter, "ack_policy": "none", "deliver_policy": "all"}
	if deliverSubject == "" {
		cfg["durable_name"] = name
	} else {
		cfg["deliver_subject"] = deliverSubject
	}
	body, err := json.Marshal(map[string]any{"stream_name": b.Stream(), "config": cfg})
	if err != nil {
		t.Fatal(err)
	}
	return "$JS.API.CONSUMER.CREATE." + b.Stream() + "." + name + "." + filter, body
}

// apiError returns the error of a JetStream API response, "" for a success.
func apiError(data []byte) string {
	var res struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return "unreadable response: " + err.Error()
	}
	if res.Error != nil {
		return res.Error.Description
	}
	return ""
}

// flood creates durable consumers on the presence bucket's stream from nc, from several
// goroutines, until budget is spent or the broker stops answering her (her credential revoked,
// her connection closed) or refuses a create. It returns how many were created and why it ended.
func flood(t *testing.T, nc *nats.Conn, b wire.Bucket, budget int) (made int64, ended string) {
	t.Helper()
	var next, ok atomic.Int64
	var why sync.Map
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(budget) {
					return
				}
				subject, body := createRequest(t, b, fmt.Sprintf("flood-%d", i), "", "")
				rep, err := nc.Request(subject, body, 5*time.Second)
				if err != nil {
					why.Store("err", err.Error())
					return
				}
				if e := apiError(rep.Data); e != "" {
					why.Store("refused", e)
					return
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	ended = "budget spent"
	why.Range(func(k, v any) bool { ended = fmt.Sprintf("%s: %s", k, v); return false })
	return ok.Load(), ended
}

// TestConsumerFloodIsCutOff is the flood: one agent creates durable watch consumers on
// the presence bucket as fast as she can; unchecked, she reaches the broker's consumer limit
// for the stream and every other client's presence watch fails. The warden revokes her
// credential, deletes every consumer she made, and a second agent then connects, watches
// presence, posts and sends a direct message.
func TestConsumerFloodIsCutOff(t *testing.T) {
	cm := startConsumerMesh(t)
	ctx := t.Context()
	team := []string{"team.backend"}
	alice := cm.AgentCred(t, ledger.Request{Name: "alice", Subscribe: team})
	bobCred := cm.AgentCred(t, ledger.Request{Name: "bob", Subscribe: team, AllowPublish: team})
	malCred := cm.AgentCred(t, ledger.Request{Name: "mallory"})
	mal := cm.Connect(t, malCred, nats.NoReconnect())
	presence := cm.Space.PresenceBucket()

	start := time.Now()
	made, ended := flood(t, mal.Conn, presence, floodBudget)
	t.Logf("mallory created %d consumers in %s before the flood ended (%s)", made, time.Since(start).Round(time.Millisecond), ended)

	cm.waitRevoked(t, malCred, "over the quota")
	until(t, "the broker closes mallory's connection", func() (bool, string) {
		return mal.IsClosed(), mal.Status().String()
	})
	cm.waitNoConsumers(t, presence.Stream(), "flood-")
	r, found := find(cm.warn, msgQuota, malCred.PublicKey)
	if !found {
		t.Fatalf("no %q warning for mallory's key; warnings: %v", msgQuota, cm.warn)
	}
	if p := meshtest.Attr(r, "principal"); p != malCred.Principal.String() {
		t.Errorf("the quota warning names principal %q, want %q", p, malCred.Principal)
	}
	t.Logf("warden: %s at %s consumers", r.Message, meshtest.Attr(r, "consumers"))

	bob, err := cotal.Connect(ctx, cm.URL(), cotal.WithCredsData(bobCred.Creds), cotal.WithJoin("team.backend"))
	if err != nil {
		t.Fatalf("bob connects after the flood: %v", err)
	}
	t.Cleanup(func() { _ = bob.Close(context.WithoutCancel(ctx)) }) // the mesh's cleanup closes it otherwise
	// The presence watch is what the flood broke for everyone: the stream's consumer limit.
	roster, err := bob.Roster(ctx)
	if err != nil {
		t.Fatalf("bob watches presence after the flood: %v", err)
	}
	roster.Stop()
	if _, err := bob.Post(ctx, "team.backend", []wire.Part{wire.TextPart("still here")}); err != nil {
		t.Fatalf("bob posts after the flood: %v", err)
	}
	if _, err := bob.DirectMessage(ctx, alice.Principal, []wire.Part{wire.TextPart("psst")}); err != nil {
		t.Fatalf("bob sends a direct message after the flood: %v", err)
	}
	if _, found := find(cm.warn, msgQuota, bobCred.PublicKey); found {
		t.Error("the warden judged bob over quota")
	}
}

// TestConsumerDeliverSubjectOutsideInbox is the confused-deputy write: a push consumer on the
// presence bucket whose deliver subject is a subject a stream of the space captures. The broker
// accepts it (nats-server#8274); the warden deletes it and revokes its creator.
//
// The broker starts delivering only once some client subscribes the deliver subject literally:
// a stream's own capture is a wildcard subscription, which does not count. So the registry row
// is reached only if someone happens to; mallory's own literal subscription to alice's chat
// subject, which her read grant on #general allows, makes the chat attack live at once. A
// delivered message keeps its source subject, so it lands in the target's stream under a
// presence subject. Whatever the broker stored before the deletion is the stream and bucket
// guards' to quarantine; the test reports it.
func TestConsumerDeliverSubjectOutsideInbox(t *testing.T) {
	cm := startConsumerMesh(t)
	ctx := t.Context()
	channels, presence := cm.Space.ChannelsBucket(), cm.Space.PresenceBucket()

	// The registry row the first attack aims at, written by its legitimate writer.
	writer := cm.Connect(t, cm.Mint(t, ledger.Request{Profile: authority.ProfileChannelWriter, Name: "writer"}))
	kv, err := writer.JS.KeyValue(ctx, string(channels))
	if err != nil {
		t.Fatal(err)
	}
	row, _ := json.Marshal(wire.ChannelConfig{Description: "the general channel"}) // always encodes
	if _, err := kv.Put(ctx, "general", row); err != nil {
		t.Fatal(err)
	}
	// Alice online: her presence row is what the consumer delivers.
	general := []string{"general"}
	aliceCred := cm.AgentCred(t, ledger.Request{Name: "alice", Subscribe: general, AllowPublish: general})
	alice, err := cotal.Connect(ctx, cm.URL(), cotal.WithCredsData(aliceCred.Creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = alice.Close(context.WithoutCancel(ctx)) }) // the mesh's cleanup closes it otherwise
	aliceChat, err := cm.Space.ChatSubject(aliceCred.Principal, "general")
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, mallory, stream, target string
		literal                       bool // mallory subscribes the target literally, which starts delivery
	}{
		{name: "channel registry row", mallory: "mallory_registry", stream: channels.Stream(), target: channels.Subject("general")},
		{name: "alice's chat subject", mallory: "mallory_chat", stream: cm.Space.ChatStream(), target: aliceChat, literal: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mname := tc.mallory
			malCred, mal := cm.Agent(t, ledger.Request{Name: mname, Subscribe: general})
			if tc.literal {
				if _, err := mal.SubscribeSync(tc.target); err != nil {
					t.Fatal(err)
				}
				if refused, err := mal.Refused("Subscription", tc.target); err != nil || refused {
					t.Fatalf("mallory's literal subscription to %s: refused=%v (%v)", tc.target, refused, err)
				}
			}
			target, err := cm.js.Stream(ctx, tc.stream)
			if err != nil {
				t.Fatal(err)
			}
			before := target.CachedInfo().State.LastSeq

			subject, body := createRequest(t, presence, "evil", "", tc.target)
			rep, err := mal.Request(subject, body, 5*time.Second)
			if err != nil {
				t.Fatalf("create the push consumer: %v", err)
			}
			if e := apiError(rep.Data); e != "" {
				t.Fatalf("the broker refused the push consumer (%s): the hole this test covers is closed", e)
			}
			var created struct {
				NumPending uint64 `json:"num_pending"`
			}
			if err := json.Unmarshal(rep.Data, &created); err != nil || created.NumPending == 0 {
				t.Fatalf("the push consumer has nothing to deliver (%v): %s", err, rep.Data)
			}

			cm.waitRevoked(t, malCred, "delivered to "+tc.target)
			cm.waitNoConsumers(t, presence.Stream(), "evil")
			r, found := find(cm.warn, msgDeliver, malCred.PublicKey)
			if !found {
				t.Fatalf("no %q warning for %s's key; warnings: %v", msgDeliver, mname, cm.warn)
			}
			if ds := meshtest.Attr(r, "deliver_subject"); ds != tc.target {
				t.Errorf("the warning names deliver subject %q, want %q", ds, tc.target)
			}

			info, err := target.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d messages stored since the consumer was created: %v",
				tc.stream, info.State.LastSeq-before, cm.stored(t, tc.stream, before+1, info.State.LastSeq))
		})
	}
}

// stored describes the messages a stream holds from sequence first to last, read leader-served:
// the buckets allow Direct Get, which jetstream would use and no credential of the test holds.
func (cm *consumerMesh) stored(t *testing.T, stream string, first, last uint64) []string {
	t.Helper()
	var out []string
	for seq := first; seq <= last; seq++ {
		req, _ := json.Marshal(map[string]uint64{"seq": seq}) // always encodes
		rep, err := cm.nc.Request("$JS.API.STREAM.MSG.GET."+stream, req, 5*time.Second)
		if err != nil {
			t.Fatalf("read %s #%d: %v", stream, seq, err)
		}
		var res struct {
			Message *struct {
				Subject string `json:"subject"`
				Data    []byte `json:"data"`
			} `json:"message"`
		}
		if e := apiError(rep.Data); e != "" || json.Unmarshal(rep.Data, &res) != nil || res.Message == nil {
			out = append(out, fmt.Sprintf("#%d gone (%s)", seq, apiError(rep.Data)))
			continue
		}
		out = append(out, fmt.Sprintf("#%d on %s: %q", seq, res.Message.Subject, res.Message.Data))
	}
	return out
}

// TestConsumerAuditSparesOrdinaryAgents churns through more watch and history consumers than the
// quota, as an ordinary SDK agent does over a long session: rosters opened and stopped, channels
// joined (with their history read) and left, reconnects. The warden judges none of it.
func TestConsumerAuditSparesOrdinaryAgents(t *testing.T) {
	meshtest.Long(t, "a soak of consumer churn")
	cm := startConsumerMesh(t)
	ctx := t.Context()
	chans := []string{"team.a", "team.b", "team.c"}
	writer := cm.Connect(t, cm.Mint(t, ledger.Request{Profile: authority.ProfileChannelWriter, Name: "writer"}))
	kv, err := writer.JS.KeyValue(ctx, string(cm.Space.ChannelsBucket()))
	if err != nil {
		t.Fatal(err)
	}
	replay := true
	row, _ := json.Marshal(wire.ChannelConfig{Replay: &replay}) // always encodes
	for _, ch := range chans {
		if _, err := kv.Put(ctx, ch, row); err != nil {
			t.Fatal(err)
		}
	}
	carolCred := cm.AgentCred(t, ledger.Request{Name: "carol", Subscribe: chans, AllowPublish: chans})
	carol, err := cotal.Connect(ctx, cm.URL(), cotal.WithCredsData(carolCred.Creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = carol.Close(context.WithoutCancel(ctx)) }) // closed again below; its error is moot
	for _, ch := range chans {
		if _, err := carol.Post(ctx, ch, []wire.Part{wire.TextPart("history on " + ch)}); err != nil {
			t.Fatal(err)
		}
	}

	aliceCred := cm.AgentCred(t, ledger.Request{Name: "alice", Subscribe: chans, AllowPublish: chans})
	const quota, reconnects = 128, 3 // warden.DefaultConsumerQuota
	created := 0
	for range reconnects {
		alice, err := cotal.Connect(ctx, cm.URL(), cotal.WithCredsData(aliceCred.Creds), cotal.WithJoin(chans...))
		if err != nil {
			t.Fatal(err)
		}
		for range quota/reconnects + 1 {
			r, err := alice.Roster(ctx)
			if err != nil {
				t.Fatal(err)
			}
			r.Stop()
			created++
		}
		for range 5 {
			for _, ch := range chans {
				if err := alice.Leave(ctx, ch); err != nil {
					t.Fatal(err)
				}
				if _, err := alice.Join(ctx, ch); err != nil {
					t.Fatal(err)
				}
				created++
			}
		}
		if _, err := alice.Post(ctx, chans[0], []wire.Part{wire.TextPart("fine")}); err != nil {
			t.Fatalf("alice posts: %v", err)
		}
		if err := alice.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("alice created at least %d consumers over %d connections", created, reconnects)

	// A barrier: the warden judges the audit's advisories in order, so once it has judged a
	// consumer created after all of alice's, it has judged hers. The barrier's push consumer
	// delivers outside its inbox, onto a subject nothing captures.
	barrierCred, barrier := cm.Agent(t, ledger.Request{Name: "barrier"})
	subject, body := createRequest(t, cm.Space.PresenceBucket(), "barrier", "", "nowhere.barrier")
	rep, err := barrier.Request(subject, body, 5*time.Second)
	if err != nil || apiError(rep.Data) != "" {
		t.Fatalf("barrier consumer: %v %s", err, rep.Data)
	}
	cm.waitRevoked(t, barrierCred, "delivered to")

	for _, r := range cm.warn.Records() {
		if k := meshtest.Attr(r, "user_key"); k == aliceCred.PublicKey || k == carolCred.PublicKey {
			t.Errorf("the warden warned about an ordinary agent: %s %v", r.Message, r)
		}
	}
	rows, err := cm.Ledger("").Credentials(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if (r.UserKey == aliceCred.PublicKey || r.UserKey == carolCred.PublicKey) && r.State != authstore.CredActive {
			t.Errorf("%s's credential is %s: %s", r.Principal, r.State, r.Reason)
		}
	}
}

// TestConsumerAuditIgnoresForgedAdvisories: a consumer delivery keeps its own subject but goes
// wherever its pull names, so an agent can pull a direct message she sent herself onto the
// broker's advisory subjects. A forged "consumer deleted" for each consumer she creates would
// keep her count at zero; the audit takes an advisory only from the broker (no reply, its exact
// subject and type), and she is judged over quota all the same.
func TestConsumerAuditIgnoresForgedAdvisories(t *testing.T) {
	cm := startConsumerMesh(t)
	malCred := cm.AgentCred(t, ledger.Request{Name: "mallory"})
	mal := cm.Connect(t, malCred, nats.NoReconnect())
	presence := cm.Space.PresenceBucket()
	me := malCred.Principal
	self := cm.Space.DMSubject(me, me)
	next := jsapi.ConsumerNext + cm.Space.DMStream() + "." + wire.DMDurable(wire.Lifecycle{Principal: me, UID: malCred.LifecycleUID})
	forged := 0
	for i := 1; i <= 2*warden.DefaultConsumerQuota && !mal.IsClosed(); i++ {
		name := fmt.Sprintf("flood-%d", i)
		subject, body := createRequest(t, presence, name, "", "")
		if _, err := mal.Request(subject, body, 5*time.Second); err != nil {
			break // revoked: the broker closed her connection
		}
		// A valid direct message to herself (the warden keeps it) carrying the advisory's fields.
		var dm map[string]any
		if err := json.Unmarshal(message(t, cm.Space, me, "x", func(m *wire.CotalMessage) { m.To = me.String() }), &dm); err != nil {
			t.Fatal(err)
		}
		dm["type"], dm["stream"], dm["consumer"], dm["action"] = "io.nats.jetstream.advisory.v1.consumer_action", presence.Stream(), name, "deleted"
		raw, _ := json.Marshal(dm)
		if mal.Publish(self, raw) != nil || mal.PublishRequest(next, strings.TrimSuffix(jsapi.ConsumerDeletedAdvs, ">")+presence.Stream()+"."+name, []byte(`{"batch":1,"no_wait":true}`)) != nil {
			break
		}
		forged++
	}
	t.Logf("mallory forged %d deletion advisories", forged)
	cm.waitRevoked(t, malCred, "over the quota")
	cm.waitNoConsumers(t, presence.Stream(), "flood-")
}

// TestCaptureSenderIsRevoked: a capture stored in a bucket (planted through the store account,
// as no reply from the space's account reaches one) is traced to the sender the message its
// acknowledgement names proves, who is revoked; a flood of them makes the warden write one line a
// second, not one per capture.
func TestCaptureSenderIsRevoked(t *testing.T) {
	cm := startConsumerMesh(t)
	sp := cm.Space
	req := ledger.Request{Subscribe: []string{"general"}, AllowPublish: []string{"general"}}
	req.Name = "flooder"
	cred, _ := cm.Agent(t, req)
	own, _ := sp.ChatSubject(cred.Principal, "general")
	target := sp.ChannelsBucket().Subject("general")
	body := []byte(`{"id":"x"}`) // the chat stream's judge refuses it; only the acknowledgement matters
	store := cm.StoreClient(t)
	sent := 0
	for range 500 {
		if err := store.PublishMsg(&nats.Msg{Subject: own, Reply: target, Data: body}); err != nil {
			t.Fatal(err)
		}
		sent++
		time.Sleep(time.Millisecond)
	}
	cm.waitRevoked(t, cred, "aimed a JetStream reply at")
	repaired := 0
	for _, r := range cm.warn.Records() {
		if r.Message == "bucket row repaired" {
			repaired++
		}
	}
	if repaired == 0 || repaired > 5 {
		t.Errorf("%d captures sent, %d repair lines logged: want at least one and at most a line a second; log: %v", sent, repaired, cm.warn)
	}
}

// TestContractStoreCaptureIsReported: the warden reads the contract stream too. A capture stored
// there (planted through the store account) cannot be deleted (the stream refuses deletes
// whoever asks); the warden reports it and revokes its sender.
func TestContractStoreCaptureIsReported(t *testing.T) {
	cm := startConsumerMesh(t)
	sp := cm.Space
	req := ledger.Request{Subscribe: []string{"general"}, AllowPublish: []string{"general"}}
	req.Name = "miner"
	cred, _ := cm.Agent(t, req)
	own, _ := sp.ChatSubject(cred.Principal, "general")
	at, err := sp.ContractSubject(strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	if err := cm.StoreClient(t).PublishMsg(&nats.Msg{Subject: own, Reply: at, Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	cm.waitRevoked(t, cred, "aimed a JetStream reply at "+meshwire.ContractStream(sp))
	until(t, "the warden reports the capture it cannot delete", func() (bool, string) {
		for _, r := range cm.warn.Records() {
			if r.Message == "capture stored where the broker refuses deletes" && meshtest.Attr(r, "subject") == at {
				return true, ""
			}
		}
		return false, cm.warn.String()
	})
}
