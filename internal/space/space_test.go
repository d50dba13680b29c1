package space_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/broker/brokertest"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
)

// openJS returns a JetStream context on a bare open broker.
func openJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	return brokertest.JetStream(t)
}

var durable = wire.ChannelDefaults{Replay: ptr(true), DeliveryClass: wire.ClassDurable}

func ptr[T any](v T) *T { return &v }

func TestProvisionCreatesTheContract(t *testing.T) {
	t.Parallel()
	js := openJS(t)
	ctx := t.Context()
	rep, err := space.Provision(ctx, js, "main", durable)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Created, space.Streams("main")) || !rep.DefaultsWritten {
		t.Errorf("report %+v", rep)
	}
	cfg := func(name string) jetstream.StreamConfig {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		return st.CachedInfo().Config
	}
	chat := cfg("CHAT_main")
	if chat.MaxMsgsPerSubject != 1000 || !chat.AllowDirect || chat.Discard != jetstream.DiscardOld || chat.Duplicates != 2*time.Minute ||
		chat.Storage != jetstream.FileStorage || chat.Subjects[0] != "cotal.main.chat.>" || chat.MaxMsgs != -1 {
		t.Errorf("CHAT config %+v", chat)
	}
	if dm := cfg("DM_main"); dm.AllowDirect || dm.MaxMsgsPerSubject != -1 || dm.Subjects[0] != "cotal.main.inst.>" {
		t.Errorf("DM config %+v", dm)
	}
	if task := cfg("TASK_main"); task.Retention != jetstream.WorkQueuePolicy || task.Subjects[0] != "cotal.main.svc.>" {
		t.Errorf("TASK config %+v", task)
	}
	if in := cfg("INBOX_main"); in.Duplicates != 2*time.Hour || in.MaxMsgsPerSubject != 1000 || in.Subjects[0] != "cotal.main.dinbox.>" {
		t.Errorf("INBOX config %+v", in)
	}
	if p := cfg("KV_cotal_presence_main"); p.MaxAge != 6*time.Second || p.Storage != jetstream.MemoryStorage || p.Duplicates != 6*time.Second ||
		p.DenyDelete || !p.AllowRollup || p.Discard != jetstream.DiscardNew || p.MaxMsgsPerSubject != 1 {
		t.Errorf("presence config %+v", p)
	}
	if d := cfg("KV_cotal_delivery_main"); d.MaxAge != 30*time.Second || d.Storage != jetstream.FileStorage {
		t.Errorf("delivery config %+v", d)
	}
	if m := cfg("KV_cotal_manager_main"); m.MaxAge != 10*time.Second {
		t.Errorf("manager config %+v", m)
	}
	if m := cfg("KV_cotal_membership_main"); m.MaxBytes != 64<<20 || m.MaxAge != 0 {
		t.Errorf("membership config %+v", m)
	}
	if u := cfg("KV_cotal_userauth_main"); u.AllowDirect || u.MaxAge != 0 || u.Storage != jetstream.FileStorage || u.MaxMsgsPerSubject != 1 {
		t.Errorf("user-auth config %+v", u)
	}
	kv, err := js.KeyValue(ctx, "cotal_channels_main")
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, wire.ChannelDefaultsKey)
	if err != nil {
		t.Fatal(err)
	}
	if string(e.Value()) != `{"replay":true,"deliveryClass":"durable"}` {
		t.Errorf("=defaults = %s", e.Value())
	}

	again, err := space.Provision(ctx, js, "main", durable)
	if err != nil {
		t.Fatal(err)
	}
	if again.Changed() {
		t.Errorf("a second provisioning changed something: %+v", again)
	}
}

