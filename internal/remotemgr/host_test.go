package remotemgr_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/internal/authendpoint"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/remotemgr"
	"github.com/gocotal/cotal/internal/sessiongrant"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/wire"
)

// people is the host's view of who holds which scopes: an IdP token per person, as the people
// ledger would answer it.
type people map[string]*remotemgr.Person

func (p people) Authenticate(_ context.Context, idToken, actor string) (*remotemgr.Person, error) {
	who, ok := p[idToken]
	if !ok || actor != "cli" {
		return nil, errors.New("no such person or row")
	}
	return who, nil
}

const (
	alice = "u_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	bob   = "u_bbbbbbbbbbbbbbbbbbbbbbbbbb"
)

type hostRig struct {
	m      *meshtest.Mesh
	host   *remotemgr.Host
	url    string
	who    people
	people *userauth.People
}

// grantRow writes owner's cli row in the people ledger, the parent of the agents it enrolls.
func (r *hostRig) grantRow(t *testing.T, owner string, read, post []string) {
	t.Helper()
	if _, err := r.people.Grant(t.Context(), &userauth.Row{Owner: owner, Actor: "cli", Scope: []string{"supervise"}, AllowSubscribe: read, AllowPublish: post}); err != nil {
		t.Fatal(err)
	}
}

// person grants owner's interactive row anew (a new incarnation) and starts its lifecycle in the
// ledger, as their first bearer does; it returns that lifecycle.
func (r *hostRig) person(t *testing.T, owner string) wire.Lifecycle {
	t.Helper()
	r.grantRow(t, owner, []string{">"}, []string{">"})
	row, err := r.people.Get(t.Context(), owner, "cli")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.m.Ledger(r.m.Space).EnsureRoot(t.Context(), owner, "cli", row.LifecycleUID); err != nil {
		t.Fatal(err)
	}
	return wire.Lifecycle{Principal: row.Principal(), UID: row.LifecycleUID}
}

// serveAuth serves an instance of the auth endpoint a retirement requester asks, as the auth
// service serves it (on a cluster, every authority node serves one).
func serveAuth(t *testing.T, m *meshtest.Mesh, h *remotemgr.Host) {
	t.Helper()
	instance := wire.NewLifecycleUID()
	held, epoch, err := m.Ledger(m.Space).HoldServing(t.Context(), meshwire.AuthEndpoint, "cotal_auth", instance, authendpoint.Commands(), time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := authendpoint.Serve(t.Context(), authendpoint.Config{Conn: held.Conn, Space: m.Space, Instance: instance, Epoch: epoch, Retire: h.RetireLifecycle})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = auth.Stop(ctx) // the broker may be gone already
		_ = held.Release()
	})
}

func newHostRig(t *testing.T, life time.Duration) *hostRig {
	t.Helper()
	m := meshtest.Start(t)
	keys, err := m.Keyring().Space(m.Space)
	if err != nil {
		t.Fatal(err)
	}
	// The registry and the people share the space's user-auth store, as the auth service has them.
	kv, err := m.Ledger(m.Space).UserAuthStore(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	reg, err := remotemgr.OpenRegistry(kv)
	if err != nil {
		t.Fatal(err)
	}
	who := people{
		"alice-token": {Owner: alice, Scopes: []string{"supervise"}},
		"bob-token":   {Owner: bob, Scopes: []string{"supervise"}},
		"carol-token": {Owner: "u_cccccccccccccccccccccccccc", Scopes: []string{"spawn", "admin", "role:x"}},
	}
	managed, err := userauth.OpenPeople(kv)
	if err != nil {
		t.Fatal(err)
	}
	h := &remotemgr.Host{Space: m.Space, Keys: keys, Ledger: m.Ledger(m.Space), People: who, Registry: reg, Managed: managed, Life: life}
	serveAuth(t, m, h)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		handle := h.Handle
		if r.URL.Path == remotemgr.HolderPath {
			handle = h.HandleHolder
		}
		status, reply := handle(r.Context(), body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(reply)
	}))
	t.Cleanup(srv.Close)
	return &hostRig{m: m, host: h, url: srv.URL, who: who, people: managed}
}

