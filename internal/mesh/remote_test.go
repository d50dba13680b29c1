package mesh_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/remotemgr"
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
	c, err := cotal.Connect(ctx, mat.URL, cotal.WithCreds(mat.Creds))
	if err != nil {
		return 4
	}
	defer c.Close(context.Background())
	<-sig
	return 0
}

// person is the host's people ledger for one person, whose scopes the test changes.
type person struct{ who *remotemgr.Person }

func (p *person) Authenticate(_ context.Context, idToken, actor string) (*remotemgr.Person, error) {
	if idToken != "alice-idp-token" || actor != "cli" {
		return nil, errors.New("unknown person")
	}
	return p.who, nil
}

// TestRemoteManager plays two machines: host A runs the mesh and the authority route; B, with a
// mesh directory of its own and no keys, runs a remote manager for a person holding supervise.
// A's operator sees it in ps, spawns an agent on it, and its liveness plane answers bound;
// revoking supervise evicts it, ends it, and retires its agent.
func TestRemoteManager(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	keys, err := m.Keyring().Space(m.Space)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := remotemgr.OpenRegistry(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const owner = "u_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	alice := &person{who: &remotemgr.Person{Owner: owner, Scopes: []string{"supervise"}, AllowSubscribe: []string{">"}, AllowPublish: []string{">"}}}
	host := &remotemgr.Host{Space: m.Space, Keys: keys, Ledger: m.Ledger(m.Space), People: alice, Registry: reg}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		status, reply := host.Handle(r.Context(), body)
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(reply)
	}))
	defer srv.Close()

	// Machine B.
	b := mesh.Dir{Path: t.TempDir() + "/" + mesh.DirName}
	type ready struct {
		instance wire.LifecycleUID
		epoch    int64
	}
	readyc, done := make(chan ready, 1), make(chan error, 1)
	go func() {
		done <- mesh.SuperviseRemote(ctx, b, mesh.RemoteOptions{
			Space: m.Space, Server: m.URL(), AuthorityURL: srv.URL, Actor: "cli",
			IDToken: func(context.Context) (string, error) { return "alice-idp-token", nil },
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

	// A's operator: ps lists it, and a spawn on it runs on B.
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
	alice.who.Scopes = nil
	evicted, err := remotemgr.EvictOwner(ctx, m.Ledger(m.Space), reg, owner, "cli", "supervise revoked")
	if err != nil || len(evicted) != 1 || evicted[0] != rm.instance {
		t.Fatalf("evict: %v %v", evicted, err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "remote supervision ended") {
			t.Fatalf("the remote manager ended with %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the evicted remote manager kept running")
	}
	if got, err := m.Ledger(m.Space).ActiveCredential(ctx, wire.LifecycleUID(sp.Acceptance.UID), authority.ProfileAgent); err == nil && got != "" {
		t.Fatal("dana's credential is still active after her manager's eviction")
	}
	if res, err := pc.Probe(ctx, wire.PlaneManager); err != nil || res.Verdict == wire.ResponderBound {
		t.Fatalf("manager liveness after eviction: %+v %v", res, err)
	}
}