func TestProvisionReportsDriftAndKeepsData(t *testing.T) {
	t.Parallel()
	js := openJS(t)
	ctx := t.Context()
	drifted := jetstream.StreamConfig{Name: "CHAT_main", Subjects: []string{"cotal.main.chat.>"}, MaxMsgsPerSubject: 500, Storage: jetstream.FileStorage}
	if _, err := js.CreateStream(ctx, drifted); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "cotal.main.chat.local.a.general", []byte("keep me")); err != nil {
		t.Fatal(err)
	}
	_, err := space.Provision(ctx, js, "main", durable)
	var de *space.DriftError
	if !errors.As(err, &de) {
		t.Fatalf("Provision = %v, want a DriftError", err)
	}
	fields := map[string]bool{}
	for _, d := range de.Drifts {
		if d.Resource != "CHAT_main" {
			t.Errorf("drift reported on %s", d.Resource)
		}
		fields[d.Field] = true
	}
	for _, f := range []string{"max_msgs_per_subject", "allow_direct"} {
		if !fields[f] {
			t.Errorf("drift of %s not reported: %v", f, err)
		}
	}
	st, err := js.Stream(ctx, "CHAT_main")
	if err != nil {
		t.Fatal(err)
	}
	if info := st.CachedInfo(); info.State.Msgs != 1 || info.Config.MaxMsgsPerSubject != 500 {
		t.Errorf("the drifted stream was changed: %d msgs, max_msgs_per_subject %d", info.State.Msgs, info.Config.MaxMsgsPerSubject)
	}
	if _, err := js.Stream(ctx, "DM_main"); err != nil {
		t.Errorf("the rest of the space was not provisioned: %v", err)
	}
}

func TestProvisionReconcilesTTL(t *testing.T) {
	t.Parallel()
	js := openJS(t)
	ctx := t.Context()
	old := jetstream.StreamConfig{
		Name: "KV_cotal_delivery_main", Subjects: []string{"$KV.cotal_delivery_main.>"}, Storage: jetstream.FileStorage,
		MaxMsgsPerSubject: 1, MaxAge: time.Minute, Discard: jetstream.DiscardNew, AllowDirect: true, AllowRollup: true,
		MaxMsgs: -1, MaxBytes: -1, MaxMsgSize: -1, MaxConsumers: -1, Replicas: 1,
	}
	if _, err := js.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	rep, err := space.Provision(ctx, js, "main", durable)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.Reconciled, "KV_cotal_delivery_main") {
		t.Errorf("report %+v", rep)
	}
	st, err := js.Stream(ctx, "KV_cotal_delivery_main")
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().Config; c.MaxAge != 30*time.Second || c.Duplicates > 30*time.Second {
		t.Errorf("TTL not reconciled: max_age %s, duplicate_window %s", c.MaxAge, c.Duplicates)
	}
}

func TestProvisionKeepsExistingDefaults(t *testing.T) {
	t.Parallel()
	js := openJS(t)
	ctx := t.Context()
	if _, err := space.Provision(ctx, js, "main", wire.ChannelDefaults{DeliveryClass: wire.ClassLive}); err != nil {
		t.Fatal(err)
	}
	rep, err := space.Provision(ctx, js, "main", durable)
	if err != nil || rep.DefaultsWritten {
		t.Fatalf("Provision = %+v, %v", rep, err)
	}
	kv, err := js.KeyValue(ctx, "cotal_channels_main")
	if err != nil {
		t.Fatal(err)
	}
	// Defaults without a class (written by hand) get the class added, keeping the rest.
	if _, err := kv.Put(ctx, wire.ChannelDefaultsKey, []byte(`{"replay":false}`)); err != nil {
		t.Fatal(err)
	}
	if rep, err := space.Provision(ctx, js, "main", durable); err != nil || !rep.DefaultsWritten {
		t.Fatalf("Provision = %+v, %v", rep, err)
	}
	e, err := kv.Get(ctx, wire.ChannelDefaultsKey)
	if err != nil {
		t.Fatal(err)
	}
	var d wire.ChannelDefaults
	if err := json.Unmarshal(e.Value(), &d); err != nil || d.Replay == nil || *d.Replay || d.DeliveryClass != wire.ClassDurable {
		t.Errorf("=defaults = %s (%v)", e.Value(), err)
	}
	if _, err := space.Provision(ctx, js, "main", wire.ChannelDefaults{DeliveryClass: "sometimes"}); err == nil {
		t.Error("invalid defaults must be refused")
	}
}