func (r *hostRig) client(t *testing.T, token string, instance wire.LifecycleUID) *remotemgr.Client {
	t.Helper()
	c, err := remotemgr.NewClient(remotemgr.ClientConfig{Space: r.m.Space, URL: r.url, Actor: "cli", Instance: instance, Server: r.m.URL(),
		IDToken: func(context.Context) (string, error) { return token, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func code(err error) wire.ErrorCode {
	var ref *remotemgr.Refusal
	if errors.As(err, &ref) {
		return ref.Code
	}
	return ""
}

// post sends a raw body to the host and returns the status and the refusal code.
func (r *hostRig) post(t *testing.T, body []byte) (int, string) {
	t.Helper()
	_, status, code := r.exchange(t, body)
	return status, code
}

// send sends req with token, as a client that builds its own requests would.
func (r *hostRig) send(t *testing.T, token string, req remotemgr.Request) (*remotemgr.Response, int, string) {
	t.Helper()
	body, _ := json.Marshal(remotemgr.Envelope{IDPToken: token, Request: req})
	return r.exchange(t, body)
}

// exchange posts body and decodes the answer: the response, the status and the refusal code.
func (r *hostRig) exchange(t *testing.T, body []byte) (*remotemgr.Response, int, string) {
	t.Helper()
	res, err := http.Post(r.url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out remotemgr.Response
	var refusal struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(raw, &out)
	_ = json.Unmarshal(raw, &refusal)
	return &out, res.StatusCode, refusal.Error
}

// activated prepares, registers and activates a fresh instance of the person holding token.
func (r *hostRig) activated(t *testing.T, token string) (*remotemgr.Client, *authority.Credential, wire.LifecycleUID) {
	t.Helper()
	inst := wire.NewLifecycleUID()
	c := r.client(t, token, inst)
	register(t, r, c)
	serve, _, err := c.Activate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return c, serve, inst
}

func TestPrepareNeedsSuperviseAndAWellFormedRequest(t *testing.T) {
	r := newHostRig(t, 0)
	ctx := t.Context()
	inst := wire.NewLifecycleUID()
	// spawn, admin and a role do not imply supervise.
	if _, err := r.client(t, "carol-token", inst).Prepare(ctx); code(err) != wire.CodePermissionDenied {
		t.Fatalf("prepare without supervise: %v, want permission-denied", err)
	}
	if _, err := r.client(t, "nobody", inst).Prepare(ctx); code(err) != wire.CodePermissionDenied {
		t.Fatalf("prepare by an unknown person: %v, want permission-denied", err)
	}
	// A well-formed request, then broken copies of it.
	kp := func() string { return newUserKey(t) }
	base := func() map[string]any {
		return map[string]any{"idpToken": "alice-token", "request": map[string]any{
			"v": 1, "kind": "manager-service-authority", "operation": "prepare", "space": string(r.m.Space), "actor": "cli",
			"instanceId": string(inst), "managerLifecycleUid": string(wire.NewLifecycleUID()), "requestId": "abcdefghijklmnopqrstuvwx",
			"identities": map[string]any{"supervisor": map[string]string{"id": kp()}, "executor": map[string]string{"id": kp()},
				"serve": map[string]string{"id": kp()}, "goalWriter": map[string]string{"id": kp()}, "sessionLedger": map[string]string{"id": kp()}},
		}}
	}
	enc := func(v any) []byte { b, _ := json.Marshal(v); return b }
	if status, _ := r.post(t, enc(base())); status != 200 {
		t.Fatalf("the well-formed prepare: HTTP %d", status)
	}
	dup := base()
	ids := dup["request"].(map[string]any)["identities"].(map[string]any)
	ids["executor"] = ids["supervisor"]
	unknown := base()
	unknown["request"].(map[string]any)["force"] = true
	badOp := base()
	badOp["request"].(map[string]any)["operation"] = "mint"
	shortID := base()
	shortID["request"].(map[string]any)["requestId"] = "short"
	for name, body := range map[string][]byte{
		"duplicate nkeys": enc(dup), "an unknown field": enc(unknown), "an unknown operation": enc(badOp),
		"a short request id": enc(shortID), "not json": []byte("{"), "two values": append(enc(base()), enc(base())...),
	} {
		if status, c := r.post(t, body); status != 400 || c != string(wire.CodeBadRequest) {
			t.Errorf("%s: HTTP %d %q, want 400 bad-request", name, status, c)
		}
	}
}

func TestPrepareIssuesExactlyTheSupervisorAndExecutor(t *testing.T) {
	r := newHostRig(t, 0)
	c := r.client(t, "alice-token", wire.NewLifecycleUID())
	st, err := c.Prepare(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.Serve != nil {
		t.Fatal("prepare issued a serve credential")
	}
	for _, cred := range []*authority.Credential{st.Supervisor, st.Executor} {
		claims, err := jwt.DecodeUserClaims(cred.JWT)
		if err != nil {
			t.Fatal(err)
		}
		if claims.Subject != cred.PublicKey || claims.Name != string(authority.ProfileRemoteManager) {
			t.Errorf("%s: subject %s name %s", cred.Principal, claims.Subject, claims.Name)
		}
	}
	if life := st.Executor.Expires.Sub(time.Now()); life > remotemgr.ExecutorLifetime || life < remotemgr.ExecutorLifetime-time.Minute {
		t.Errorf("the executor lives %s, want %s", life, remotemgr.ExecutorLifetime)
	}
	if st.Supervisor.Principal.String() != alice+"."+c.Actors().Supervisor || st.Executor.Principal.String() != alice+"."+c.Actors().Executor {
		t.Errorf("principals %s, %s", st.Supervisor.Principal, st.Executor.Principal)
	}
}

// TestPrepareRefusesAnotherPrincipalsInstance: an instance another person registered, or a local
// manager serves, is never prepared: its executor could rewrite that gate.
func TestPrepareRefusesAnotherPrincipalsInstance(t *testing.T) {
	r := newHostRig(t, 0)
	ctx := t.Context()
	_, _, inst := r.activated(t, "alice-token")
	if _, err := r.client(t, "bob-token", inst).Prepare(ctx); code(err) != wire.CodePermissionDenied {
		t.Fatalf("prepare another person's instance: %v", err)
	}
	local := wire.NewLifecycleUID()
	h, _, err := r.m.Ledger("").HoldServing(ctx, wire.ManagerEndpoint, "manager", local, []string{"ps"}, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if _, err := r.client(t, "alice-token", local).Prepare(ctx); code(err) != wire.CodePermissionDenied {
		t.Fatalf("prepare a local manager's instance: %v", err)
	}
}

// TestPrepareEvictsThePreviousIncarnation: a restarted remote manager prepares its instance again
// with new identities; the broker then refuses the previous supervisor, which no gate fences.
func TestPrepareEvictsThePreviousIncarnation(t *testing.T) {
	r := newHostRig(t, 0)
	ctx := t.Context()
	inst := wire.NewLifecycleUID()
	first, err := r.client(t, "alice-token", inst).Prepare(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := r.m.Connect(t, first.Supervisor)
	again, err := r.client(t, "alice-token", inst).Prepare(ctx)
	if err != nil {
		t.Fatalf("prepare one's own instance again: %v", err)
	}
	meshtest.Eventually(t, 10*time.Second, "the previous supervisor's connection closes", old.IsClosed)
	r.m.Connect(t, again.Supervisor) // the new one connects
}

// register prepares c and writes its gate as its executor.
func register(t *testing.T, r *hostRig, c *remotemgr.Client) *remotemgr.Standing {
	t.Helper()
	st, err := c.Prepare(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	nc, err := dial.As(t.Context(), r.m.URL(), st.Executor)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := c.Register(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestActivateChecksTheGateAndTheProof(t *testing.T) {
	r := newHostRig(t, 0)
	ctx := t.Context()
	inst := wire.NewLifecycleUID()
	c := r.client(t, "alice-token", inst)
	if _, err := c.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	// No gate: refused before anything is minted.
	if _, _, err := c.Activate(ctx); code(err) != wire.CodeFailedPrecondition {
		t.Fatalf("activate without a gate: %v, want failed-precondition", err)
	}
	rows, err := r.m.Ledger(r.m.Space).RemoteManagers().Credentials(ctx, inst)
	if err != nil || len(rows) != 0 {
		t.Fatalf("serving rows after a refused activation: %v %v", rows, err)
	}
	register(t, r, c)
	serve, epoch, err := c.Activate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	og, err := r.m.Ledger(r.m.Space).RemoteManagers().ObserveGate(ctx, inst)
	if err != nil {
		t.Fatal(err)
	}
	if og.Row.State != authstore.GateOpen || og.Row.Principal != alice+"."+c.Actors().Serve || og.Row.ProcessEpoch != epoch {
		t.Fatalf("gate after activation: %+v, epoch %d", og.Row, epoch)
	}
	rows, err = r.m.Ledger(r.m.Space).RemoteManagers().Credentials(ctx, inst)
	profiles := map[authority.Profile]bool{}
	for _, row := range rows {
		if e, _ := row.ServedEpoch(); row.State == authstore.CredActive && e == epoch {
			profiles[row.Profile] = true
		}
	}
	if err != nil || len(rows) != 3 || !profiles[authority.ProfileEndpointServe] || !profiles[authority.ProfileGoalWriter] || !profiles[authority.ProfileSessionLedger] {
		t.Fatalf("serving rows: %+v %v", rows, err)
	}
	if i := slices.IndexFunc(rows, func(r authstore.CredentialRow) bool { return r.Profile == authority.ProfileEndpointServe }); rows[i].UserKey != serve.PublicKey {
		t.Fatalf("the serve row names key %s", rows[i].UserKey)
	}
	// A gate of another person's principal is refused: bob registers his own instance, whose gate
	// alice's request cannot use.
	bobInst := wire.NewLifecycleUID()
	register(t, r, r.client(t, "bob-token", bobInst))
	if _, _, err := r.client(t, "alice-token", bobInst).Activate(ctx); code(err) != wire.CodePermissionDenied {
		t.Fatalf("activate another person's instance: %v, want permission-denied", err)
	}
}

func TestActivateRefusesAProofOverOtherArtifacts(t *testing.T) {
	r := newHostRig(t, 0)
	inst := wire.NewLifecycleUID()
	c := r.client(t, "alice-token", inst)
	register(t, r, c)
	// Send an activate whose proof covers a foreign artifact set, through the raw route.
	arts, err := remotemgr.ContractArtifacts()
	if err != nil {
		t.Fatal(err)
	}
	other := append(slices.Clone(arts[1:]), "sha256:"+string(bytes.Repeat([]byte("ab"), 32)))
	req := c.RawRequest(remotemgr.KindAuthority, remotemgr.OpActivate)
	req.ContractArtifacts = other
	req.RegistrationProof = remotemgr.RegistrationProof(alice, &req)
	if _, status, got := r.send(t, "alice-token", req); status != 403 || got != string(wire.CodePermissionDenied) {
		t.Fatalf("activate over other artifacts: HTTP %d %q", status, got)
	}
	// And a proof that is not this registration's.
	req = c.RawRequest(remotemgr.KindAuthority, remotemgr.OpActivate)
	req.ContractArtifacts = arts
	req.RegistrationProof = remotemgr.RegistrationProof(bob, &req)
	if _, status, got := r.send(t, "alice-token", req); status != 403 || got != string(wire.CodePermissionDenied) {
		t.Fatalf("activate with another owner's proof: HTTP %d %q", status, got)
	}
}

func TestRenewStandingBundle(t *testing.T) {
	r := newHostRig(t, 0)
	ctx := t.Context()
	c, serve, inst := r.activated(t, "alice-token")
	account := r.host.Keys.AccountPublicKey()
	st, err := c.Renew(ctx, account)
	if err != nil {
		t.Fatal(err)
	}
	if st.Supervisor == nil || st.Executor == nil || st.Serve == nil || st.GoalWriter == nil || st.SessionLedger == nil || st.Serve.PublicKey != serve.PublicKey {
		t.Fatalf("renewed bundle: %+v", st)
	}
	if _, err := c.Renew(ctx, "AFOREIGNACCOUNT"); code(err) != wire.CodePermissionDenied {
		t.Fatalf("renew for another account: %v", err)
	}
	// The caller-computable registration proof does not renew: only the host's current proof does.
	req := c.RawRequest(remotemgr.KindAuthority, remotemgr.OpRenewStandingBundle)
	epoch := c.Epoch()
	req.ProcessEpoch, req.AccountPublicKey = &epoch, account
	req.RegistrationProof = remotemgr.RegistrationProof(alice, &req)
	if _, status, got := r.send(t, "alice-token", req); status != 403 || got != string(wire.CodePermissionDenied) {
		t.Fatalf("renew with the registration proof: HTTP %d %q", status, got)
	}
	// A newer incarnation moves the gate: the old one's renewal is a stale epoch.
	next := r.client(t, "alice-token", inst)
	register(t, r, next)
	if _, _, err := next.Activate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Renew(ctx, account); code(err) != wire.CodePermissionDenied && code(err) != wire.CodeConflict {
		t.Fatalf("renew at a stale epoch: %v, want refused", err)
	}
	if _, err := next.Renew(ctx, account); err != nil {
		t.Fatalf("the current incarnation's renewal: %v", err)
	}
	// Revoking supervise ends renewals.
	r.who["alice-token"].Scopes = []string{"spawn"}
	if _, err := next.Renew(ctx, account); code(err) != wire.CodePermissionDenied {
		t.Fatalf("renew without supervise: %v", err)
	}
}

func TestRemoteManagerLivenessRows(t *testing.T) {
	r := newHostRig(t, 0)
	inst := wire.NewLifecycleUID()
	c := r.client(t, "alice-token", inst)
	st := register(t, r, c)
	exe := r.m.Connect(t, st.Executor)
	filter := meshwire.LivenessServeFilter(r.m.Space, wire.PlaneManager)
	if _, err := exe.QueueSubscribe(filter, "q", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	if refused, err := exe.Refused("Subscription", filter); err != nil || !refused {
		t.Fatalf("the executor subscribed to the liveness plane: refused=%v %v", refused, err)
	}
	sup := r.m.Connect(t, st.Supervisor)
	if _, err := sup.QueueSubscribe(filter, "q", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	if refused, err := sup.Refused("Subscription", filter); err != nil || refused {
		t.Fatalf("the supervisor's liveness subscription: refused=%v %v", refused, err)
	}
	// Another instance's gate is out of reach of both.
	other := meshwire.AuthBucket(r.m.Space).Subject(meshwire.EndpointGateKey(wire.ManagerEndpoint.Token(), wire.NewLifecycleUID()))
	for _, conn := range []*meshtest.Client{exe, sup} {
		if err := conn.Publish(other, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if refused, err := conn.Refused("Publish", other); err != nil || !refused {
			t.Fatalf("a write to another instance's gate: refused=%v %v", refused, err)
		}
	}
}

func TestEvictFamilyPrincipal(t *testing.T) {
	r := newHostRig(t, 0)
	c, serve, _ := r.activated(t, "alice-token")
	evict := func(principals ...string) remotemgr.Request {
		req := c.Hosted(remotemgr.KindMaintenance, remotemgr.OpEvictFamily)
		req.Principals = principals
		return req
	}
	// Not a holder of this instance's serving credentials.
	if _, status, got := r.send(t, "alice-token", evict(alice+".someone")); status != 403 || got != string(wire.CodePermissionDenied) {
		t.Fatalf("evict a non-holder: HTTP %d %q", status, got)
	}
	// Another person's instance.
	if _, status, got := r.send(t, "bob-token", evict(serve.Principal.String())); status != 403 || got != string(wire.CodePermissionDenied) {
		t.Fatalf("evict on another person's instance: HTTP %d %q", status, got)
	}
	conn := r.m.Connect(t, serve)
	if _, status, got := r.send(t, "alice-token", evict(serve.Principal.String())); status != 200 {
		t.Fatalf("evict the instance's own serve principal: HTTP %d %q", status, got)
	}
	meshtest.Eventually(t, 10*time.Second, "the evicted serve connection closes", conn.IsClosed)
}

// TestSessionRedeemedForAHolder: a session asked for with a holder is redeemed in the host's
// ledger for that holder, which takes its half from there. The holder must be the host
// operator's control principal at the lifecycle and epoch the ledger resolves: anything else is
// refused before anything is written or signed. The manager ends the session there as its
// serving party, which revokes the holder's half; an unknown session or a stale epoch is refused.
func TestSessionRedeemedForAHolder(t *testing.T) {
	r := newHostRig(t, 0)
	ctx := t.Context()
	l := r.m.Ledger(r.m.Space)
	c, _, _ := r.activated(t, "alice-token")
	ctl, err := l.Issue(ctx, ledger.Request{Profile: authority.ProfileControlAdmin, Name: ledger.ControlActor})
	if err != nil {
		t.Fatal(err)
	}
	holder, epoch, err := l.SessionHolder(ctx, wire.Lifecycle{Principal: ctl.Principal, UID: ctl.Instrument})
	if err != nil {
		t.Fatal(err)
	}
	agent := r.m.AgentCred(t, ledger.Request{Name: "erin"})
	ask := sessionAsk(t, c, agent)
	named := remotemgr.SessionHolder{ID: holder.Principal.String(), LifecycleUID: string(holder.UID), ProcessEpoch: epoch}
	for _, tc := range []struct {
		name string
		h    remotemgr.SessionHolder
		code wire.ErrorCode
	}{
		{"another epoch", remotemgr.SessionHolder{ID: named.ID, LifecycleUID: named.LifecycleUID, ProcessEpoch: epoch + 1}, wire.CodeConflict},
		{"another lifecycle", remotemgr.SessionHolder{ID: named.ID, LifecycleUID: string(wire.NewLifecycleUID())}, wire.CodeConflict},
		{"an agent of the host", remotemgr.SessionHolder{ID: agent.Principal.String(), LifecycleUID: string(agent.LifecycleUID)}, wire.CodeFailedPrecondition},
		{"another owner", remotemgr.SessionHolder{ID: alice + ".cli", LifecycleUID: string(wire.NewLifecycleUID())}, wire.CodeFailedPrecondition},
	} {
		sid := "refused_session-" + strings.ReplaceAll(tc.name, " ", "_")
		if _, status, code := r.send(t, "alice-token", ask(sid, tc.h)); status == 200 || code != string(tc.code) {
			t.Errorf("a holder with %s: HTTP %d %s, want %s", tc.name, status, code, tc.code)
		}
		if row, err := l.Session(ctx, sid); err != nil || row != nil {
			t.Errorf("a holder with %s left a session row: %+v %v", tc.name, row, err)
		}
	}
	const sid = "held_session-0123456789abcdef"
	req := ask(sid, named)
	out, status, code := r.send(t, "alice-token", req)
	if status != 200 || out.Credentials[remotemgr.CredSessionServing].JWT == "" {
		t.Fatalf("session for a holder: HTTP %d %s", status, code)
	}
	row, err := l.Session(ctx, sid)
	if err != nil || row == nil || row.Row.State != authstore.SessionActive || row.Row.Holder.LifecycleUID != holder.UID ||
		row.Row.Serving.InstanceID != wire.LifecycleUID(req.InstanceID) {
		t.Fatalf("the session's row in the host's ledger: %+v %v", row, err)
	}
	if out.Grant == nil {
		t.Fatal("the host answered a session for a holder without its grant")
	}
	half, err := l.SessionCaller(ctx, out.Grant, holder)
	if err != nil {
		t.Fatalf("the holder takes its half: %v", err)
	}
	conn := r.m.Connect(t, half)
	// Asked again, the session is the ledger's already: refused.
	if _, status, code := r.send(t, "alice-token", ask(sid, named)); status != 403 || code != string(wire.CodeConflict) {
		t.Fatalf("the same session asked again: HTTP %d %s", status, code)
	}

	// The manager ends it: not at another epoch, not one the ledger has no row of.
	end := func(sid string, epoch int64) (int, string) {
		req := c.Hosted(remotemgr.KindAuthority, remotemgr.OpSession)
		req.ProcessEpoch = &epoch
		req.Session = &remotemgr.SessionAsk{Endpoint: "manager", SessionID: sid, End: authstore.SessionClosed}
		_, status, code := r.send(t, "alice-token", req)
		return status, code
	}
	if status, code := end(sid, c.Epoch()+1); status != 403 || code != string(wire.CodePermissionDenied) { // the proof is the epoch's
		t.Errorf("end at a stale epoch: HTTP %d %s", status, code)
	}
	if status, code := end("no_such_session-0123456789", c.Epoch()); code != string(wire.CodeNotFound) {
		t.Errorf("end an unknown session: HTTP %d %s", status, code)
	}
	if err := c.EndSession(ctx, sid, authstore.SessionClosed); err != nil {
		t.Fatalf("the manager ends its session: %v", err)
	}
	if row, err := l.Session(ctx, sid); err != nil || row.Row.State != authstore.SessionClosed {
		t.Fatalf("the ended session's row: %+v %v", row, err)
	}
	meshtest.Eventually(t, 10*time.Second, "the holder's half closed by the broker", conn.IsClosed)
}

// TestSessionHeldByThePerson: the person who supervises a remote manager may hold a session of
// it, at their own incarnation; they take its caller half on the holder route and end it there,
// and nobody else does either. Bad input is refused before anything is read.
func TestSessionHeldByThePerson(t *testing.T) {
	r := newHostRig(t, 0)
	ctx := t.Context()
	l := r.m.Ledger(r.m.Space)
	aliceMe, bobMe := r.person(t, alice), r.person(t, bob)
	c, _, _ := r.activated(t, "alice-token")

	// The manager asks who holds a session each caller attaches: alice herself; not bob.
	held, err := c.SessionHolder(ctx, aliceMe)
	if err != nil || held.ID != aliceMe.Principal.String() || held.LifecycleUID != string(aliceMe.UID) {
		t.Fatalf("the holder of alice's session: %+v %v", held, err)
	}
	if _, err := c.SessionHolder(ctx, bobMe); err == nil {
		t.Fatal("bob holds a session of alice's manager")
	}
	agent := r.m.AgentCred(t, ledger.Request{Name: "erin"})
	ask := sessionAsk(t, c, agent)
	bobHolder, _, err := l.SessionHolder(ctx, bobMe)
	if err != nil {
		t.Fatal(err)
	}
	const bobSID = "bob_session-0123456789abcdef"
	if _, status, code := r.send(t, "alice-token", ask(bobSID, remotemgr.SessionHolder{ID: bobHolder.Principal.String(), LifecycleUID: string(bobHolder.UID)})); status == 200 || code != string(wire.CodeFailedPrecondition) {
		t.Fatalf("alice's manager redeems a session for bob: HTTP %d %s", status, code)
	}
	const sid = "alice_session-0123456789abcdef"
	out, status, refusal := r.send(t, "alice-token", ask(sid, *held))
	if status != 200 {
		t.Fatalf("alice's manager redeems her session: HTTP %d %s", status, refusal)
	}
	grant, err := sessiongrant.Parse(out.Grant)
	if err != nil {
		t.Fatal(err)
	}

	holder := func(token string) *remotemgr.HolderClient {
		return &remotemgr.HolderClient{URL: r.url + remotemgr.HolderPath, Space: r.m.Space, Actor: "cli", HTTP: http.DefaultClient,
			IDToken: func(context.Context) (string, error) { return token, nil }}
	}
	raw := func(body string) (int, string) {
		t.Helper()
		res, err := http.Post(r.url+remotemgr.HolderPath, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var refusal struct {
			Error string `json:"error"`
		}
		_ = json.NewDecoder(res.Body).Decode(&refusal)
		return res.StatusCode, refusal.Error
	}
	good := fmt.Sprintf(`{"v":1,"idpToken":"alice-token","space":%q,"actor":"cli","sessionId":%q}`, r.m.Space, sid)
	for _, tc := range []struct {
		name, body string
		status     int
		code       wire.ErrorCode
	}{
		{"not JSON", "{", 400, wire.CodeBadRequest},
		{"an unknown field", strings.Replace(good, `"v":1`, `"v":1,"holder":"x"`, 1), 400, wire.CodeBadRequest},
		{"trailing data", good + "{}", 400, wire.CodeBadRequest},
		{"another version", strings.Replace(good, `"v":1`, `"v":2`, 1), 400, wire.CodeBadRequest},
		{"no idpToken", strings.Replace(good, `"alice-token"`, `""`, 1), 400, wire.CodeBadRequest},
		{"a malformed session id", strings.Replace(good, sid, "a.b", 1), 400, wire.CodeBadRequest},
		{"a malformed actor", strings.Replace(good, `"cli"`, `"a.b"`, 1), 400, wire.CodeBadRequest},
		{"another space", strings.Replace(good, fmt.Sprintf("%q", r.m.Space), `"other"`, 1), 403, wire.CodePermissionDenied},
		{"an unknown token", strings.Replace(good, "alice-token", "mallory-token", 1), 403, wire.CodePermissionDenied},
		{"a person without supervise", strings.Replace(good, "alice-token", "carol-token", 1), 403, wire.CodePermissionDenied},
		{"another person with supervise", strings.Replace(good, "alice-token", "bob-token", 1), 404, wire.CodeNotFound},
		{"a session nobody redeemed", strings.Replace(good, sid, bobSID, 1), 404, wire.CodeNotFound},
	} {
		if status, code := raw(tc.body); status != tc.status || code != string(tc.code) {
			t.Errorf("%s: HTTP %d %s, want %d %s", tc.name, status, code, tc.status, tc.code)
		}
	}
	// A session of the host's own manager is no person's to take, even its holder's id known.
	if _, err := holder("alice-token").Caller(ctx, stubGrant(ownSession(t, r.m)), aliceMe); code(err) != wire.CodeNotFound {
		t.Errorf("alice takes a half of the host's own session: %v", err)
	}

	// A grant of another session, or hers with one byte changed, releases nothing.
	other := *grant
	other.SessionID = bobSID
	if _, err := holder("alice-token").Caller(ctx, &other, aliceMe); code(err) != wire.CodeNotFound {
		t.Errorf("alice presents her grant for another session: %v", err)
	}
	tampered := *grant
	tampered.Raw = bytes.Replace(grant.Raw, []byte(`"processEpoch":`), []byte(`"processEpoch":1`), 1)
	if _, err := holder("alice-token").Caller(ctx, &tampered, aliceMe); code(err) != wire.CodePermissionDenied {
		t.Errorf("alice presents a tampered grant: %v, want permission-denied", err)
	}
	half, err := holder("alice-token").Caller(ctx, grant, aliceMe)
	if err != nil {
		t.Fatalf("alice takes her half: %v", err)
	}
	if half.Profile != authority.ProfileSessionCaller || half.Principal != aliceMe.Principal || half.Expires.After(time.Now().Add(time.Hour+time.Minute)) {
		t.Fatalf("alice's half: %v, expiring %s", half, half.Expires)
	}
	conn := r.m.Connect(t, half)
	if err := holder("bob-token").End(ctx, sid); code(err) != wire.CodeNotFound {
		t.Fatalf("bob ends alice's session: %v", err)
	}
	if err := holder("alice-token").End(ctx, sid); err != nil {
		t.Fatalf("alice ends her session: %v", err)
	}
	meshtest.Eventually(t, 10*time.Second, "alice's half closed by the broker", conn.IsClosed)
	if row, err := l.Session(ctx, sid); err != nil || row.Row.State != authstore.SessionClosed || !row.Row.Revoked.Caller || !row.Row.Revoked.Serving {
		t.Fatalf("the ended session's row: %+v %v", row, err)
	}
	if _, err := holder("alice-token").Caller(ctx, grant, aliceMe); code(err) != wire.CodeFailedPrecondition {
		t.Fatalf("the half of an ended session: %v", err)
	}

	// supervise revoked while her half was read: the session ends, and no half goes out.
	const late = "late_session-0123456789abcdef"
	out, status, refusal = r.send(t, "alice-token", ask(late, *held))
	if status != 200 {
		t.Fatalf("redeem the second session: HTTP %d %s", status, refusal)
	}
	lateGrant, err := sessiongrant.Parse(out.Grant)
	if err != nil {
		t.Fatal(err)
	}
	r.host.People = &losesSupervise{}
	if _, err := holder("alice-token").Caller(ctx, lateGrant, aliceMe); code(err) != wire.CodePermissionDenied {
		t.Fatalf("a half read while supervise went: %v", err)
	}
	if row, err := l.Session(ctx, late); err != nil || row.Row.State != authstore.SessionClosed {
		t.Fatalf("the session whose person lost supervise: %+v %v", row, err)
	}
}

// stubGrant stands for a grant of session sid the person does not hold: the host refuses it
// before it reads the grant.
func stubGrant(sid string) *sessiongrant.Grant {
	return &sessiongrant.Grant{SessionID: sid, Raw: json.RawMessage(`{}`)}
}

// sessionAsk returns how c, an activated manager, asks for a session on agent's terminal held by
// a holder, for an hour.
func sessionAsk(t *testing.T, c *remotemgr.Client, agent *authority.Credential) func(sid string, h remotemgr.SessionHolder) remotemgr.Request {
	target := remotemgr.Target{Owner: agent.Principal.Owner(), Actor: agent.Principal.Actor(), LifecycleUID: string(agent.LifecycleUID)}
	return func(sid string, h remotemgr.SessionHolder) remotemgr.Request {
		req := c.Hosted(remotemgr.KindAuthority, remotemgr.OpSession)
		req.Session = &remotemgr.SessionAsk{ID: newUserKey(t), Endpoint: "manager", SessionID: sid, Epoch: c.Epoch(),
			Exp: time.Now().Add(time.Hour).Unix(), Holder: &h, Target: &target}
		return req
	}
}

// ownSession redeems a session of a manager instance of the host's own in its ledger, as the
// host's supervisor does for an attach, held by an agent of the host, and returns its id.
func ownSession(t *testing.T, m *meshtest.Mesh) string {
	t.Helper()
	cred := m.AgentCred(t, ledger.Request{Name: "attacher"})
	const sid = "own_session-0123456789abcdef"
	ownSessionFor(t, m, sid, wire.Lifecycle{Principal: cred.Principal, UID: cred.LifecycleUID})
	return sid
}

// ownSessionFor redeems session sid held by holder and served by a manager instance of the
// host's own, which no registration names.
func ownSessionFor(t *testing.T, m *meshtest.Mesh, sid string, holder wire.Lifecycle) {
	t.Helper()
	serving := authstore.Endpoint{Name: wire.ManagerEndpoint.Token(), InstanceID: wire.NewLifecycleUID()}
	err := m.WithStore(t, func(s *authstore.Store, _ *authority.SpaceKeys) error {
		g, err := s.ServeGate(serving)
		if err != nil {
			return err
		}
		_, err = g.Move(t.Context(), nil, authstore.EndpointGateRow{State: authstore.GateOpen, Generation: 1, ProcessEpoch: 1,
			Principal: "local.cotal_manager", Op: &authstore.EndpointGateOp{OpID: "op-own", Kind: authstore.OpActivation}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	redeemIn(t, m, sid, holder, serving, 1)
}

// redeemIn redeems session sid in the host's ledger directly, held by holder at its current
// epoch and served by serving at servingEpoch, for an hour.
func redeemIn(t *testing.T, m *meshtest.Mesh, sid string, holder wire.Lifecycle, serving authstore.Endpoint, servingEpoch int64) {
	t.Helper()
	ctx := t.Context()
	err := m.WithStore(t, func(s *authstore.Store, keys *authority.SpaceKeys) error {
		epoch, err := s.CurrentEpoch(ctx, holder)
		if err != nil {
			return err
		}
		_, err = s.RedeemSession(ctx, keys, authstore.SessionRequest{SessionID: sid, Holder: holder, HolderEpoch: epoch,
			Serving: serving, ServingEpoch: servingEpoch, Expires: time.Now().Add(time.Hour)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPersonHolderRefusals covers what a person's session must be besides theirs by name: served
// by a remote manager registered to them, held at their current incarnation, and held by their
// own interactive row, never by one of their managed agents.
func TestPersonHolderRefusals(t *testing.T) {
	r := newHostRig(t, 0)
	ctx := t.Context()
	l := r.m.Ledger(r.m.Space)
	aliceMe := r.person(t, alice)
	c, _, _ := r.activated(t, "alice-token")
	bobC, _, bobInst := r.activated(t, "bob-token")
	ask := sessionAsk(t, c, r.m.AgentCred(t, ledger.Request{Name: "erin"}))
	held, err := c.SessionHolder(ctx, aliceMe)
	if err != nil {
		t.Fatal(err)
	}
	alices := &remotemgr.HolderClient{URL: r.url + remotemgr.HolderPath, Space: r.m.Space, Actor: "cli", HTTP: http.DefaultClient,
		IDToken: func(context.Context) (string, error) { return "alice-token", nil }}
	stillActive := func(sid string) {
		t.Helper()
		if row, err := l.Session(ctx, sid); err != nil || row == nil || row.Row.State != authstore.SessionActive {
			t.Fatalf("session %s after a refused request: %+v %v; want it active and untouched", sid, row, err)
		}
	}

	// Held by alice at her incarnation, but served by no remote manager of hers: the host's own
	// manager (no registration), or bob's. Neither half nor end is hers.
	const ownSID, bobSID = "own_alice-0123456789abcdef", "bob_alice-0123456789abcdef"
	ownSessionFor(t, r.m, ownSID, aliceMe)
	redeemIn(t, r.m, bobSID, aliceMe, authstore.Endpoint{Name: wire.ManagerEndpoint.Token(), InstanceID: bobInst}, bobC.Epoch())
	for _, sid := range []string{ownSID, bobSID} {
		if _, err := alices.Caller(ctx, stubGrant(sid), aliceMe); code(err) != wire.CodeNotFound {
			t.Errorf("alice takes the half of %s: %v, want not-found", sid, err)
		}
		if err := alices.End(ctx, sid); code(err) != wire.CodeNotFound {
			t.Errorf("alice ends %s: %v, want not-found", sid, err)
		}
		stillActive(sid)
	}

	// A managed agent of alice's, even one delegated supervise, cannot hold a session.
	bot, err := r.people.GrantManaged(ctx, &userauth.Row{Owner: alice, Actor: "bot", Parent: aliceMe.Principal.String(), Scope: []string{"supervise"},
		TokenHash: strings.Repeat("ab", 32), LifecycleUID: wire.NewLifecycleUID()})
	if err != nil {
		t.Fatal(err)
	}
	botMe := wire.Lifecycle{Principal: bot.Principal(), UID: bot.LifecycleUID}
	if _, err := l.EnsureRoot(ctx, alice, "bot", bot.LifecycleUID); err != nil {
		t.Fatal(err)
	}
	botHolder, botEpoch, err := l.SessionHolder(ctx, botMe)
	if err != nil {
		t.Fatal(err)
	}
	const botSID = "bot_session-0123456789abcdef"
	if _, status, code := r.send(t, "alice-token", ask(botSID, remotemgr.SessionHolder{ID: botHolder.Principal.String(), LifecycleUID: string(botHolder.UID), ProcessEpoch: botEpoch})); status == 200 || code != string(wire.CodeFailedPrecondition) {
		t.Errorf("a session held by alice's managed agent: HTTP %d %s, want failed-precondition", status, code)
	}

	// A new incarnation of alice (her row granted anew, started by her next bearer) supersedes
	// the sessions of the former one: their halves are revoked and not hers to take, and a
	// redemption for the former incarnation is refused.
	const oldSID = "old_session-0123456789abcdef"
	if _, status, code := r.send(t, "alice-token", ask(oldSID, *held)); status != 200 {
		t.Fatalf("redeem at alice's incarnation: HTTP %d %s", status, code)
	}
	r.person(t, alice)
	if _, err := alices.Caller(ctx, stubGrant(oldSID), aliceMe); code(err) != wire.CodeNotFound {
		t.Errorf("the half of a session of alice's former incarnation: %v, want not-found", err)
	}
	if row, err := l.Session(ctx, oldSID); err != nil || row.Row.State != authstore.SessionSuperseded || !row.Row.Revoked.Caller {
		t.Errorf("the session of alice's former incarnation: %+v %v; want it superseded", row, err)
	}
	if _, status, code := r.send(t, "alice-token", ask("stale_session-0123456789abcdef", *held)); status == 200 || code != string(wire.CodeFailedPrecondition) {
		t.Errorf("a redemption for alice's former incarnation: HTTP %d %s, want failed-precondition", status, code)
	}
	if row, err := l.Session(ctx, "stale_session-0123456789abcdef"); err != nil || row != nil {
		t.Errorf("the refused redemption wrote %+v %v", row, err)
	}
}

func TestSessionRetireAndEnrollmentChecks(t *testing.T) {
	r := newHostRig(t, 0)
	ctx := t.Context()
	c, _, _ := r.activated(t, "alice-token")
	// session: the serving half lives until the session expires, but never past a day.
	servingKey := func() string { return newUserKey(t) }
	for _, tc := range []struct {
		name string
		exp  time.Time
		max  time.Duration
	}{{"an hour", time.Now().Add(time.Hour), time.Hour}, {"a week", time.Now().Add(7 * 24 * time.Hour), 24 * time.Hour}} {
		req := c.Hosted(remotemgr.KindAuthority, remotemgr.OpSession)
		req.Session = &remotemgr.SessionAsk{ID: servingKey(), Endpoint: "manager", SessionID: "sEsSiOn_iD-0123456789abcdef", Epoch: c.Epoch(), Exp: tc.exp.Unix()}
		out, status, code := r.send(t, "alice-token", req)
		if status != 200 {
			t.Fatalf("session for %s: HTTP %d %s", tc.name, status, code)
		}
		claims, err := jwt.DecodeUserClaims(out.Credentials[remotemgr.CredSessionServing].JWT)
		if err != nil {
			t.Fatal(err)
		}
		if life := time.Until(time.Unix(claims.Expires, 0)); life > tc.max || life < tc.max-time.Minute || claims.Subject != req.Session.ID || claims.Name != string(authority.ProfileSessionServing) {
			t.Errorf("session for %s: lives %s, subject %s, profile %s", tc.name, life, claims.Subject, claims.Name)
		}
	}
	// A session of the host's own manager: its rails are not a remote manager's to serve.
	own := c.Hosted(remotemgr.KindAuthority, remotemgr.OpSession)
	own.Session = &remotemgr.SessionAsk{ID: servingKey(), Endpoint: "manager", SessionID: ownSession(t, r.m), Epoch: c.Epoch(), Exp: time.Now().Add(time.Hour).Unix()}
	if _, status, code := r.send(t, "alice-token", own); status != 403 || code != string(wire.CodeConflict) {
		t.Fatalf("session on the host's own session: HTTP %d %s", status, code)
	}

	// transferReader: the instance's own store, for a few minutes, at the current epoch only.
	tr := c.Hosted(remotemgr.KindAuthority, remotemgr.OpTransferReader)
	tr.TransferReader = &remotemgr.Identity{ID: servingKey()}
	out, status, refusal := r.send(t, "alice-token", tr)
	if status != 200 {
		t.Fatalf("transferReader: HTTP %d %s", status, refusal)
	}
	claims, err := jwt.DecodeUserClaims(out.Credentials[remotemgr.CredTransferReader].JWT)
	if err != nil || claims.Subject != tr.TransferReader.ID || claims.Name != string(authority.ProfileTransferReader) || claims.Expires-claims.IssuedAt > 300 {
		t.Fatalf("transfer reader: %+v %v", claims, err)
	}
	stale := *tr.ProcessEpoch + 1
	tr.ProcessEpoch = &stale
	if _, status, refusal := r.send(t, "alice-token", tr); status != 403 {
		t.Fatalf("transferReader at another epoch: HTTP %d %s", status, refusal)
	}

	// retire: only the caller's own agents.
	req := c.RawRequest(remotemgr.KindAuthority, remotemgr.OpRetire)
	req.RegistrationProof = c.Hosted(remotemgr.KindAuthority, remotemgr.OpRetire).RegistrationProof
	stranger := wire.NewLifecycleUID()
	req.Retirement = &remotemgr.Retirement{ID: newUserKey(t), Target: remotemgr.Target{Owner: bob, Actor: "x", LifecycleUID: string(stranger)},
		OpID: remotemgr.RetirementOpID(stranger), ServeEpoch: c.Epoch()}
	if _, status, code := r.send(t, "alice-token", req); status != 403 || code != string(wire.CodePermissionDenied) {
		t.Fatalf("retire another owner's agent: HTTP %d %s", status, code)
	}
	// Alice's own lifecycle, but not an agent this instance spawned (her cli, say).
	req.Retirement.Target.Owner = alice
	if _, status, code := r.send(t, "alice-token", req); status != 403 || code != string(wire.CodePermissionDenied) {
		t.Fatalf("retire a lifecycle the instance did not spawn: HTTP %d %s", status, code)
	}
	req.Retirement.OpID = "wrong"
	if _, status, code := r.send(t, "alice-token", req); status != 400 || code != string(wire.CodeBadRequest) {
		t.Fatalf("retire with another opId: HTTP %d %s", status, code)
	}

	// enrollment: a managed row within the person's row only, whose token the host keeps hashed.
	r.grantRow(t, alice, []string{"team.>"}, []string{"team.a"})
	for name, e := range map[string]remotemgr.Enrollment{
		"beyond the read ACL":          {Name: "wide", Subscribe: []string{"general"}},
		"beyond the publish ACL":       {Name: "loud", Subscribe: []string{"team.a"}, AllowPublish: []string{"team.b"}},
		"a role the person lacks":      {Name: "worker", Subscribe: []string{"team.a"}, Role: "builder"},
		"the manager's own identity":   {Name: c.Actors().Serve},
		"another manager's identity":   {Name: meshwire.RemoteManagerActorsOf(wire.NewLifecycleUID()).Serve},
		"the person's own actor (cli)": {Name: "cli"},
	} {
		if _, err := c.Enroll(ctx, e); code(err) != wire.CodePermissionDenied {
			t.Errorf("enroll %s: %v, want permission-denied", name, err)
		}
	}
	got, err := c.Enroll(ctx, remotemgr.Enrollment{Name: "ok", Subscribe: []string{"team.a"}})
	if err != nil || got.ActorToken == "" || !slices.Equal(got.Grant.AllowPublish, []string{"team.a"}) {
		t.Fatalf("enroll within the envelope: %+v %v", got, err)
	}
	if _, err := c.Enroll(ctx, remotemgr.Enrollment{Name: "ok", Subscribe: []string{"team.a"}}); code(err) != wire.CodeAlreadyExists {
		t.Fatalf("enroll a name a live agent holds: %v", err)
	}
	row, err := r.people.Get(ctx, alice, "ok")
	if err != nil || row.Kind != userauth.KindManaged || row.LifecycleUID != got.LifecycleUID || row.TokenHash == "" || strings.Contains(row.TokenHash, got.ActorToken) {
		t.Fatalf("the managed row: %+v %v", row, err)
	}
	ok, _ := wire.NewPrincipal(alice, "ok")
	if err := c.Retire(ctx, wire.Lifecycle{Principal: ok, UID: got.LifecycleUID}); err != nil {
		t.Fatalf("retire its own agent: %v", err)
	}
	if _, err := r.people.Get(ctx, alice, "ok"); !errors.Is(err, userauth.ErrNoRow) {
		t.Fatalf("the retired agent's row: %v", err)
	}
}

// losesSupervise answers for alice with supervise the first time, and without it after: the
// person's scope revoked while a request of theirs is under way.
type losesSupervise struct{ calls int }

func (l *losesSupervise) Authenticate(context.Context, string, string) (*remotemgr.Person, error) {
	l.calls++
	if l.calls == 1 {
		return &remotemgr.Person{Owner: alice, Scopes: []string{"supervise"}}, nil
	}
	return &remotemgr.Person{Owner: alice, Scopes: []string{"spawn"}}, nil
}

// TestRevokedDuringARequest: what a request signed while its person lost supervise is taken back
// and the request refused, since the revocation's eviction may have run before it was signed.
func TestRevokedDuringARequest(t *testing.T) {
	r := newHostRig(t, 0)
	ctx := t.Context()
	c, _, _ := r.activated(t, "alice-token")
	r.grantRow(t, alice, []string{">"}, []string{">"})
	r.host.People = &losesSupervise{}
	if _, err := c.Renew(ctx, r.host.Keys.AccountPublicKey()); code(err) != wire.CodePermissionDenied {
		t.Fatalf("a renewal signed while supervise went: %v", err)
	}
	r.host.People = &losesSupervise{}
	if _, err := c.Enroll(ctx, remotemgr.Enrollment{Name: "late"}); code(err) != wire.CodePermissionDenied {
		t.Fatalf("an enrollment made while supervise went: %v", err)
	}
	if _, err := r.people.Get(ctx, alice, "late"); !errors.Is(err, userauth.ErrNoRow) {
		t.Fatalf("the late agent's row stayed: %v", err)
	}
}

// TestRenewNeedsAnOpenGate: the older renewal signs exactly the supervisor and executor again, on
// the registration proof, and only while the instance's gate is open: before registration it is
// failed-precondition, with another proof permission-denied.
func TestRenewNeedsAnOpenGate(t *testing.T) {
	r := newHostRig(t, 0)
	ctx := t.Context()
	c := r.client(t, "alice-token", wire.NewLifecycleUID())
	if _, err := c.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	renew := func(proof func(req *remotemgr.Request) string) (*remotemgr.Response, int, string) {
		req := c.RawRequest(remotemgr.KindAuthority, remotemgr.OpRenew)
		req.RegistrationProof = proof(&req)
		return r.send(t, "alice-token", req)
	}
	own := func(req *remotemgr.Request) string { return remotemgr.RegistrationProof(alice, req) }
	if _, status, got := renew(own); status != 403 || got != string(wire.CodeFailedPrecondition) {
		t.Fatalf("renew before the gate is registered: HTTP %d %q", status, got)
	}
	c2 := r.client(t, "alice-token", wire.NewLifecycleUID())
	register(t, r, c2)
	c = c2
	resp, status, got := renew(own)
	if status != 200 {
		t.Fatalf("renew with an open gate: HTTP %d %q", status, got)
	}
	if len(resp.Credentials) != 2 || resp.Credentials[remotemgr.CredSupervisor].JWT == "" || resp.Credentials[remotemgr.CredExecutor].JWT == "" {
		t.Fatalf("renew issued %d credentials: %v", len(resp.Credentials), slices.Collect(maps.Keys(resp.Credentials)))
	}
	other := func(req *remotemgr.Request) string {
		return remotemgr.RegistrationProof("u_bbbbbbbbbbbbbbbbbbbbbbbbbb", req)
	}
	if _, status, got := renew(other); status != 403 || got != string(wire.CodePermissionDenied) {
		t.Fatalf("renew with another owner's proof: HTTP %d %q", status, got)
	}
}

// TestRenewRunDriver: a run attempt's driver and mediator are signed again, exactly those two, as
// the run's own caller of the person's owner, only while the run's status record says it runs
// under the lease the request names; a run with no record, one no longer running, a wrong fencing
// token or holder, a stale epoch and the caller-computable proof are all refused.
func TestRenewRunDriver(t *testing.T) {
	r := newHostRig(t, 0)
	ctx := t.Context()
	c, _, inst := r.activated(t, "alice-token")
	// The run's status, as its driver writes it (a run-driver credential is the record's writer).
	const runID, takeover = "r-1", "tk1"
	writer, err := r.host.Keys.Mint(authority.MintRequest{Profile: authority.ProfileRunDriver, Grant: authority.Grant{
		Principal: principalOf(t, alice+".wf_writer"), Run: authority.RunReplay{RunID: runID, TakeoverID: takeover},
		Serve: &authority.ServeRows{Endpoint: wire.ManagerEndpoint, Instance: inst, Epoch: c.Epoch()}}})
	if err != nil {
		t.Fatal(err)
	}
	wc := r.m.Connect(t, writer)
	statusKey := meshwire.RecordsBucket(r.m.Space).Subject(meshwire.RecordKey(meshwire.RecordRun, wire.ManagerEndpoint, runID, meshwire.RecordStatusLeaf))
	holder := string(inst) // the run is held here
	setStatus := func(state meshwire.RunState, token int64) {
		t.Helper()
		raw, _ := json.Marshal(meshwire.RunStatus{V: 1, State: state, Holder: holder, Epoch: 2, FencingToken: token, JournalHigh: 3, At: 1})
		if _, err := wc.JS.Publish(ctx, statusKey, raw); err != nil { // a KV put, as the driver's grant holds it
			t.Fatal(err)
		}
	}
	driver, mediator := newUserKey(t), newUserKey(t)
	renew := func(edit func(*remotemgr.Request)) (*remotemgr.Response, int, string) {
		req := c.Hosted(remotemgr.KindAuthority, remotemgr.OpRenewRunDriver)
		req.AccountPublicKey = r.host.Keys.AccountPublicKey()
		req.Run = &remotemgr.RunAttempt{RunID: runID, Holder: holder, TakeoverID: takeover, Epoch: 2, FencingToken: 5, DriverID: driver, MediatorID: mediator}
		if edit != nil {
			edit(&req)
		}
		return r.send(t, "alice-token", req)
	}
	if _, status, got := renew(nil); status != 403 || got != string(wire.CodeConflict) {
		t.Fatalf("renew a run with no status record: HTTP %d %q", status, got)
	}
	setStatus(meshwire.RunRunning, 5)
	resp, status, got := renew(nil)
	if status != 200 || len(resp.Credentials) != 2 {
		t.Fatalf("renew a running run: HTTP %d %q, %d credentials", status, got, len(resp.Credentials))
	}
	caller, err := meshwire.RunCaller(alice, runID)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]struct {
		profile authority.Profile
		key     string
	}{remotemgr.CredRunDriver: {authority.ProfileRunDriver, driver}, remotemgr.CredRunMediator: {authority.ProfileRunMediator, mediator}} {
		uc, err := jwt.DecodeUserClaims(resp.Credentials[name].JWT)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if uc.Name != string(want.profile) || uc.Subject != want.key || !slices.Contains(uc.Tags, "principal:"+caller.Principal.String()) {
			t.Errorf("%s: name %s, subject %s, tags %v", name, uc.Name, uc.Subject, uc.Tags)
		}
	}
	for what, edit := range map[string]func(*remotemgr.Request){
		"a wrong fencing token": func(q *remotemgr.Request) { q.Run.FencingToken = 4 },
		"another holder":        func(q *remotemgr.Request) { q.Run.Holder = string(wire.NewLifecycleUID()) },
		"another lease epoch":   func(q *remotemgr.Request) { q.Run.Epoch = 3 },
		"a stale process epoch": func(q *remotemgr.Request) { e := *q.ProcessEpoch + 1; q.ProcessEpoch = &e },
	} {
		if _, status, got := renew(edit); status != 403 || got != string(wire.CodeConflict) && got != string(wire.CodePermissionDenied) {
			t.Errorf("renew with %s: HTTP %d %q", what, status, got)
		}
	}
	if _, status, got := renew(func(q *remotemgr.Request) { q.RegistrationProof = remotemgr.RegistrationProof(alice, q) }); status != 403 || got != string(wire.CodePermissionDenied) {
		t.Errorf("renew with the caller-computable proof: HTTP %d %q", status, got)
	}
	for what, edit := range map[string]func(*remotemgr.Request){
		"no run":              func(q *remotemgr.Request) { q.Run = nil },
		"one key for both":    func(q *remotemgr.Request) { q.Run.MediatorID = q.Run.DriverID },
		"a takeover with '_'": func(q *remotemgr.Request) { q.Run.TakeoverID = "a_b" },
		"no fencing token":    func(q *remotemgr.Request) { q.Run.FencingToken = 0 },
	} {
		if _, status, got := renew(edit); status != 400 || got != string(wire.CodeBadRequest) {
			t.Errorf("renew with %s: HTTP %d %q", what, status, got)
		}
	}
	// A run another instance holds: its lease copied off the record buys nothing here.
	holder = string(wire.NewLifecycleUID())
	setStatus(meshwire.RunRunning, 5)
	if _, status, got := renew(nil); status != 403 || got != string(wire.CodeConflict) {
		t.Fatalf("renew a run another instance holds: HTTP %d %q", status, got)
	}
	holder = string(inst)
	setStatus(meshwire.RunCompleted, 5)
	if _, status, got := renew(nil); status != 403 || got != string(wire.CodeConflict) {
		t.Fatalf("renew a completed run: HTTP %d %q", status, got)
	}
}

// newUserKey returns a fresh public user nkey.
func newUserKey(t *testing.T) string {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	return pub
}

// principalOf parses a principal the test spells.
func principalOf(t *testing.T, s string) wire.Principal {
	t.Helper()
	p, err := wire.ParsePrincipal(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRetireLifecycleChecks drives the auth endpoint's retire-lifecycle as a retirement requester
// the retire operation issued: the broker refuses it any target but its own, and the endpoint
// refuses another serve gate, a stale epoch and another opId before it retires the agent, once,
// answering a retry as retired.
func TestRetireLifecycleChecks(t *testing.T) {
	r := newHostRig(t, 0)
	ctx := t.Context()
	c, _, inst := r.activated(t, "alice-token")
	r.grantRow(t, alice, []string{"team.>"}, []string{"team.a"})
	got, err := c.Enroll(ctx, remotemgr.Enrollment{Name: "dana", Subscribe: []string{"team.a"}})
	if err != nil {
		t.Fatal(err)
	}
	dana := wire.Lifecycle{Principal: principalOf(t, alice+".dana"), UID: got.LifecycleUID}

	// The requester, for a key of the test's own.
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	req := c.Hosted(remotemgr.KindAuthority, remotemgr.OpRetire)
	req.Retirement = &remotemgr.Retirement{ID: pub, Target: remotemgr.Target{Owner: alice, Actor: "dana", LifecycleUID: string(dana.UID)},
		OpID: remotemgr.RetirementOpID(dana.UID), ServeEpoch: c.Epoch()}
	resp, status, refusal := r.send(t, "alice-token", req)
	if status != 200 {
		t.Fatalf("retire: HTTP %d %s", status, refusal)
	}
	issued := resp.Credentials[remotemgr.CredRetirementRequester].JWT
	claims, err := jwt.DecodeUserClaims(issued)
	if err != nil || claims.Subject != pub || claims.Name != string(authority.ProfileRetirementRequester) || claims.Expires-claims.IssuedAt > 300 {
		t.Fatalf("the retirement requester: %+v %v", claims, err)
	}
	seed, _ := kp.Seed()
	creds, err := jwt.FormatUserConfig(issued, seed)
	if err != nil {
		t.Fatal(err)
	}
	serve := principalOf(t, alice+"."+c.Actors().Serve)
	nc, err := dial.As(ctx, r.m.URL(), &authority.Credential{Profile: authority.ProfileRetirementRequester, Principal: serve, PublicKey: pub, JWT: issued, Creds: creds})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	manager := wire.Lifecycle{Principal: serve, UID: wire.LifecycleUID(resp.ManagerLifecycleUID)}
	caller := endpoint.NewCaller(nc, r.m.Space, manager, "retire")
	res, err := caller.Describe(ctx, meshwire.AuthEndpoint, "")
	if err != nil {
		t.Fatal(err)
	}
	retire := func(target wire.Lifecycle, edit func(*authendpoint.RetireArgs)) (*authendpoint.Retired, error) {
		args := authendpoint.RetireArgs{OpID: remotemgr.RetirementOpID(target.UID), ServeEndpoint: "manager", ServeInstanceID: inst, ServeEpoch: c.Epoch()}
		if edit != nil {
			edit(&args)
		}
		call, err := res.Call(meshwire.CommandRetireLifecycle, args)
		if err != nil {
			t.Fatal(err)
		}
		call.Mode = wire.ModeExact
		call.Target = &wire.Target{Owner: target.Principal.Owner(), Actor: target.Principal.Actor(), LifecycleUID: string(target.UID)}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		reply, err := caller.Call(cctx, call)
		if err != nil {
			return nil, err
		}
		var out authendpoint.Retired
		return &out, json.Unmarshal(reply.Data, &out)
	}
	errCode := func(err error) wire.ErrorCode {
		if e, ok := errors.AsType[*wire.EndpointError](err); ok {
			return e.Code
		}
		return ""
	}
	// Another target: not in the requester's grant, so the broker drops the request.
	other := wire.Lifecycle{Principal: principalOf(t, alice+".cli"), UID: wire.NewLifecycleUID()}
	// The broker refuses the publish: the request never reaches the endpoint.
	if _, err := retire(other, nil); err == nil || !strings.Contains(err.Error(), "the broker refused the publish") {
		t.Errorf("a requester's request for a lifecycle its grant does not name: %v, want the broker's refusal", err)
	}
	for what, tc := range map[string]struct {
		edit func(*authendpoint.RetireArgs)
		want wire.ErrorCode
	}{
		"another serve endpoint":   {func(a *authendpoint.RetireArgs) { a.ServeEndpoint = "search" }, wire.CodeBadRequest},
		"an instance with no gate": {func(a *authendpoint.RetireArgs) { a.ServeInstanceID = wire.NewLifecycleUID() }, wire.CodeFailedPrecondition},
		"a stale epoch":            {func(a *authendpoint.RetireArgs) { a.ServeEpoch++ }, wire.CodeConflict},
		"another opId":             {func(a *authendpoint.RetireArgs) { a.OpID = "0123456789abcdef0123456789" }, wire.CodeConflict},
	} {
		if _, err := retire(dana, tc.edit); errCode(err) != tc.want {
			t.Errorf("retire with %s: %v, want %s", what, err, tc.want)
		}
	}
	if _, err := r.people.Get(ctx, alice, "dana"); err != nil {
		t.Fatalf("a refused retirement touched dana's row: %v", err)
	}
	for i := range 2 { // a retry after success is answered retired too
		out, err := retire(dana, nil)
		if err != nil || !out.Retired || out.LifecycleUID != dana.UID || !slices.Equal(out.EvictedPrincipals, []string{dana.Principal.String()}) {
			t.Fatalf("retire %d: %+v %v", i, out, err)
		}
	}
	if _, err := r.people.Get(ctx, alice, "dana"); !errors.Is(err, userauth.ErrNoRow) {
		t.Fatalf("dana's row after her retirement: %v", err)
	}
}

// TestRetireThroughAnyAuthInstance: on a cluster every authority node serves the auth endpoint
// in one queue group; a remote manager's retirements succeed whichever instance each reaches.
func TestRetireThroughAnyAuthInstance(t *testing.T) {
	r := newHostRig(t, 0)
	serveAuth(t, r.m, r.host)
	serveAuth(t, r.m, r.host)
	ctx := t.Context()
	c, _, _ := r.activated(t, "alice-token")
	r.grantRow(t, alice, []string{"team.>"}, []string{"team.a"})
	for i := range 8 {
		name := fmt.Sprintf("agent%d", i)
		got, err := c.Enroll(ctx, remotemgr.Enrollment{Name: name, Subscribe: []string{"team.a"}})
		if err != nil {
			t.Fatal(err)
		}
		p, _ := wire.NewPrincipal(alice, name)
		if err := c.Retire(ctx, wire.Lifecycle{Principal: p, UID: got.LifecycleUID}); err != nil {
			t.Fatalf("retire %s: %v", name, err)
		}
		if _, err := r.people.Get(ctx, alice, name); !errors.Is(err, userauth.ErrNoRow) {
			t.Fatalf("the retired agent %s's row: %v", name, err)
		}
	}
}

// TestUnansweredPeopleLedgerIsNoDenial: a people ledger that does not answer is an unavailable
// refusal, which a caller retries or takes to another node, never a denial of the row.
func TestUnansweredPeopleLedgerIsNoDenial(t *testing.T) {
	r := newHostRig(t, 0)
	ctx := t.Context()
	me := r.person(t, alice) // supervise, but not spawn
	if _, err := r.host.SpawnRow(ctx, me); code(err) != wire.CodePermissionDenied {
		t.Fatalf("SpawnRow of a row without spawn: %v, want permission-denied", err)
	}
	store := r.m.StoreClient(t)
	if err := store.JS.DeleteStream(ctx, meshwire.UserAuthBucket(r.m.Space).Stream()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.host.SpawnRow(ctx, me); code(err) != wire.CodeUnavailable {
		t.Fatalf("SpawnRow with the people ledger gone: %v, want unavailable", err)
	}
}
