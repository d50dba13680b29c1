package authority_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
)

// check is one operation a credential tries on a real broker, and whether the broker must allow
// or refuse it.
type check struct {
	name    string
	op      string // "Publish" or "Subscription", as the broker names them
	subject string
	allowed bool
}

// run tries every check on c and asserts the broker's verdict.
func run(t *testing.T, c *meshtest.Client, checks []check) {
	t.Helper()
	for _, ck := range checks {
		t.Run(ck.name, func(t *testing.T) {
			var err error
			switch ck.op {
			case "Publish":
				err = c.Publish(ck.subject, []byte("{}"))
			case "Subscription":
				_, err = c.SubscribeSync(ck.subject)
			default:
				t.Fatalf("unknown op %q", ck.op)
			}
			if err != nil {
				t.Fatalf("%s %s: %v", ck.op, ck.subject, err)
			}
			refused, err := c.Refused(ck.op, ck.subject)
			if err != nil {
				t.Fatal(err)
			}
			if refused == ck.allowed {
				verdict := map[bool]string{true: "allowed", false: "refused"}
				t.Errorf("%s %s: the broker %s it; it must be %s", ck.op, ck.subject, verdict[!refused], verdict[ck.allowed])
			}
		})
	}
}

func pub(name, subject string, allowed bool) check { return check{name, "Publish", subject, allowed} }
func sub(name, subject string, allowed bool) check {
	return check{name, "Subscription", subject, allowed}
}