func TestProvisionAgentDurables(t *testing.T) {
	t.Parallel()
	js := openJS(t)
	ctx := t.Context()
	sp := wire.Space("main")
	if _, err := space.Provision(ctx, js, sp, durable); err != nil {
		t.Fatal(err)
	}
	alice, _ := wire.NewPrincipal("local", "alice")
	bob, _ := wire.NewPrincipal("local", "bob")
	for range 3 {
		if _, err := js.Publish(ctx, sp.DMSubject(bob, alice), []byte("before")); err != nil {
			t.Fatal(err)
		}
	}
	life := wire.Lifecycle{Principal: bob, UID: wire.NewLifecycleUID()}
	agent := space.Agent{Lifecycle: life, Role: "reviewer"}
	if err := space.ProvisionAgent(ctx, js, sp, agent); err != nil {
		t.Fatal(err)
	}
	dm, err := js.Consumer(ctx, sp.DMStream(), wire.DMDurable(life))
	if err != nil {
		t.Fatal(err)
	}
	c := dm.CachedInfo().Config
	if c.DeliverPolicy != jetstream.DeliverByStartSequencePolicy || c.OptStartSeq != 4 || c.AckPolicy != jetstream.AckExplicitPolicy ||
		c.AckWait != time.Minute || c.FilterSubject != "cotal.main.inst.local.bob.>" || c.InactiveThreshold != 0 {
		t.Errorf("dm_ config %+v", c)
	}
	// A new message after activation is the first the lifecycle sees.
	if _, err := js.Publish(ctx, sp.DMSubject(bob, alice), []byte("after")); err != nil {
		t.Fatal(err)
	}
	msg, err := dm.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil || string(msg.Data()) != "after" {
		t.Fatalf("first dm = %v, %v; want the one after activation", msg, err)
	}
	// Re-provisioning keeps the durable and its frontier.
	if err := space.ProvisionAgent(ctx, js, sp, agent); err != nil {
		t.Fatal(err)
	}
	if dm2, err := js.Consumer(ctx, sp.DMStream(), wire.DMDurable(life)); err != nil || dm2.CachedInfo().Config.OptStartSeq != 4 {
		t.Errorf("re-provisioning moved the frontier: %v", err)
	}
	dlv, err := js.Consumer(ctx, sp.DLVStream(), wire.DLVDurable(life))
	if err != nil || dlv.CachedInfo().Config.FilterSubject != meshwire.DlvSubject(sp, life) {
		t.Errorf("dlv_ durable: %v", err)
	}
	svc, err := js.Consumer(ctx, sp.TaskStream(), "svc_reviewer")
	if err != nil || svc.CachedInfo().Config.FilterSubject != "cotal.main.svc.reviewer.>" {
		t.Errorf("svc_ durable: %v", err)
	}
	// A fresh lifecycle on an empty DM stream delivers from the start.
	other := wire.Space("other")
	if _, err := space.Provision(ctx, js, other, durable); err != nil {
		t.Fatal(err)
	}
	fresh := wire.Lifecycle{Principal: bob, UID: wire.NewLifecycleUID()}
	if err := space.ProvisionAgent(ctx, js, other, space.Agent{Lifecycle: fresh}); err != nil {
		t.Fatal(err)
	}
	if c, err := js.Consumer(ctx, other.DMStream(), wire.DMDurable(fresh)); err != nil || c.CachedInfo().Config.DeliverPolicy != jetstream.DeliverAllPolicy {
		t.Errorf("dm_ on an empty stream: %v", err)
	}
	if err := space.ProvisionAgent(ctx, js, sp, space.Agent{}); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("an agent without a lifecycle must be refused: %v", err)
	}
}

