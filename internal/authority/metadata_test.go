package authority_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// Server error codes a pinned history create answers with (nats-server's
// JSConsumerCreateFilterSubjectMismatchErr and JSConsumerMultipleFiltersNotAllowed): the server,
// not only the grant, holds the create to the filter its subject names.
const (
	errFilterMismatch  jetstream.ErrorCode = 10131
	errMultipleFilters jetstream.ErrorCode = 10137
)

// jsCall sends a JetStream API request as c and decodes the reply into out. It returns the API
// error the reply carries, and fails the test when no reply comes (a refused request has none).
func jsCall(t *testing.T, c *meshtest.Client, subject string, body, out any) *jetstream.APIError {
	t.Helper()
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	msg, err := c.RequestWithContext(ctx, subject, data)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	var rep struct {
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	if out != nil && rep.Error == nil {
		if err := json.Unmarshal(msg.Data, out); err != nil {
			t.Fatalf("%s: %v", subject, err)
		}
	}
	return rep.Error
}

// jsOK is jsCall for a request that must succeed.
func jsOK(t *testing.T, c *meshtest.Client, subject string, body, out any) {
	t.Helper()
	if apiErr := jsCall(t, c, subject, body, out); apiErr != nil {
		t.Fatalf("%s: %v", subject, apiErr)
	}
}

// storedMsg is the reply of a STREAM.MSG.GET.
type storedMsg struct {
	Message struct {
		Subject string `json:"subject"`
		Seq     uint64 `json:"seq"`
		Data    []byte `json:"data"`
	} `json:"message"`
}

// TestAgentMetadataExposure measures what an ordinary agent learns through every metadata-bearing
// request its grant admits. Mallory may read and post only "general"; alice and bob talk on
// "secret", exchange direct messages and hand out a task, and a post of carol's is purged. The
// content stays out of mallory's reach (the refusals at the end), but the metadata does not: each
// subtest asserts the fact one call reveals, so a change in exposure shows up here. Every call
// measured is a row of the SPEC's agent profile (§9, Appendix B); docs/security.md
// states the residual.
func TestAgentMetadataExposure(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t, meshtest.WithDaemons())
	ctx := t.Context()
	sp := m.Space
	S := sp.Prefix() + "."
	aliceCred, alice := m.Agent(t, ledger.Request{Name: "alice", AllowPublish: []string{"secret"}, Subscribe: []string{"secret"}})
	bobCred, bob := m.Agent(t, ledger.Request{Name: "bob", AllowPublish: []string{"secret"}, Subscribe: []string{"secret"}, Role: "deployer"})
	carolCred, carol := m.Agent(t, ledger.Request{Name: "carol", AllowPublish: []string{"general"}, Subscribe: []string{"general"}, Role: "reviewer"})
	_, dave := m.Agent(t, ledger.Request{Name: "dave", Subscribe: []string{"general"}, Role: "reviewer"})
	malCred, mallory := m.Agent(t, ledger.Request{Name: "mallory", AllowPublish: []string{"general"}, Subscribe: []string{"general"}})
	malLife := wire.Lifecycle{Principal: malCred.Principal, UID: malCred.LifecycleUID}
	aliceLife := wire.Lifecycle{Principal: aliceCred.Principal, UID: aliceCred.LifecycleUID}
	bobLife := wire.Lifecycle{Principal: bobCred.Principal, UID: bobCred.LifecycleUID}

	// msg is a valid message from sender: the mesh's warden deletes any stored message the
	// receive guard refuses.
	msg := func(sender wire.Principal, route func(*wire.CotalMessage)) string {
		m := wire.CotalMessage{ID: wire.NewMessageID(), TS: wire.MillisOf(time.Now()), Space: string(sp),
			From: wire.EndpointRef{ID: sender.String(), Name: sender.Actor()}, Parts: []wire.Part{wire.TextPart("x")}}
		route(&m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	to := func(ch string) func(*wire.CotalMessage) { return func(m *wire.CotalMessage) { m.Channel = ch } }
	dm := func(p wire.Principal) func(*wire.CotalMessage) {
		return func(m *wire.CotalMessage) { m.To = p.String() }
	}
	publish := func(c *meshtest.Client, subject, body string) {
		t.Helper()
		if _, err := c.JS.Publish(ctx, subject, []byte(body)); err != nil {
			t.Fatalf("publish %s: %v", subject, err)
		}
	}
	// CHAT: alice, bob, carol (purged below, as a recall would), alice: sequences 1 to 4.
	publish(alice, must(sp.ChatSubject(aliceCred.Principal, "secret")), msg(aliceCred.Principal, to("secret")))
	publish(bob, must(sp.ChatSubject(bobCred.Principal, "secret")), msg(bobCred.Principal, to("secret")))
	publish(carol, must(sp.ChatSubject(carolCred.Principal, "general")), msg(carolCred.Principal, to("general")))
	publish(alice, must(sp.ChatSubject(aliceCred.Principal, "secret")), msg(aliceCred.Principal, to("secret")))
	purger := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfilePurger, Name: "purger"}))
	jsOK(t, purger, "$JS.API.STREAM.PURGE."+sp.ChatStream(), map[string]string{"filter": must(sp.ChatSubject(carolCred.Principal, "general"))}, nil)
	// DM: three between alice and bob, then mallory's only one, fourth in the stream.
	publish(alice, sp.DMSubject(bobCred.Principal, aliceCred.Principal), msg(aliceCred.Principal, dm(bobCred.Principal)))
	publish(bob, sp.DMSubject(aliceCred.Principal, bobCred.Principal), msg(bobCred.Principal, dm(aliceCred.Principal)))
	publish(alice, sp.DMSubject(bobCred.Principal, aliceCred.Principal), msg(aliceCred.Principal, dm(bobCred.Principal)))
	publish(alice, sp.DMSubject(malCred.Principal, aliceCred.Principal), msg(aliceCred.Principal, dm(malCred.Principal)))
	// TASK: alice hands the deployer role a task.
	publish(alice, must(sp.AnycastSubject("deployer", aliceCred.Principal)), msg(aliceCred.Principal, func(m *wire.CotalMessage) { m.ToService = "deployer" }))
	// The registry describes "secret".
	registrar := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileChannelWriter, Name: "registrar"}))
	publish(registrar, sp.ChannelsBucket().Subject("secret"), `{"description":"the Initech acquisition"}`)

	t.Run("account info counts every stream, consumer and API call", func(t *testing.T) {
		var before, after jetstream.AccountInfo
		jsOK(t, mallory, "$JS.API.INFO", nil, &before)
		const calls = 5
		for range calls {
			jsOK(t, alice, "$JS.API.STREAM.INFO."+sp.ChatStream(), nil, nil)
		}
		jsOK(t, mallory, "$JS.API.INFO", nil, &after)
		// The counter is the account's: alice's calls show, beside mallory's own second one.
		if got := after.API.Total - before.API.Total; got < calls+1 {
			t.Errorf("the API counter moved by %d across %d of alice's calls; it counts the account's calls", got, calls)
		}
		// dm_ and dlv_ of the five agents, svc_deployer and svc_reviewer: the count tracks the
		// number of agents and roles provisioned, whatever mallory may bind.
		if after.Consumers < 12 {
			t.Errorf("account info counts %d consumers, want at least the 12 durables provisioned", after.Consumers)
		}
		// CHAT, DM, TASK, INBOX, DLV and the buckets, most of which mallory may not STREAM.INFO.
		if after.Streams < 6 || after.Store == 0 {
			t.Errorf("account info: %d streams, %d bytes stored", after.Streams, after.Store)
		}
	})

	t.Run("CHAT subjects_filter names channels and who posts where", func(t *testing.T) {
		var info jetstream.StreamInfo
		jsOK(t, mallory, "$JS.API.STREAM.INFO."+sp.ChatStream(), map[string]any{"subjects_filter": ">"}, &info)
		want := map[string]uint64{
			S + "chat.local.alice.secret": 2, // the leak: a channel mallory may not read, its posters and their counts
			S + "chat.local.bob.secret":   1,
		}
		if !maps.Equal(info.State.Subjects, want) {
			t.Errorf("CHAT subjects = %v, want %v", info.State.Subjects, want)
		}
		// A narrower filter asks where one principal posts.
		var alices jetstream.StreamInfo
		jsOK(t, mallory, "$JS.API.STREAM.INFO."+sp.ChatStream(), map[string]any{"subjects_filter": S + "chat.local.alice.>"}, &alices)
		if want := map[string]uint64{S + "chat.local.alice.secret": 2}; !maps.Equal(alices.State.Subjects, want) {
			t.Errorf("alice's subjects = %v, want %v", alices.State.Subjects, want)
		}
	})

	t.Run("CHAT deleted_details shows where messages were removed", func(t *testing.T) {
		var info jetstream.StreamInfo
		jsOK(t, mallory, "$JS.API.STREAM.INFO."+sp.ChatStream(), map[string]any{"deleted_details": true}, &info)
		st := info.State
		if !slices.Equal(st.Deleted, []uint64{3}) || st.NumDeleted != 1 || st.LastSeq != 4 || st.Msgs != 3 {
			t.Errorf("CHAT state: deleted %v (%d), last %d, %d messages; want deleted [3], last 4, 3 messages", st.Deleted, st.NumDeleted, st.LastSeq, st.Msgs)
		}
	})

	t.Run("TASK subjects_filter with a role names every role's callers", func(t *testing.T) {
		var info jetstream.StreamInfo
		jsOK(t, carol, "$JS.API.STREAM.INFO."+sp.TaskStream(), map[string]any{"subjects_filter": ">"}, &info)
		// carol is a reviewer; the pending task is the deployer role's, and names its sender.
		want := map[string]uint64{S + "svc.deployer.local.alice": 1}
		if !maps.Equal(info.State.Subjects, want) {
			t.Errorf("TASK subjects = %v, want %v", info.State.Subjects, want)
		}
	})

	t.Run("bucket stream info lists the registry and lease keys", func(t *testing.T) {
		var info jetstream.StreamInfo
		jsOK(t, mallory, "$JS.API.STREAM.INFO."+sp.ChannelsBucket().Stream(), map[string]any{"subjects_filter": ">"}, &info)
		for _, key := range []string{"secret", wire.ChannelDefaultsKey} {
			if info.State.Subjects[sp.ChannelsBucket().Subject(key)] != 1 {
				t.Errorf("the registry's subjects %v lack %s", info.State.Subjects, key)
			}
		}
		var lease jetstream.StreamInfo
		jsOK(t, mallory, "$JS.API.STREAM.INFO."+meshwire.DeliveryBucket(sp).Stream(), map[string]any{"subjects_filter": ">"}, &lease)
		if lease.State.Subjects[meshwire.DeliveryBucket(sp).Subject(meshwire.LeaseKey(0))] != 1 {
			t.Errorf("the delivery lease's subjects = %v", lease.State.Subjects)
		}
	})

	t.Run("point reads return registry and lease rows of any key", func(t *testing.T) {
		var row storedMsg
		jsOK(t, mallory, "$JS.API.STREAM.MSG.GET."+sp.ChannelsBucket().Stream(), map[string]string{"last_by_subj": sp.ChannelsBucket().Subject("secret")}, &row)
		var cfg struct {
			Description string `json:"description"`
		}
		if err := json.Unmarshal(row.Message.Data, &cfg); err != nil || cfg.Description != "the Initech acquisition" {
			t.Errorf("secret's registry row = %q (%v)", row.Message.Data, err)
		}
		var leaseRow storedMsg
		jsOK(t, mallory, "$JS.API.STREAM.MSG.GET."+meshwire.DeliveryBucket(sp).Stream(), map[string]string{"last_by_subj": meshwire.DeliveryBucket(sp).Subject(meshwire.LeaseKey(0))}, &leaseRow)
		var lease struct {
			Holder string `json:"holder"`
		}
		if err := json.Unmarshal(leaseRow.Message.Data, &lease); err != nil || lease.Holder == "" {
			t.Errorf("the delivery lease row = %q (%v)", leaseRow.Message.Data, err)
		}
	})

	t.Run("its own dm durable numbers the space's direct messages", func(t *testing.T) {
		cons, err := mallory.JS.Consumer(ctx, sp.DMStream(), wire.DMDurable(malLife))
		if err != nil {
			t.Fatal(err)
		}
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		if err := msg.Ack(); err != nil {
			t.Fatal(err)
		}
		var info jetstream.ConsumerInfo
		jsOK(t, mallory, "$JS.API.CONSUMER.INFO."+sp.DMStream()+"."+wire.DMDurable(malLife), nil, &info)
		// Three direct messages between others came first: their count, never who or what. The
		// delivered message's own ack subject carries the same sequence, so binding alone tells it.
		if meta.Sequence.Stream != 4 || info.Delivered.Stream != 4 {
			t.Errorf("mallory's dm is stream sequence %d, consumer info says %d; want 4", meta.Sequence.Stream, info.Delivered.Stream)
		}
	})

	t.Run("its role durable shows its peers waiting", func(t *testing.T) {
		svc := must(wire.TaskDurable("reviewer"))
		inbox := dave.NewRespInbox()
		waiting, err := dave.SubscribeSync(inbox)
		if err != nil {
			t.Fatal(err)
		}
		defer waiting.Unsubscribe()
		if err := dave.PublishRequest("$JS.API.CONSUMER.MSG.NEXT."+sp.TaskStream()+"."+svc, inbox, []byte(`{"batch":1,"expires":30000000000}`)); err != nil {
			t.Fatal(err)
		}
		poll := time.NewTicker(20 * time.Millisecond)
		defer poll.Stop()
		deadline := time.After(10 * time.Second)
		for {
			var info jetstream.ConsumerInfo
			jsOK(t, carol, "$JS.API.CONSUMER.INFO."+sp.TaskStream()+"."+svc, nil, &info)
			if info.NumWaiting == 1 {
				return // dave, idle and pulling, shows as one waiting request
			}
			select {
			case <-poll.C:
			case <-deadline:
				t.Fatalf("svc_reviewer shows %d waiting pulls, want dave's 1", info.NumWaiting)
			}
		}
	})

	t.Run("a pinned watch create counts a bucket's keys", func(t *testing.T) {
		b := sp.ChannelsBucket()
		var info jetstream.ConsumerInfo
		jsOK(t, mallory, "$JS.API.CONSUMER.CREATE."+b.Stream()+".peek."+b.Subject(">"), map[string]any{
			"stream_name": b.Stream(),
			"config":      map[string]any{"name": "peek", "filter_subject": b.Subject(">"), "ack_policy": "none", "deliver_policy": "last_per_subject"},
		}, &info)
		if info.NumPending != 2 { // "=defaults" and "secret": what the registry watch shows anyway
			t.Errorf("the registry watch has %d pending, want 2", info.NumPending)
		}
		jsOK(t, mallory, "$JS.API.CONSUMER.DELETE."+b.Stream()+".peek", nil, nil)
	})

	t.Run("the server holds a history create to its subject's filter", func(t *testing.T) {
		hist := wire.ChatHistConsumer(malLife)
		create := "$JS.API.CONSUMER.CREATE." + sp.ChatStream() + "." + hist + "." + must(sp.ChatFilter("general"))
		tests := []struct {
			name   string
			config map[string]any
			want   jetstream.ErrorCode
		}{
			{"another channel in the body", map[string]any{"filter_subject": must(sp.ChatFilter("secret"))}, errFilterMismatch},
			{"no filter in the body", map[string]any{}, errFilterMismatch},
			{"two filters in the body", map[string]any{"filter_subjects": []string{must(sp.ChatFilter("general")), must(sp.ChatFilter("secret"))}}, errMultipleFilters},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				tt.config["name"], tt.config["ack_policy"] = hist, "none"
				apiErr := jsCall(t, mallory, create, map[string]any{"stream_name": sp.ChatStream(), "config": tt.config}, nil)
				if apiErr == nil || apiErr.ErrorCode != tt.want {
					t.Errorf("create %s = %v, want error %d", tt.name, apiErr, tt.want)
				}
			})
		}
	})

	t.Run("what the grant does not admit", func(t *testing.T) {
		run(t, mallory, []check{
			pub("STREAM.INFO on DM", "$JS.API.STREAM.INFO."+sp.DMStream(), false),
			pub("STREAM.INFO on DLV", "$JS.API.STREAM.INFO."+sp.DLVStream(), false),
			pub("STREAM.INFO on INBOX", "$JS.API.STREAM.INFO."+meshwire.InboxStream(sp), false),
			pub("STREAM.INFO on TASK without a role", "$JS.API.STREAM.INFO."+sp.TaskStream(), false),
			pub("STREAM.INFO on WFJ", "$JS.API.STREAM.INFO."+meshwire.WFJStream(sp), false),
			pub("STREAM.INFO on the membership feed", "$JS.API.STREAM.INFO."+meshwire.MembershipBucket(sp).Stream(), false),
			pub("STREAM.INFO on the ACL bucket", "$JS.API.STREAM.INFO."+meshwire.ACLBucket(sp).Stream(), false),
			pub("STREAM.INFO on the members bucket", "$JS.API.STREAM.INFO."+meshwire.MembersBucket(sp).Stream(), false),
			pub("STREAM.INFO on the manager lease", "$JS.API.STREAM.INFO."+meshwire.ManagerBucket(sp).Stream(), false),
			pub("STREAM.INFO on the auth store", "$JS.API.STREAM.INFO."+meshwire.AuthBucket(sp).Stream(), false),
			pub("list stream names", "$JS.API.STREAM.NAMES", false),
			pub("list streams", "$JS.API.STREAM.LIST", false),
			pub("list CHAT consumers", "$JS.API.CONSUMER.LIST."+sp.ChatStream(), false),
			pub("list DM consumer names", "$JS.API.CONSUMER.NAMES."+sp.DMStream(), false),
			pub("list presence watchers", "$JS.API.CONSUMER.NAMES."+sp.PresenceBucket().Stream(), false),
			pub("point-read CHAT", "$JS.API.STREAM.MSG.GET."+sp.ChatStream(), false),
			pub("direct-get CHAT", "$JS.API.DIRECT.GET."+sp.ChatStream(), false),
			pub("direct-get a CHAT subject", "$JS.API.DIRECT.GET."+sp.ChatStream()+"."+S+"chat.local.alice.secret", false),
			pub("point-read presence", "$JS.API.STREAM.MSG.GET."+sp.PresenceBucket().Stream(), false),
			pub("point-read the ACL bucket", "$JS.API.STREAM.MSG.GET."+meshwire.ACLBucket(sp).Stream(), false),
			pub("direct-get the registry", "$JS.API.DIRECT.GET."+sp.ChannelsBucket().Stream()+"."+sp.ChannelsBucket().Subject("secret"), false),
			pub("consumer info of another's dm durable", "$JS.API.CONSUMER.INFO."+sp.DMStream()+"."+wire.DMDurable(bobLife), false),
			pub("consumer info of another's history read", "$JS.API.CONSUMER.INFO."+sp.ChatStream()+"."+wire.ChatHistConsumer(aliceLife), false),
			pub("consumer info of a role durable", "$JS.API.CONSUMER.INFO."+sp.TaskStream()+".svc_deployer", false),
			pub("a history read of secret", "$JS.API.CONSUMER.CREATE."+sp.ChatStream()+"."+wire.ChatHistConsumer(malLife)+"."+must(sp.ChatFilter("secret")), false),
			pub("a watch create with no filter in the subject", "$JS.API.CONSUMER.CREATE."+sp.ChannelsBucket().Stream()+".peek", false),
		})
		run(t, carol, []check{
			pub("consumer info of another role's durable", "$JS.API.CONSUMER.INFO."+sp.TaskStream()+".svc_deployer", false),
			pub("STREAM.INFO on DM with a role", "$JS.API.STREAM.INFO."+sp.DMStream(), false),
		})
	})
}