// TestPermissionMatrix runs each profile's credential against a real broker: what the profile
// must do succeeds, and what it must not do the broker refuses as a permission violation.
func TestPermissionMatrix(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	const (
		S      = "cotal.main."
		alice  = "local.alice"
		bob    = "local.bob"
		forged = "u_bbbbbbbbbbbbbbbbbbbbbbbbbb.alice"
	)
	aliceCred, a := m.Agent(t, ledger.Request{
		Name: "alice", AllowPublish: []string{"team.backend"}, AllowSubscribe: []string{"team.>"}, Role: "reviewer",
	})
	bobCred, _ := m.Agent(t, ledger.Request{Name: "bob", Subscribe: []string{"team.backend"}})
	aliceHist := "chathist_local-alice-" + string(aliceCred.LifecycleUID)
	bobDM := "dm_local-bob-" + string(bobCred.LifecycleUID)
	// A bucket watch creates its ordered consumer on the extended subject, named at random by the
	// client and carrying the bucket's full filter (SPEC §13.9: filter tails are fully qualified).
	watch := func(bucket string) string {
		return "$JS.API.CONSUMER.CREATE.KV_" + bucket + ".w1.$KV." + bucket + ".>"
	}
	unfiltered := func(bucket string) string { return "$JS.API.CONSUMER.CREATE.KV_" + bucket + ".w1" }

	t.Run("agent", func(t *testing.T) {
		run(t, a, []check{
			pub("chat on an allowed channel", S+"chat."+alice+".team.backend", true),
			pub("chat as another owner", S+"chat."+forged+".team.backend", false),
			pub("chat as another actor", S+"chat."+bob+".team.backend", false),
			pub("chat outside allow-publish", S+"chat."+alice+".general", false),
			pub("dm as itself", S+"inst."+bob+"."+alice, true),
			pub("dm with a forged sender", S+"inst."+alice+"."+bob, false),
			pub("anycast as itself", S+"svc.reviewer."+alice, true),
			pub("anycast with a forged sender", S+"svc.reviewer."+bob, false),
			sub("read an allowed channel", S+"chat.*.*.team.backend", true),
			sub("read outside allow-subscribe", S+"chat.*.*.secret", false),
			sub("read every channel", S+"chat.>", false),
			sub("another connection's inbox", "_INBOX_"+bobCred.PublicKey+".>", false),
			sub("the global inbox", "_INBOX.>", false),
			pub("create a consumer on DM", "$JS.API.CONSUMER.CREATE.DM_main.mine", false),
			pub("create a filtered consumer on DM", "$JS.API.CONSUMER.CREATE.DM_main.mine."+S+"inst.>", false),
			pub("create a durable on DM", "$JS.API.CONSUMER.DURABLE.CREATE.DM_main.mine", false),
			pub("create a consumer on TASK", "$JS.API.CONSUMER.CREATE.TASK_main.mine", false),
			pub("create a durable on TASK", "$JS.API.CONSUMER.DURABLE.CREATE.TASK_main.svc_other", false),
			pub("create a consumer on DLV", "$JS.API.CONSUMER.CREATE.DLV_main.mine", false),
			pub("delete another's dm durable", "$JS.API.CONSUMER.DELETE.DM_main."+bobDM, false),
			pub("read another's dm durable", "$JS.API.CONSUMER.MSG.NEXT.DM_main."+bobDM, false),
			pub("direct-get DM", "$JS.API.DIRECT.GET.DM_main", false),
			pub("read DM stream info", "$JS.API.STREAM.INFO.DM_main", false),
			pub("read INBOX stream info", "$JS.API.STREAM.INFO.INBOX_main", false),
			pub("create a stream", "$JS.API.STREAM.CREATE.MINE", false),
			pub("history read in the ACL", "$JS.API.CONSUMER.CREATE.CHAT_main."+aliceHist+"."+S+"chat.*.*.team.backend", true),
			pub("history read outside the ACL", "$JS.API.CONSUMER.CREATE.CHAT_main."+aliceHist+"."+S+"chat.*.*.secret", false),
			pub("history read under another name", "$JS.API.CONSUMER.CREATE.CHAT_main.chathist_x."+S+"chat.*.*.team.backend", false),
			pub("probe liveness as itself", S+"live.manager."+alice, true),
			pub("probe the delivery plane as itself", S+"live.delivery."+alice, true),
			pub("probe liveness as another", S+"live.manager."+bob, false),
			sub("serve the manager plane", S+"live.manager.*.*", false),
			sub("serve the delivery plane", S+"live.delivery.*.*", false),
			sub("hear its own probe answers", S+"live.manager."+alice+".>", true),
			sub("hear another's probe answers", S+"live.manager."+bob+".>", false),
			pub("answer a probe", S+"live.manager."+bob+".reply.x", false),
			pub("write its own presence", "$KV.cotal_presence_main."+alice, true),
			pub("write another's presence", "$KV.cotal_presence_main."+bob, false),
			pub("write the channel registry", "$KV.cotal_channels_main.team", false),
			pub("write the manager lease", "$KV.cotal_manager_main.lease.x", false),
			pub("write the fan-out inbox", S+"dinbox."+alice+".x", false),
			sub("tap the whole space", S+">", false),
			pub("watch presence", watch("cotal_presence_main"), true),
			pub("watch presence by one key", "$JS.API.CONSUMER.CREATE.KV_cotal_presence_main.w1.$KV.cotal_presence_main."+bob, true),
			pub("watch presence with no filter in the subject", unfiltered("cotal_presence_main"), false),
			pub("watch presence with a bare create", "$JS.API.CONSUMER.CREATE.KV_cotal_presence_main", false),
			pub("watch presence with a durable create", "$JS.API.CONSUMER.DURABLE.CREATE.KV_cotal_presence_main.w1", false),
			pub("watch presence filtered on everything", "$JS.API.CONSUMER.CREATE.KV_cotal_presence_main.w1.>", false),
			pub("watch presence filtered outside the bucket", "$JS.API.CONSUMER.CREATE.KV_cotal_presence_main.w1.$KV.cotal_acl_main.>", false),
			pub("watch presence filtered on a relative tail", "$JS.API.CONSUMER.CREATE.KV_cotal_presence_main.w1.local.bob", false),
			pub("watch the channel registry", watch("cotal_channels_main"), true),
			pub("watch the channel registry with no filter in the subject", unfiltered("cotal_channels_main"), false),
			pub("watch the channel registry filtered outside the bucket", "$JS.API.CONSUMER.CREATE.KV_cotal_channels_main.w1."+S+"chat.>", false),
			pub("watch the membership feed", watch("cotal_membership_main"), false),
			pub("watch the ACL bucket", watch("cotal_acl_main"), false),
		})
	})

	profile := func(p authority.Profile, name string) *meshtest.Client {
		return m.Connect(t, m.Mint(t, ledger.Request{Profile: p, Name: name}))
	}

	t.Run("observer", func(t *testing.T) {
		run(t, profile(authority.ProfileObserver, "watcher"), []check{
			sub("read every channel", S+"chat.>", true),
			sub("read direct messages", S+"inst.>", false),
			sub("read tasks", S+"svc.>", false),
			pub("post", S+"chat.local.watcher.team", false),
			pub("send a dm", S+"inst."+bob+".local.watcher", false),
			pub("write presence", "$KV.cotal_presence_main.local.watcher", false),
			pub("read DM history", "$JS.API.STREAM.INFO.DM_main", false),
			pub("watch presence", watch("cotal_presence_main"), true),
			pub("watch presence with no filter in the subject", unfiltered("cotal_presence_main"), false),
			pub("watch the membership feed", watch("cotal_membership_main"), true),
			pub("watch the membership feed with no filter in the subject", unfiltered("cotal_membership_main"), false),
			pub("watch the membership feed filtered outside the bucket", "$JS.API.CONSUMER.CREATE.KV_cotal_membership_main.w1.$KV.cotal_presence_main.>", false),
		})
	})

	t.Run("admin", func(t *testing.T) {
		run(t, profile(authority.ProfileAdmin, "root"), []check{
			sub("read every channel", S+"chat.>", true),
			sub("read direct messages", S+"inst.>", true),
			sub("read tasks", S+"svc.>", true),
			sub("tap the whole space", S+">", false),
			sub("tap the ep rails", S+"ep.>", false),
			sub("tap an ep rail", S+"ep.one.>", false),
			sub("tap the liveness rail", S+"live.>", false),
			pub("post", S+"chat.local.root.team", false),
			pub("read DM history", "$JS.API.STREAM.INFO.DM_main", true),
		})
	})

	t.Run("supervisor", func(t *testing.T) {
		run(t, profile(authority.ProfileSupervisor, "manager"), []check{
			sub("serve the manager plane", S+"live.manager.*.*", true),
			sub("serve the delivery plane", S+"live.delivery.*.*", false),
			pub("answer a manager probe", S+"live.manager."+alice+".reply.n1", true),
			pub("answer a delivery probe", S+"live.delivery."+alice+".reply.n1", false),
			pub("forge a probe", S+"live.manager."+alice, false),
			pub("write its lease", "$KV.cotal_manager_main.lease.x", true),
			pub("post", S+"chat.local.manager.team", false),
			pub("watch presence", watch("cotal_presence_main"), true),
			pub("watch presence with no filter in the subject", unfiltered("cotal_presence_main"), false),
		})
	})

	t.Run("delivery", func(t *testing.T) {
		run(t, profile(authority.ProfileDelivery, "delivery"), []check{
			sub("serve the delivery plane", S+"live.delivery.*.*", true),
			sub("serve the manager plane", S+"live.manager.*.*", false),
			pub("answer a delivery probe", S+"live.delivery."+alice+".reply.n1", true),
			pub("answer a manager probe", S+"live.manager."+alice+".reply.n1", false),
			pub("forge a probe", S+"live.delivery."+alice, false),
			sub("serve durable joins", S+"ctl.delivery.*.*", true),
			pub("fan a copy out", S+"dinbox."+alice+".x", true),
			pub("delete a retired inbox entry", "$JS.API.STREAM.MSG.DELETE.INBOX_main", true),
			pub("post", S+"chat.local.delivery.team", false),
			sub("read direct messages", S+"inst.>", false),
		})
	})

	t.Run("probe", func(t *testing.T) {
		run(t, profile(authority.ProfileProbe, "probe"), []check{
			pub("post", S+"chat.local.probe.team", false),
			pub("jetstream info", "$JS.API.INFO", false),
			pub("write presence", "$KV.cotal_presence_main.local.probe", false),
			sub("read a channel", S+"chat.*.*.team", false),
			sub("tap everything", ">", false),
		})
	})

	t.Run("operator", func(t *testing.T) {
		run(t, profile(authority.ProfileOperator, "me"), []check{
			pub("post anywhere as itself", S+"chat.local.me.any.channel", true),
			pub("post as another", S+"chat."+alice+".team.backend", false),
			pub("dm as itself", S+"inst."+bob+".local.me", true),
			sub("read a channel", S+"chat.*.*.team", false),
			pub("watch the channel registry", watch("cotal_channels_main"), true),
			pub("watch the channel registry with no filter in the subject", unfiltered("cotal_channels_main"), false),
			pub("watch presence filtered outside the bucket", "$JS.API.CONSUMER.CREATE.KV_cotal_presence_main.w1.$KV.cotal_channels_main.>", false),
		})
	})
}