// checkRecordsStore checks c against the records store's configuration (SPEC §13.12, as the
// reference makes it): one file-backed row per key, Direct Get on, no limit that evicts, and no
// rollup, delete or purge.
func checkRecordsStore(t *testing.T, c jetstream.StreamConfig) {
	t.Helper()
	switch {
	case c.Name != "KV_cotal_records_main" || !slices.Equal(c.Subjects, []string{"$KV.cotal_records_main.>"}):
		t.Errorf("records store named %s capturing %v", c.Name, c.Subjects)
	case c.Retention != jetstream.LimitsPolicy || c.Storage != jetstream.FileStorage || c.Replicas != 1:
		t.Errorf("records store retention %v, storage %v, replicas %d", c.Retention, c.Storage, c.Replicas)
	case c.MaxAge != 0 || c.MaxMsgs != -1 || c.MaxBytes != -1 || c.MaxMsgSize != -1 || c.MaxConsumers != -1:
		t.Errorf("records store has a limit: max_age %s, max_msgs %d, max_bytes %d, max_msg_size %d, max_consumers %d",
			c.MaxAge, c.MaxMsgs, c.MaxBytes, c.MaxMsgSize, c.MaxConsumers)
	case c.MaxMsgsPerSubject != 1 || c.Discard != jetstream.DiscardNew || c.Duplicates != 2*time.Minute:
		t.Errorf("records store history %d, discard %v, duplicate window %s", c.MaxMsgsPerSubject, c.Discard, c.Duplicates)
	case !c.AllowDirect || c.AllowRollup || !c.DenyDelete || !c.DenyPurge || c.AllowMsgTTL:
		t.Errorf("records store allow_direct %t, allow_rollup_hdrs %t, deny_delete %t, deny_purge %t, allow_msg_ttl %t",
			c.AllowDirect, c.AllowRollup, c.DenyDelete, c.DenyPurge, c.AllowMsgTTL)
	case c.Mirror != nil || len(c.Sources) > 0:
		t.Errorf("records store is a copy: mirror %v, sources %v", c.Mirror, c.Sources)
	}
}

