package mesh_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/wire"
)

// presentEnv switches the test binary into a fake agent that joins the space with its launch
// material and stays present until SIGTERM.
const presentEnv = "COTAL_TEST_PRESENT_AGENT"

func TestMain(m *testing.M) {
	if os.Getenv(presentEnv) != "" {
		os.Exit(presentAgent())
	}
	os.Exit(m.Run())
}

func presentAgent() int {
	mat, err := manager.ReadMaterial(os.Getenv(manager.LaunchMaterialEnv))
	if err != nil {
		return 2
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opts, err := mat.ConnectOptions()
	if err != nil {
		return 3
	}
	c, err := cotal.Connect(ctx, mat.URL, opts...)
	if err != nil {
		return 4
	}
	defer c.Close(context.Background())
	<-sig
	return 0
}

// ready is a remote manager serving: its instance and epoch.
type ready struct {
	instance wire.LifecycleUID
	epoch    int64
}

// remote is a mesh in user-auth mode with a remote manager of alice's serving it from machine B.
type remote struct {
	m     *meshtest.Mesh
	st    *authservice.State
	owner string
	ready ready
	// done reports how the remote manager ended.
	done chan error
}

// startRemote starts a mesh in user-auth mode whose remote managers' standing credentials live
// life (the default when zero), grants alice supervise, and runs her remote manager on B until
// the test ends.
func startRemote(t *testing.T, life time.Duration) *remote {
	t.Helper()
	m := meshtest.Start(t, func(o *mesh.Options) {
		o.UserAuth = &mesh.UserAuthOptions{DevIdP: true, DevIdPAddr: "127.0.0.1:0", RemoteManagerLifetime: life}
	})
	ctx := t.Context()
	st, err := authservice.OpenState(m.Dir.UserAuthDir(m.Space), m.Space)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := authservice.FetchMeshDocument(ctx, http.DefaultClient, m.State().ExchangeURL)
	if err != nil {
		t.Fatal(err)
	}
	idToken := meshtest.DevLogin(t, doc, "alice")
	owner, err := st.Owner("alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.People.Grant(&userauth.Row{Owner: owner, Actor: "cli", Scope: []string{"supervise"},
		AllowSubscribe: []string{"general"}, AllowPublish: []string{"general"}}); err != nil {
		t.Fatal(err)
	}

	// Machine B.
	b := mesh.Dir{Path: t.TempDir() + "/" + mesh.DirName}
	readyc, done := make(chan ready, 1), make(chan error, 1)
	go func() {
		done <- mesh.SuperviseRemote(ctx, b, mesh.RemoteOptions{
			Space: m.Space, Server: doc.Server, AuthorityURL: doc.ManagerAuthorityURL, ExchangeURL: doc.ExchangeURL,
			SentinelCreds: []byte(doc.SentinelCreds), Actor: "cli",
			IDToken: func(context.Context) (string, error) { return idToken, nil },
			Ready:   func(i wire.LifecycleUID, e int64) { readyc <- ready{i, e} },
		})
	}()
	var rm ready
	select {
	case rm = <-readyc:
	case err := <-done:
		t.Fatalf("the remote manager ended before it served: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the remote manager did not come up")
	}
	return &remote{m: m, st: st, owner: owner, ready: rm, done: done}
}

