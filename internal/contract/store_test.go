package contract_test

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/broker/brokertest"
	"github.com/gocotal/cotal/internal/contract"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
)

const sp = wire.Space("main")

// provisioned returns a JetStream context on a broker where sp is provisioned.
func provisioned(t *testing.T) jetstream.JetStream {
	t.Helper()
	js := brokertest.JetStream(t)
	replay := true
	if _, err := space.Provision(t.Context(), js, sp, wire.ChannelDefaults{Replay: &replay, DeliveryClass: wire.ClassDurable}); err != nil {
		t.Fatal(err)
	}
	return js
}

// subject is the digest subject of digest in sp.
func subject(t *testing.T, digest string) string {
	t.Helper()
	s, err := sp.ContractSubject(strings.TrimPrefix(digest, "sha256:"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPublishAndFetch(t *testing.T) {
	t.Parallel()
	js := provisioned(t)
	ctx := t.Context()
	c, err := contract.NewCluster("com.acme.deploy", 1, declarations()...)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second publish finds every subject taken by the same bytes
		if err := contract.Publish(ctx, js, sp, c.Artifacts); err != nil {
			t.Fatal(err)
		}
	}
	st, err := js.Stream(ctx, meshwire.ContractStream(sp))
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != uint64(len(c.Artifacts)) {
		t.Errorf("%d messages stored, want one per artifact (%d)", n, len(c.Artifacts))
	}
	for _, a := range c.Artifacts {
		got, err := contract.Fetch(ctx, js, sp, a.Digest)
		if err != nil || !bytes.Equal(got, a.Bytes) {
			t.Errorf("Fetch(%s) = %s, %v", a.Digest, got, err)
		}
	}
	// A reader resolves the cluster from its closure digest: the manifest, then the document.
	manifest, err := contract.Fetch(ctx, js, sp, c.Closure.Digest)
	if err != nil || !strings.Contains(string(manifest), c.Closure.Root) {
		t.Errorf("manifest %s, %v", manifest, err)
	}
	if _, err := contract.Fetch(ctx, js, sp, sha(`{"never":"published"}`)); !errors.Is(err, contract.ErrNotFound) {
		t.Errorf("Fetch of an unpublished digest: %v", err)
	}
	if _, err := contract.Fetch(ctx, js, sp, "sha256:*"); !errors.Is(err, contract.ErrInvalid) {
		t.Errorf("Fetch of a malformed digest: %v", err)
	}

	// The broker keeps one message per digest subject, whatever the publisher's headers.
	if _, err := js.Publish(ctx, subject(t, c.Closure.Digest), []byte(`{"shadow":true}`)); err == nil {
		t.Error("an append to a published digest subject was stored")
	}
	if got, err := contract.Fetch(ctx, js, sp, c.Closure.Digest); err != nil || !bytes.Equal(got, c.Closure.Manifest) {
		t.Errorf("after the append: %s, %v", got, err)
	}
}

// TestTakenSubject plants other bytes at digest subjects before the honest artifacts: the publish
// fails, and so does every fetch.
func TestTakenSubject(t *testing.T) {
	t.Parallel()
	js := provisioned(t)
	ctx := t.Context()
	void := mustCompile(t, contract.VoidSchema, nil).Artifacts()
	root, manifest := void[0], void[1]
	// Another value at the root's subject, and the same value spelled non-canonically at the
	// manifest's (its canonical form does have the manifest's digest).
	for subj, data := range map[string]string{
		subject(t, root.Digest):     `{"type":"string"}`,
		subject(t, manifest.Digest): " " + string(manifest.Bytes),
	} {
		if _, err := js.Publish(ctx, subj, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range void {
		if _, err := contract.Fetch(ctx, js, sp, a.Digest); !errors.Is(err, contract.ErrCorrupt) {
			t.Errorf("Fetch(%s): %v, want ErrCorrupt", a.Digest, err)
		}
		if err := contract.Publish(ctx, js, sp, []contract.Artifact{a}); !errors.Is(err, contract.ErrCorrupt) {
			t.Errorf("Publish(%s): %v, want ErrCorrupt", a.Digest, err)
		}
	}
}

// TestTakenSubjectDoesNotStopTheOthers: a subject held by a foreign message (a captured reply)
// fails Publish with ErrCorrupt once every artifact has been tried: the ones after it are stored.
func TestTakenSubjectDoesNotStopTheOthers(t *testing.T) {
	t.Parallel()
	js := provisioned(t)
	ctx := t.Context()
	void := mustCompile(t, contract.VoidSchema, nil).Artifacts()
	if _, err := js.Publish(ctx, subject(t, void[0].Digest), []byte(`{"stream":"CHAT_main","seq":7}`)); err != nil {
		t.Fatal(err)
	}
	err := contract.Publish(ctx, js, sp, void)
	if !errors.Is(err, contract.ErrCorrupt) || !strings.Contains(err.Error(), subject(t, void[0].Digest)) {
		t.Fatalf("Publish over a captured subject: %v", err)
	}
	for _, a := range void[1:] {
		if _, err := contract.Fetch(ctx, js, sp, a.Digest); err != nil {
			t.Errorf("the artifact after the captured one, %s: %v", a.Digest, err)
		}
	}
}

func TestPublishRefusesWhatIsNotTheArtifact(t *testing.T) {
	t.Parallel()
	js := provisioned(t)
	ctx := t.Context()
	void := mustCompile(t, contract.VoidSchema, nil).Artifacts()[0]
	for name, a := range map[string]contract.Artifact{
		"non-canonical bytes": {Digest: void.Digest, Bytes: []byte(`{ "type": "null" }`)},
		"another digest":      {Digest: sha("{}"), Bytes: void.Bytes},
		"a malformed digest":  {Digest: "sha256:abc", Bytes: void.Bytes},
		"not JSON":            {Digest: sha("x"), Bytes: []byte("x")},
	} {
		if err := contract.Publish(ctx, js, sp, []contract.Artifact{a}); !errors.Is(err, contract.ErrInvalid) {
			t.Errorf("%s: %v, want contract-invalid", name, err)
		}
	}
	st, err := js.Stream(ctx, meshwire.ContractStream(sp))
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 0 {
		t.Errorf("%d messages stored", n)
	}
}

// TestContractStreamConfig checks the provisioned EPC stream against SPEC §13.12 and the
// reference: a second provisioning finds it equal to the declared config (no drift, nothing
// created), and its settings are those written out here.
func TestContractStreamConfig(t *testing.T) {
	t.Parallel()
	js := provisioned(t)
	ctx := t.Context()
	replay := true
	rep, err := space.Provision(ctx, js, sp, wire.ChannelDefaults{Replay: &replay, DeliveryClass: wire.ClassDurable})
	if err != nil || rep.Changed() {
		t.Fatalf("second provisioning: %+v, %v", rep, err)
	}
	st, err := js.Stream(ctx, "EPC_main")
	if err != nil {
		t.Fatal(err)
	}
	c := st.CachedInfo().Config
	if len(c.Subjects) != 1 || c.Subjects[0] != "cotal.main.epc.>" ||
		c.Retention != jetstream.LimitsPolicy || c.Storage != jetstream.FileStorage ||
		c.MaxAge != 0 || c.MaxMsgs != -1 || c.MaxBytes != -1 || c.MaxMsgSize != -1 ||
		c.MaxMsgsPerSubject != 1 || c.Discard != jetstream.DiscardNew || !c.DiscardNewPerSubject ||
		!c.AllowDirect || !c.DenyDelete || !c.DenyPurge || c.AllowRollup || c.AllowMsgTTL ||
		c.Duplicates != 2*time.Minute || c.Replicas != 1 || c.Mirror != nil || len(c.Sources) != 0 {
		t.Errorf("EPC config %+v", c)
	}
}

// TestPublishConcurrentlyOnACluster: the nodes of a cluster publish the same artifacts as they
// start, each through its own server; every publish succeeds, though each finds subjects another
// has just taken, whose message its server may not hold yet.
func TestPublishConcurrentlyOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	urls := brokertest.Cluster(t, 3)
	jss := make([]jetstream.JetStream, len(urls))
	for i, u := range urls {
		nc, err := nats.Connect(u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		if jss[i], err = jetstream.New(nc); err != nil {
			t.Fatal(err)
		}
	}
	ctx := t.Context()
	if _, err := space.Provision(ctx, jss[0], sp, wire.ChannelDefaults{DeliveryClass: wire.ClassDurable}, space.WithReplicas(3)); err != nil {
		t.Fatal(err)
	}
	for revision := range int64(20) {
		c, err := contract.NewCluster("com.acme.deploy", revision+1, declarations()...)
		if err != nil {
			t.Fatal(err)
		}
		errs := make([]error, len(jss))
		var wg sync.WaitGroup
		for i, js := range jss {
			wg.Go(func() { errs[i] = contract.Publish(ctx, js, sp, c.Artifacts) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("revision %d: %v", revision+1, err)
		}
	}
}