// TestProvisionCreatesTheRecordsStore: provisioning creates the records store cotal_records_<space>
// with the SPEC §13.12 configuration, the broker then refuses to delete or purge its rows, and
// provisioning again leaves it as it is.
func TestProvisionCreatesTheRecordsStore(t *testing.T) {
	t.Parallel()
	js := openJS(t)
	ctx := t.Context()
	rep, err := space.Provision(ctx, js, "main", durable)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.Created, "KV_cotal_records_main") {
		t.Errorf("report %+v does not list the records store", rep)
	}
	st, err := js.Stream(ctx, "KV_cotal_records_main")
	if err != nil {
		t.Fatal(err)
	}
	checkRecordsStore(t, st.CachedInfo().Config)

	kv, err := js.KeyValue(ctx, "cotal_records_main")
	if err != nil {
		t.Fatal(err)
	}
	rev, err := kv.Create(ctx, "lifecycle.local.alice", []byte(`{"v":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(ctx, rev); err == nil {
		t.Error("the broker deleted a row of the records store")
	}
	if err := st.Purge(ctx); err == nil {
		t.Error("the broker purged the records store")
	}
	if e, err := kv.Get(ctx, "lifecycle.local.alice"); err != nil || e.Revision() != rev {
		t.Errorf("the row did not survive: %v, %v", e, err)
	}

	again, err := space.Provision(ctx, js, "main", durable)
	if err != nil {
		t.Fatal(err)
	}
	if again.Changed() {
		t.Errorf("provisioning again changed something: %+v", again)
	}
	st, err = js.Stream(ctx, "KV_cotal_records_main")
	if err != nil {
		t.Fatal(err)
	}
	checkRecordsStore(t, st.CachedInfo().Config)
	if n := st.CachedInfo().State.Msgs; n != 1 {
		t.Errorf("the records store holds %d rows after provisioning again, want 1", n)
	}
}

// TestAdmissionStoreIsWriteOnce: provisioning creates the run admission store
// cotal_admission_<space> (SPEC §14.8): no Direct Get, no limit that evicts, and at the broker a
// key written once stays as written: a second write, a delete marker, a purge of the key or of
// the store and a message delete are all refused.
func TestAdmissionStoreIsWriteOnce(t *testing.T) {
	t.Parallel()
	js := openJS(t)
	ctx := t.Context()
	if _, err := space.Provision(ctx, js, "main", durable); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "KV_cotal_admission_main")
	if err != nil {
		t.Fatal(err)
	}
	c := st.CachedInfo().Config
	if c.AllowDirect || c.AllowRollup || !c.DenyDelete || !c.DenyPurge || c.Storage != jetstream.FileStorage ||
		c.MaxAge != 0 || c.MaxMsgs != -1 || c.MaxBytes != -1 || c.MaxMsgsPerSubject != 1 || !c.DiscardNewPerSubject {
		t.Errorf("the admission store's configuration: %+v", c)
	}
	kv, err := js.KeyValue(ctx, "cotal_admission_main")
	if err != nil {
		t.Fatal(err)
	}
	const key = "admission.v1.manager.r-1"
	rev, err := kv.Create(ctx, key, []byte(`{"version":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "$KV.cotal_admission_main."+key, []byte(`{"version":2}`)); err == nil {
		t.Error("the broker took a second write of an admission")
	}
	if err := kv.Delete(ctx, key); err == nil {
		t.Error("the broker took a delete marker on an admission")
	}
	if err := kv.Purge(ctx, key); err == nil {
		t.Error("the broker took a purge of an admission")
	}
	if err := st.DeleteMsg(ctx, rev); err == nil {
		t.Error("the broker deleted an admission")
	}
	if err := st.Purge(ctx); err == nil {
		t.Error("the broker purged the admission store")
	}
	if e, err := kv.Get(ctx, key); err != nil || e.Revision() != rev || string(e.Value()) != `{"version":1}` {
		t.Errorf("the admission did not survive: %v, %v", e, err)
	}
}

// TestProvisionReportsADriftedRecordsStore: a records store that could evict an authority row (an
// age limit, rollups on) is reported by field and left as it is, rows included.
func TestProvisionReportsADriftedRecordsStore(t *testing.T) {
	t.Parallel()
	js := openJS(t)
	ctx := t.Context()
	aged := jetstream.StreamConfig{
		Name: "KV_cotal_records_main", Subjects: []string{"$KV.cotal_records_main.>"}, Storage: jetstream.FileStorage,
		MaxMsgsPerSubject: 1, MaxAge: time.Hour, Discard: jetstream.DiscardNew, AllowDirect: true, AllowRollup: true,
		MaxMsgs: -1, MaxBytes: -1, MaxMsgSize: -1, MaxConsumers: -1, Replicas: 1,
	}
	if _, err := js.CreateStream(ctx, aged); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "$KV.cotal_records_main.govern.alpha", []byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	_, err := space.Provision(ctx, js, "main", durable)
	var de *space.DriftError
	if !errors.As(err, &de) {
		t.Fatalf("Provision = %v, want a DriftError", err)
	}
	fields := map[string]bool{}
	for _, d := range de.Drifts {
		if d.Resource == "KV_cotal_records_main" {
			fields[d.Field] = true
		}
	}
	for _, f := range []string{"max_age", "allow_rollup_hdrs", "deny_delete", "deny_purge"} {
		if !fields[f] {
			t.Errorf("drift of the records store's %s not reported: %v", f, err)
		}
	}
	st, err := js.Stream(ctx, "KV_cotal_records_main")
	if err != nil {
		t.Fatal(err)
	}
	if info := st.CachedInfo(); info.State.Msgs != 1 || info.Config.MaxAge != time.Hour {
		t.Errorf("the drifted records store was changed: %d rows, max_age %s", info.State.Msgs, info.Config.MaxAge)
	}
}

// TestMeshProvisionsTheRecordsStore: on an authenticated mesh the provisioner's grants cover the
// records store, which the mesh's setup therefore creates, and a provisioner credential
// provisions the space again without a change.
func TestMeshProvisionsTheRecordsStore(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	c := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileProvisioner, Name: "setup"}))
	st, err := c.JS.Stream(ctx, meshwire.RecordsBucket(m.Space).Stream())
	if err != nil {
		t.Fatal(err)
	}
	checkRecordsStore(t, st.CachedInfo().Config)
	rep, err := space.Provision(ctx, c.JS, m.Space, durable)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Changed() {
		t.Errorf("provisioning the mesh's space again changed something: %+v", rep)
	}
}