// TestWatchCreatesWithClients runs nats.go's own bucket watches on an agent's pinned create rows:
// a whole bucket, one key and a key listing send the extended create with the bucket's filter,
// and work; a watch of several keys sends a create with no filter in its subject, which the
// broker refuses. (The SDK's roster and the CLI's channel listing run the first and the last.)
func TestWatchCreatesWithClients(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	_, a := m.Agent(t, ledger.Request{Name: "alice", Subscribe: []string{"general"}})
	presence, channels := string(m.Space.PresenceBucket()), string(m.Space.ChannelsBucket())

	initial := func(t *testing.T, w jetstream.KeyWatcher, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		for e := range w.Updates() {
			if e == nil {
				return // the initial values are in
			}
		}
		t.Fatal("the watch ended before its initial values")
	}
	for _, bucket := range []string{presence, channels} {
		t.Run(bucket, func(t *testing.T) {
			kv, err := a.JS.KeyValue(ctx, bucket)
			if err != nil {
				t.Fatal(err)
			}
			w, err := kv.WatchAll(ctx)
			initial(t, w, err)
			w, err = kv.Watch(ctx, "some.key")
			initial(t, w, err)
			if _, err := kv.ListKeys(ctx); err != nil {
				t.Errorf("list keys: %v", err)
			}
		})
	}

	t.Run("a watch of several keys", func(t *testing.T) {
		kv, err := a.JS.KeyValue(ctx, presence)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if w, err := kv.WatchFiltered(wctx, []string{"local.alice", "local.bob"}); err == nil {
			w.Stop()
			t.Fatal("a multi-key watch was created; its create carries no filter in the subject")
		}
		refused := "Permissions Violation for Publish to \"$JS.API.CONSUMER.CREATE.KV_" + presence + "."
		if !slices.ContainsFunc(a.Errors(), func(err error) bool { return strings.Contains(err.Error(), refused) }) {
			t.Errorf("the broker did not refuse the multi-key create (errors: %v)", a.Errors())
		}
	})
}