// TestRemoteManager plays two machines on a mesh in user-auth mode: host A runs the mesh, its auth
// service and development IdP; B, with a mesh directory of its own and no keys, runs a remote
// manager for a person granted supervise. A's operator sees it in ps, spawns an agent on it that
// connects on bearers of its own, and its liveness plane answers bound; revoking supervise evicts
// it, ends it, and retires its agent.
func TestRemoteManager(t *testing.T) {
	t.Parallel()
	r := startRemote(t, 0)
	m, st, owner, rm, done, ctx := r.m, r.st, r.owner, r.ready, r.done, t.Context()

	// Its liveness plane answers bound, for its instance, to an agent on A.
	probe := m.AgentCred(t, ledger.Request{Name: "prober"})
	pc, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(probe.Creds))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	res, err := pc.Probe(ctx, wire.PlaneManager)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != wire.ResponderBound || res.Answer == nil || res.Answer.Instance != string(rm.instance) {
		t.Fatalf("manager liveness: %+v", res)
	}

	// A's operator: a spawn on it runs on B, as alice's managed agent on bearers.
	cred, err := m.Ledger("").Issue(ctx, ledger.Request{Profile: authority.ProfileControlAdmin, Name: "cotal_control"})
	if err != nil {
		t.Fatal(err)
	}
	oc := m.Connect(t, cred)
	records, err := oc.JS.KeyValue(ctx, string(m.Space.RecordsBucket()))
	if err != nil {
		t.Fatal(err)
	}
	mc := manager.NewClient(oc.Conn, m.Space, wire.Lifecycle{Principal: cred.Principal, UID: cred.Instrument}, "cotal_control")
	mc.Any = true
	sp, err := mc.SpawnOn(ctx, rm.instance, manager.SpawnArgs{Name: "dana", Subscribe: []string{"general"},
		LaunchOptions: &manager.LaunchOptions{Command: []string{os.Args[0], "-test.run=^$"}, Env: []string{presentEnv + "=1"}, Runtime: string(manager.RuntimeHeadless)}})
	if err != nil {
		t.Fatalf("spawn on the remote manager: %v", err)
	}
	if sp.State != manager.GoalSucceeded || sp.Acceptance.Owner != owner || sp.Acceptance.Executor.LifecycleUID != string(rm.instance) {
		t.Fatalf("spawn: %+v (%s)", sp.Acceptance, sp.Data)
	}
	row, err := st.People.Get(owner, "dana")
	if err != nil || row.Kind != userauth.KindManaged || row.Parent != owner+".cli" {
		t.Fatalf("dana's row: %+v %v", row, err)
	}
	g, err := mc.Ps(ctx, records)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := manager.Rows(g)
	if err != nil {
		t.Fatal(err)
	}
	var seen bool
	for _, r := range rows {
		seen = seen || (r.Name == "dana" && r.InstanceID == string(rm.instance) && r.Status == string(manager.StateRunning))
	}
	if !seen {
		t.Fatalf("ps on A does not list dana on the remote manager: %+v", rows)
	}

	// Revoking supervise: the host evicts the instance and retires its agents; the manager ends.
	if _, err := st.People.Grant(&userauth.Row{Owner: owner, Actor: "cli", Scope: []string{"spawn"}}); err != nil {
		t.Fatal(err)
	}
	if err := st.EvictManagers(ctx, m.Ledger(m.Space), owner, "cli"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "remote supervision ended") {
			t.Fatalf("the remote manager ended with %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the evicted remote manager kept running")
	}
	if _, err := st.People.Get(owner, "dana"); !errors.Is(err, userauth.ErrNoRow) {
		t.Fatalf("dana's row after her manager's eviction: %v", err)
	}
	if res, err := pc.Probe(ctx, wire.PlaneManager); err != nil || res.Verdict == wire.ResponderBound {
		t.Fatalf("manager liveness after eviction: %+v %v", res, err)
	}
	// The host deregistered it, so ps expects it no more.
	if in, err := endpoint.Instances(ctx, records, wire.ManagerEndpoint); len(in) != 0 {
		t.Fatalf("the evicted manager is still expected by ps: %+v %v", in, err)
	}
}

// TestRemoteManagerRenews runs a remote manager whose standing credentials live ten seconds, the
// shortest `up --remote-manager-lifetime` takes: it renews them at three quarters of their
// lifetime through the host, so after more than two lifetimes it still serves, on a serving
// credential whose expiry has moved, and its liveness plane still answers bound.
func TestRemoteManagerRenews(t *testing.T) {
	t.Parallel()
	const life = ledger.MinHeldLifetime
	r := startRemote(t, life)
	ctx := t.Context()
	l := r.m.Ledger(r.m.Space)
	serving := func() authority.CredentialRow {
		t.Helper()
		rows, err := l.ManagerCredentials(ctx, r.ready.instance)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range rows {
			if row.Profile == authority.ProfileEndpointServe {
				return row
			}
		}
		t.Fatalf("the instance has no serving credential among %d", len(rows))
		return authority.CredentialRow{}
	}
	first := serving()
	select {
	case err := <-r.done:
		t.Fatalf("the remote manager ended within %s: %v", 2*life+life/2, err)
	case <-time.After(2*life + life/2):
	}
	if now := serving(); now.CredentialID != first.CredentialID || now.State != authority.CredActive || !now.ExpiresAt.Time().After(time.Now()) {
		t.Fatalf("the serving credential after two lifetimes: %s %s, expires %s (first expired %s)", now.CredentialID, now.State, now.ExpiresAt.Time(), first.ExpiresAt.Time())
	}
	probe := r.m.AgentCred(t, ledger.Request{Name: "prober"})
	pc, err := cotal.Connect(ctx, r.m.URL(), cotal.WithCredsData(probe.Creds))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	if res, err := pc.Probe(ctx, wire.PlaneManager); err != nil || res.Verdict != wire.ResponderBound {
		t.Fatalf("manager liveness after two lifetimes: %+v %v", res, err)
	}
	// Its serve connection answers on the renewed credential.
	cred, err := l.Issue(ctx, ledger.Request{Profile: authority.ProfileControlAdmin, Name: "cotal_control"})
	if err != nil {
		t.Fatal(err)
	}
	oc := r.m.Connect(t, cred)
	mc := manager.NewClient(oc.Conn, r.m.Space, wire.Lifecycle{Principal: cred.Principal, UID: cred.Instrument}, "cotal_control")
	mc.Pinned = r.ready.instance
	if _, _, err := mc.PsPinned(ctx); err != nil {
		t.Fatalf("ps of the renewed remote manager: %v", err)
	}
}
