package authservice_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/wire"
)

// loopbackExchange posts body to the loopback face's /exchange with the face's cap.
func (r *rig) loopbackExchange(t *testing.T, body any) (int, []byte) {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, r.ready.URL+"/exchange", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+r.ready.Cap)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, out
}

// bearerAct decodes the token of an exchange reply and its act claim.
func bearerAct(t *testing.T, reply []byte) (string, *userauth.Act) {
	t.Helper()
	var out struct{ Token string }
	if err := json.Unmarshal(reply, &out); err != nil || out.Token == "" {
		t.Fatalf("exchange reply %s: %v", reply, err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.Split(out.Token, ".")[1])
	if err != nil {
		t.Fatal(err)
	}
	var c userauth.Claims
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return out.Token, &c.Act
}

// TestDeployerView: the deployer view (SPEC §10) is issued on the loopback face only, to a person
// whose row holds spawn, and the callout mints it the deployer profile. On it the broker lets the
// person read what a deploy plans against (the roster, the registry, the manager leases) and ask
// every manager for its agents; it refuses a message, a roster write, and the targeted despawn and
// input (the forbidden matrix tries the others). Losing spawn refuses the next connect of the same
// bearer.
func TestDeployerView(t *testing.T) {
	r := start(t, meshtest.WithDaemons())
	ctx := t.Context()
	idToken := r.login(t, "dave")
	ask := map[string]any{"idpToken": idToken, "actor": "cli", "view": "deployer"}

	if status, _ := r.loopbackExchange(t, ask); status != 401 {
		t.Fatalf("a deployer view without a row: HTTP %d, want 401", status)
	}
	row := r.grant(t, "dave", []string{userauth.ScopeAdmin}, []string{"general"}, []string{"general"})
	if status, _ := r.loopbackExchange(t, ask); status != 401 {
		t.Fatalf("a deployer view for a row without spawn: HTTP %d, want 401", status)
	}
	row = r.grant(t, "dave", []string{userauth.ScopeSpawn}, []string{"general"}, []string{"general"})
	if status, _ := r.exchange(t, ask); status == 200 {
		t.Fatal("the public face issued a deployer view")
	}
	status, reply := r.loopbackExchange(t, ask)
	if status != 200 {
		t.Fatalf("a deployer view for a row with spawn: HTTP %d %s", status, reply)
	}
	bearer, act := bearerAct(t, reply)
	if act.View != userauth.ViewDeployer || act.Owner != row.Owner || act.Actor != "cli" || act.LifecycleUID != row.LifecycleUID {
		t.Fatalf("the deployer's bearer: %+v (row %+v)", act, row)
	}
	p, err := act.Principal()
	if err != nil {
		t.Fatal(err)
	}
	me := wire.Lifecycle{Principal: p, UID: act.LifecycleUID}

	c := r.m.Dial(t, "dave's deployer view", func(opts ...nats.Option) (*nats.Conn, error) {
		return asBearer(ctx, r.m.URL(), []byte(r.doc.SentinelCreds), bearer, opts...)
	})
	// Every manager's agents, scattered to the instance a describe names; the host's answers.
	caller := endpoint.NewCaller(c.Conn, r.m.Space, me, "cli")
	var resolved *endpoint.Resolved
	for deadline := time.Now().Add(20 * time.Second); resolved == nil; time.Sleep(100 * time.Millisecond) {
		if resolved, err = caller.Describe(ctx, wire.ManagerEndpoint, ""); err != nil && time.Now().After(deadline) {
			t.Fatalf("describe the manager: %v", err)
		}
	}
	instance := resolved.From.Instance
	ps, err := resolved.Call(manager.CommandPs, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := caller.Scatter(ctx, ps, []endpoint.Instance{{ID: instance, Epoch: resolved.From.Epoch}}, time.Second)
	if err != nil || !g.Complete() || !g.Replies[instance].OK {
		t.Fatalf("ps on every manager: %+v %v", g, err)
	}

	// Reads a deploy plans against: the manager's lease, the roster and the registry.
	js, err := jetstream.New(c.Conn)
	if err != nil {
		t.Fatal(err)
	}
	leases, err := js.KeyValue(ctx, string(meshwire.ManagerBucket(r.m.Space)))
	if err != nil {
		t.Fatalf("open the manager leases: %v", err)
	}
	if _, err := leases.Get(ctx, meshwire.ManagerLeaseKey(instance)); err != nil {
		t.Errorf("read the serving manager's lease: %v", err)
	}
	roster, err := js.KeyValue(ctx, string(r.m.Space.PresenceBucket()))
	if err != nil {
		t.Fatalf("open the roster: %v", err)
	}
	w, err := roster.WatchAll(ctx)
	if err != nil {
		t.Fatalf("watch the roster: %v", err)
	}
	select {
	case <-w.Updates(): // the initial values end with a nil
	case <-time.After(10 * time.Second):
		t.Error("the roster watch never delivered")
	}
	_ = w.Stop()
	// The delivery daemon holds its lease before the manager serves; the membership feed is read
	// by key (an absent one is an answer, a refusal is not).
	for bucket, key := range map[wire.Bucket]string{meshwire.DeliveryBucket(r.m.Space): meshwire.LeaseKey(0), meshwire.MembershipBucket(r.m.Space): "none"} {
		kv, err := js.KeyValue(ctx, string(bucket))
		if err != nil {
			t.Fatalf("open %s: %v", bucket, err)
		}
		_, err = kv.Get(ctx, key)
		if err != nil && (bucket == meshwire.DeliveryBucket(r.m.Space) || !errors.Is(err, jetstream.ErrKeyNotFound)) {
			t.Errorf("read %s in %s: %v", key, bucket, err)
		}
	}
	channels, err := js.KeyValue(ctx, string(r.m.Space.ChannelsBucket()))
	if err != nil {
		t.Fatalf("open the registry: %v", err)
	}
	if _, err := channels.Get(ctx, "general"); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("read the registry: %v", err)
	}

	// Refused by the broker: a message, a roster write, and two targeted commands of the manager.
	post, _ := r.m.Space.ChatSubject(p, "general")
	despawn := wire.EndpointRoute{Address: wire.AddressOne, Endpoint: wire.ManagerEndpoint, Command: manager.CommandDespawn,
		Mode: wire.ModeOwner, Target: wire.EndpointTarget{Owner: p.Owner()}, Caller: me, Nonce: wire.NewNonce()}
	despawnSubject, err := r.m.Space.RequestSubject(despawn)
	if err != nil {
		t.Fatal(err)
	}
	input := despawn
	input.Command, input.Mode = manager.CommandInput, wire.ModeAny
	inputSubject, _ := r.m.Space.RequestSubject(input)
	for _, subject := range []string{post, r.m.Space.PresenceBucket().Subject(wire.PresenceKey(p)), despawnSubject, inputSubject} {
		if err := c.Publish(subject, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if refused, err := c.Refused("Publish", subject); err != nil || !refused {
			t.Errorf("publish %s on the deployer view: refused=%v (%v), want the broker's refusal", subject, refused, err)
		}
	}
	c.Close()

	// The same row, same incarnation, with spawn taken away: the unexpired bearer no longer
	// connects.
	if err := r.connect(bearer); err != nil {
		t.Fatalf("reconnect: %v", err)
	}
	narrowed := *row
	narrowed.Scope = []string{userauth.ScopeAdmin}
	r.rewrite(t, narrowed)
	if err := r.connect(bearer); err == nil {
		t.Fatal("a deployer bearer connected after its row lost spawn")
	}
}
