package mesh_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/remotemgr"
	"github.com/gocotal/cotal/internal/sessionrail"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/wire"
)

// presentEnv switches the test binary into a fake agent that joins the space with its launch
// material and stays present until SIGTERM, answering each line typed into it with "got " and
// the line.
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
	opts, err := factory.MaterialOptions(mat)
	if err != nil {
		return 3
	}
	c, err := cotal.Connect(ctx, mat.URL, opts...)
	if err != nil {
		return 4
	}
	defer c.Close(context.Background())
	go func() { // owned by the process: a headless agent's input ends at once
		lines := bufio.NewScanner(os.Stdin)
		for lines.Scan() {
			fmt.Printf("got %s\n", lines.Text())
		}
	}()
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
	// doc is the mesh's document, and idToken alice's login at its development IdP.
	doc     *authservice.MeshDocument
	idToken string
	// done reports how the remote manager ended.
	done chan error
}

// startRemote starts a mesh in user-auth mode whose remote managers' standing credentials live
// life (the default when zero), grants alice supervise and spawn, and runs her remote manager on B until
// the test ends.
func startRemote(t *testing.T, life time.Duration) *remote {
	t.Helper()
	m := meshtest.Start(t, func(o *mesh.Options) {
		o.UserAuth = &mesh.UserAuthOptions{DevIdP: true, DevIdPAddr: "127.0.0.1:0", RemoteManagerLifetime: life}
	})
	ctx := t.Context()
	kv, err := m.Ledger(m.Space).UserAuthStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := authservice.OpenState(ctx, m.Dir.UserAuthDir(m.Space), m.Space, kv)
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
	if _, err := st.People.Grant(ctx, &userauth.Row{Owner: owner, Actor: "cli", Scope: []string{"supervise", "spawn"},
		AllowSubscribe: []string{"general"}, AllowPublish: []string{"general"}}); err != nil {
		t.Fatal(err)
	}

	// Machine B.
	b := mesh.Dir{Path: t.TempDir() + "/" + mesh.DirName}
	readyc, done := make(chan ready, 1), make(chan error, 1)
	go func() {
		done <- mesh.SuperviseRemote(ctx, b, remotemgr.SuperviseConfig{
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
	return &remote{m: m, st: st, owner: owner, ready: rm, done: done, doc: doc, idToken: idToken}
}

// TestRemoteManager plays two machines on a mesh in user-auth mode: host A runs the mesh, its auth
// service and development IdP; B, with a mesh directory of its own and no keys, runs a remote
// manager for a person granted supervise. A's operator sees it in ps, spawns an agent on it that
// connects on bearers of its own, and its liveness plane answers bound; revoking supervise evicts
// it, ends it, and retires its agent.
func TestRemoteManager(t *testing.T) {
	meshtest.Long(t, "a remote manager supervising beside the mesh")
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
	mc, records := hostOperator(t, m)
	sp, err := mc.SpawnOn(ctx, rm.instance, manager.SpawnArgs{Name: "dana", Subscribe: []string{"general"},
		LaunchOptions: &manager.LaunchOptions{Command: []string{os.Args[0], "-test.run=^$"}, Env: []string{presentEnv + "=1"}, Runtime: string(manager.RuntimeHeadless)}})
	if err != nil {
		t.Fatalf("spawn on the remote manager: %v", err)
	}
	if sp.State != manager.GoalSucceeded || sp.Acceptance.Owner != owner || sp.Acceptance.Executor.LifecycleUID != string(rm.instance) {
		t.Fatalf("spawn: %+v (%s)", sp.Acceptance, sp.Data)
	}
	row, err := st.People.Get(ctx, owner, "dana")
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
	if _, err := st.People.Grant(ctx, &userauth.Row{Owner: owner, Actor: "cli", Scope: []string{"spawn"}}); err != nil {
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
	if _, err := st.People.Get(ctx, owner, "dana"); !errors.Is(err, userauth.ErrNoRow) {
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

// hostOperator returns a manager client as A's operator instrument (any owner's seats), and the
// records bucket its ps and seat lookups read.
func hostOperator(t *testing.T, m *meshtest.Mesh) (*manager.Client, jetstream.KeyValue) {
	t.Helper()
	cred, err := m.Ledger("").Issue(t.Context(), ledger.Request{Profile: authority.ProfileControlAdmin, Name: "cotal_control"})
	if err != nil {
		t.Fatal(err)
	}
	oc := m.Connect(t, cred)
	records, err := oc.JS.KeyValue(t.Context(), string(meshwire.RecordsBucket(m.Space)))
	if err != nil {
		t.Fatal(err)
	}
	mc := manager.NewClient(oc.Conn, m.Space, wire.Lifecycle{Principal: cred.Principal, UID: cred.Instrument}, "cotal_control")
	mc.Any = true
	return mc, records
}

// TestRemoteManagerAttach: A's operator attaches to an agent that runs on B under a remote
// manager. The host redeems the session in its own ledger for the operator and signs the serving
// half for the manager; the operator takes its half from the ledger, what it types reaches the
// agent and the agent's screen comes back. The broker holds the half to the session's rails.
// Ending the session, on B (a detach: the manager ends it at the host) or in the ledger by the
// holder, has the broker close the operator's connection.
func TestRemoteManagerAttach(t *testing.T) {
	meshtest.Long(t, "a remote manager and a terminal session")
	t.Parallel()
	r := startRemote(t, 0)
	m, rm, ctx := r.m, r.ready, t.Context()
	l := m.Ledger(m.Space)
	mc, records := hostOperator(t, m)
	sp, err := mc.SpawnOn(ctx, rm.instance, manager.SpawnArgs{Name: "erin", Subscribe: []string{"general"},
		LaunchOptions: &manager.LaunchOptions{Command: []string{os.Args[0], "-test.run=^$"}, Env: []string{presentEnv + "=1"}, Runtime: string(manager.RuntimePTY)}})
	if err != nil || sp.State != manager.GoalSucceeded {
		t.Fatalf("spawn erin on the remote manager: %+v %v", sp, err)
	}
	g, err := mc.Attach(ctx, records, "erin")
	if err != nil {
		t.Fatalf("attach erin: %v", err)
	}
	if g.Serving.InstanceID != rm.instance || g.Serving.Epoch != rm.epoch {
		t.Fatalf("attach answered %+v", g)
	}
	holder, err := wire.ParsePrincipal(g.Holder.ID)
	if err != nil {
		t.Fatal(err)
	}
	me := wire.Lifecycle{Principal: holder, UID: g.Holder.LifecycleUID}
	half, err := l.SessionCaller(ctx, g.Raw, me)
	if err != nil {
		t.Fatalf("take the caller half from the host's ledger: %v", err)
	}
	c := m.Connect(t, half)
	rail := converse(t, c, g, "hello from A")
	// The half reaches its session's rails and nothing else.
	other := strings.Replace(g.Subjects.In, g.SessionID, "another_session-0123456789", 1)
	chat, err := m.Space.ChatSubject(holder, "general")
	if err != nil {
		t.Fatal(err)
	}
	for _, deny := range []struct{ op, subject string }{
		{"Publish", g.Subjects.Out}, {"Publish", other}, {"Publish", chat}, {"Subscription", g.Subjects.In},
	} {
		if deny.op == "Publish" {
			_ = c.Publish(deny.subject, nil)
		} else {
			_, _ = c.SubscribeSync(deny.subject)
		}
		if refused, err := c.Refused(deny.op, deny.subject); err != nil || !refused {
			t.Errorf("%s on %s with the caller half: refused %v (%v)", deny.op, deny.subject, refused, err)
		}
	}
	// A detach ends the session on B, and the manager ends it in the host's ledger as its
	// serving party: the broker closes the holder's connection.
	rail.Close()
	meshtest.Eventually(t, 20*time.Second, "the holder's half closed once the manager ended the session", c.IsClosed)
	if row, err := l.Session(ctx, g.SessionID); err != nil || row.Row.State != authstore.SessionClosed {
		t.Fatalf("the session's row after the manager ended it: %+v %v", row, err)
	}
	// The holder may end the next one in the ledger itself, as cotal attach does.
	g2, err := mc.Attach(ctx, records, "erin")
	if err != nil {
		t.Fatal(err)
	}
	half2, err := l.SessionCaller(ctx, g2.Raw, me)
	if err != nil {
		t.Fatal(err)
	}
	c2 := m.Connect(t, half2)
	if err := l.CloseSession(ctx, g2.SessionID, authstore.SessionCloser{Holder: &me}, authstore.SessionClosed); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 10*time.Second, "the holder's half closed once it ended the session", c2.IsClosed)

	// Alice herself, through her manager-caller view of the instance: the manager redeems her
	// session in the host's ledger, and she takes her half from the host's session-holder route.
	tok, act, err := userauth.FetchPersonBearer(ctx, http.DefaultClient, r.doc.ExchangeURL, r.idToken,
		userauth.PersonBearer{Actor: "cli", View: userauth.ViewManagerCaller, ManagerInstanceID: rm.instance})
	if err != nil {
		t.Fatal(err)
	}
	alice, err := act.Principal()
	if err != nil {
		t.Fatal(err)
	}
	nc, err := dial.Bearer(ctx, r.doc.Server, []byte(r.doc.SentinelCreds), func(context.Context) (string, error) { return tok, nil })
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	aliceMe := wire.Lifecycle{Principal: alice, UID: act.LifecycleUID}
	pc := manager.NewClient(nc, m.Space, aliceMe, "cli")
	pc.Pinned = rm.instance
	ga, err := pc.Attach(ctx, nil, "erin")
	if err != nil {
		t.Fatalf("alice's own attach: %v", err)
	}
	if ga.Holder.ID != alice.String() || ga.Holder.LifecycleUID != act.LifecycleUID {
		t.Fatalf("alice's grant names holder %+v, not %s", ga.Holder, aliceMe)
	}
	holderRoute := &remotemgr.HolderClient{URL: remotemgr.HolderURL(r.doc.ExchangeURL), Space: m.Space, Actor: "cli", HTTP: http.DefaultClient,
		IDToken: func(context.Context) (string, error) { return r.idToken, nil }}
	// Her route gives out her own sessions alone: the operator's is as unknown to her as one that
	// never was, and ending it is refused the same way.
	for _, id := range []string{g2.SessionID, meshwire.NewSessionID()} {
		if _, err := holderRoute.Caller(ctx, &manager.SessionGrant{SessionID: id, Raw: json.RawMessage(`{}`)}, aliceMe); !isRefusal(err, wire.CodeNotFound) {
			t.Errorf("alice takes the half of session %s: %v, want not-found", id, err)
		}
		if err := holderRoute.End(ctx, id); !isRefusal(err, wire.CodeNotFound) {
			t.Errorf("alice ends session %s: %v, want not-found", id, err)
		}
	}
	// Her grant with one byte changed is refused for its signature; the grant as issued is not.
	tampered := *ga
	tampered.Raw = bytes.Replace(ga.Raw, []byte(`"window":64`), []byte(`"window":65`), 1)
	if _, err := holderRoute.Caller(ctx, &tampered, aliceMe); !isRefusal(err, wire.CodePermissionDenied) {
		t.Fatalf("alice presents a tampered grant: %v, want permission-denied", err)
	}
	aliceHalf, err := holderRoute.Caller(ctx, ga, aliceMe)
	if err != nil {
		t.Fatalf("alice takes her half: %v", err)
	}
	ac := m.Connect(t, aliceHalf)
	converse(t, ac, ga, "hello from alice")
	_ = ac.Publish(g.Subjects.In, nil) // another session's rail
	if refused, err := ac.Refused("Publish", g.Subjects.In); err != nil || !refused {
		t.Errorf("alice's half publishes on another session's rail: refused %v (%v)", refused, err)
	}
	// Ending it at the host as its holder has the broker close her half, and the half is not
	// given out again.
	if err := holderRoute.End(ctx, ga.SessionID); err != nil {
		t.Fatalf("alice ends her session: %v", err)
	}
	meshtest.Eventually(t, 10*time.Second, "alice's half closed once she ended the session", ac.IsClosed)
	if _, err := holderRoute.Caller(ctx, ga, aliceMe); !isRefusal(err, wire.CodeFailedPrecondition) {
		t.Fatalf("alice takes the half of her ended session: %v, want failed-precondition", err)
	}
}

// converse is a holder's turn on a session, on c, its half: it opens the caller's rail, sends
// ready, then line typed into the agent's terminal, and awaits the agent's answer on the screen.
// The session ending first fails. It returns the rail, open.
func converse(t *testing.T, c *meshtest.Client, g *manager.SessionGrant, line string) *sessionrail.Rail {
	t.Helper()
	rail, frames := meshtest.CallerRail(t, c.Conn, g, 0)
	for _, f := range []*meshwire.AttachFrame{{Kind: meshwire.AttachReady}, {Kind: meshwire.AttachData, Data: []byte(line + "\r")}} {
		if _, err := rail.Send(f.Encode()); err != nil {
			t.Fatal(err)
		}
	}
	var screen strings.Builder
	deadline := time.After(20 * time.Second)
	for !strings.Contains(screen.String(), "got "+line) {
		select {
		case f := <-frames:
			switch f.Kind {
			case meshwire.AttachData:
				screen.Write(f.Data)
			case meshwire.AttachEnd:
				t.Fatalf("the session ended: %+v; the screen: %q", f, screen.String())
			}
		case <-deadline:
			t.Fatalf("the agent's answer to %q never came back; the screen: %q", line, screen.String())
		}
	}
	return rail
}

// isRefusal reports whether err is the host's refusal with code.
func isRefusal(err error, code wire.ErrorCode) bool {
	ref, ok := errors.AsType[*remotemgr.Refusal](err)
	return ok && ref.Code == code
}

// TestRemoteManagerRenews runs a remote manager whose standing credentials live ten seconds, the
// shortest `up --remote-manager-lifetime` takes: it renews them at three quarters of their
// lifetime through the host, so after more than two lifetimes it still serves, on a serving
// credential whose expiry has moved, and its liveness plane still answers bound.
func TestRemoteManagerRenews(t *testing.T) {
	meshtest.Long(t, "waits out credential renewals")
	t.Parallel()
	const life = ledger.MinHeldLifetime
	r := startRemote(t, life)
	ctx := t.Context()
	l := r.m.Ledger(r.m.Space)
	serving := func() authstore.CredentialRow {
		t.Helper()
		rows, err := l.RemoteManagers().Credentials(ctx, r.ready.instance)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range rows {
			if row.Profile == authority.ProfileEndpointServe {
				return row
			}
		}
		t.Fatalf("the instance has no serving credential among %d", len(rows))
		return authstore.CredentialRow{}
	}
	first := serving()
	select {
	case err := <-r.done:
		t.Fatalf("the remote manager ended within %s: %v", 2*life+life/2, err)
	case <-time.After(2*life + life/2):
	}
	if now := serving(); now.CredentialID != first.CredentialID || now.State != authstore.CredActive || !now.ExpiresAt.Time().After(time.Now()) {
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