// TestProvisionCreatesTheControlSurface: a space carries the control surface's ingress and work
// streams with the reference's configurations, and the broker holds them to what they are for:
// a timer request cannot schedule itself (EPT_REQ allows no schedules), while an armed timer on
// EPT fires into its sibling .fire subject.
func TestProvisionCreatesTheControlSurface(t *testing.T) {
	t.Parallel()
	js := openJS(t)
	ctx := t.Context()
	if _, err := space.Provision(ctx, js, "main", durable); err != nil {
		t.Fatal(err)
	}
	cfg := func(name string) jetstream.StreamConfig {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		return st.CachedInfo().Config
	}
	day := 24 * time.Hour
	if c := cfg("EPJ_main"); c.MaxAge != day || c.Duplicates != 100*time.Millisecond || c.AllowDirect || !slices.Equal(c.Subjects, []string{"cotal.main.epj.>"}) {
		t.Errorf("EPJ config %+v", c)
	}
	if c := cfg("EPT_REQ_main"); c.MaxAge != day || c.AllowMsgSchedules || !slices.Equal(c.Subjects, []string{"cotal.main.ept.*.*.*.*.schedule"}) {
		t.Errorf("EPT_REQ config %+v", c)
	}
	if c := cfg("EPR_main"); c.MaxAge != day || !slices.Equal(c.Subjects, []string{"cotal.main.epr.>"}) {
		t.Errorf("EPR config %+v", c)
	}
	if c := cfg("EPT_main"); c.MaxAge != 31*day || !c.AllowMsgSchedules || !slices.Equal(c.Subjects, []string{"cotal.main.ept.*.*.*.*.armed", "cotal.main.ept.*.*.*.*.fire"}) {
		t.Errorf("EPT config %+v", c)
	}
	if c := cfg("EPW_main"); c.Retention != jetstream.WorkQueuePolicy || c.AllowDirect || !slices.Equal(c.Subjects, []string{"cotal.main.epw.>"}) {
		t.Errorf("EPW config %+v", c)
	}

	const timer = "cotal.main.ept.svc.i1.0.t1."
	schedule := func(subject string) error {
		msg := nats.NewMsg(subject)
		msg.Header.Set("Nats-Schedule", "@at "+time.Now().Add(200*time.Millisecond).UTC().Format(time.RFC3339Nano))
		msg.Header.Set("Nats-Schedule-Target", timer+string(meshwire.TimerFire))
		msg.Data = []byte("t1")
		_, err := js.PublishMsg(ctx, msg)
		return err
	}
	var apiErr *jetstream.APIError
	if err := schedule(timer + string(meshwire.TimerSchedule)); !errors.As(err, &apiErr) || apiErr.ErrorCode != 10188 {
		t.Errorf("a timer request that schedules itself: %v, want the broker's schedules-disabled refusal", err)
	}
	if err := schedule(timer + string(meshwire.TimerArmed)); err != nil {
		t.Fatalf("arm a timer: %v", err)
	}
	ept, err := js.Stream(ctx, "EPT_main")
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 10*time.Second, "the armed timer to fire", func() bool {
		m, err := ept.GetLastMsgForSubject(ctx, timer+string(meshwire.TimerFire))
		return err == nil && string(m.Data) == "t1"
	})
}
