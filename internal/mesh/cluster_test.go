package mesh_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/connz"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/runhost"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
)

// TestClusterOfThree runs a mesh on three nodes of a cluster on loopback, as three `cotal up`
// would: an authority node and two nodes started from its bundle. The authority provisions once
// JetStream has a quorum and it routes to both others, every stream with three replicas; an agent it issues on one node DMs an agent on another; a revocation
// issued on the authority is enforced by the node the revoked agent is connected to; when a node
// dies its agent reconnects to another and its DMs still flow; a node from a bundle refuses to
// make keys.
func TestClusterOfThree(t *testing.T) {
	meshtest.Long(t, "a cluster of several nodes")
	dirs, nodes, _ := threeNodes(t, false, false)
	ctx := t.Context()
	for i, n := range nodes {
		if st := n.State(); st.Cluster != "team" || st.Keyless != (i > 0) {
			t.Errorf("node %d state: %+v", i, st)
		}
	}
	l := nodes[0].Ledger("")
	// Three nodes: every stream and bucket keeps three replicas.
	prov, err := l.Issue(ctx, ledger.Request{Profile: authority.ProfileProvisioner, Name: "check"})
	if err != nil {
		t.Fatal(err)
	}
	pc, err := dial.As(ctx, nodes[1].URL(), prov)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	js, err := jetstream.New(pc)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range space.Streams(wire.Space("main")) {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		if info := st.CachedInfo(); info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			t.Errorf("stream %s: %d replicas, cluster %+v", name, info.Config.Replicas, info.Cluster)
		}
	}
	connect := func(name string, on *mesh.Mesh, handler cotal.Handler) (*cotal.Client, *authority.Credential) {
		cred, _, err := l.StartAgent(ctx, ledger.Request{Name: name, Subscribe: []string{"general"}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := cotal.Connect(ctx, on.URL(), cotal.WithCredsData(cred.Creds), cotal.WithHandler(handler))
		if err != nil {
			t.Fatalf("%s on %s: %v", name, on.URL(), err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c, cred
	}
	got := make(chan string, 4)
	alice, _ := connect("alice", nodes[1], func(context.Context, *cotal.Delivery) error { return nil })
	bob, bobCred := connect("bob", nodes[2], func(_ context.Context, d *cotal.Delivery) error {
		got <- d.Message.Parts[0].Text
		return nil
	})
	// The broker's connection list read through node a holds every node's connections: alice's
	// on node b and bob's on node c.
	sysc, acct := connectionLister(t, dirs[0], nodes[0].URL())
	var on map[string]bool
	meshtest.Eventually(t, 10*time.Second, "alice's and bob's connections listed through node a", func() bool {
		conns, err := connz.List(ctx, sysc, acct)
		if err != nil {
			t.Fatal(err)
		}
		on = map[string]bool{}
		for _, c := range conns {
			if p, ok := c.Principal(); ok {
				on[p.Actor()] = true
			}
		}
		return on["alice"] && on["bob"]
	})
	if _, err := alice.DirectMessage(ctx, bob.Principal(), []wire.Part{wire.TextPart("across the cluster")}); err != nil {
		t.Fatal(err)
	}
	select {
	case text := <-got:
		if text != "across the cluster" {
			t.Fatalf("bob got %q", text)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the DM from node b never reached bob on node c")
	}

	// Node b, alice's, dies: she reconnects to a node the cluster told her of, and her next DM
	// still reaches bob, the streams keeping their two other replicas.
	gone := nodes[1].URL()[strings.LastIndex(nodes[1].URL(), ":"):]
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	if err := nodes[1].Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	meshtest.Eventually(t, 30*time.Second, "alice reconnected elsewhere", func() bool {
		u := alice.Conn().ConnectedUrl()
		return alice.Conn().IsConnected() && u != "" && !strings.HasSuffix(u, gone)
	})
	if _, err := alice.DirectMessage(ctx, bob.Principal(), []wire.Part{wire.TextPart("after node b died")}); err != nil {
		t.Fatal(err)
	}
	select {
	case text := <-got:
		if text != "after node b died" {
			t.Fatalf("bob got %q", text)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the DM sent after node b died never reached bob")
	}

	// Revoked on the authority node, refused by node c. The revocation returns once no node
	// lists bob's connection.
	if _, err := l.RevokeUserKey(ctx, bobCred.PublicKey, "test"); err != nil {
		t.Fatal(err)
	}
	if conns, servers, err := connz.OfUsers(ctx, sysc, acct, []string{bobCred.PublicKey}, 0); err != nil || len(conns) != 0 || servers != 2 {
		t.Fatalf("bob's connections after the revocation: %d listed by %d servers (%v), want none by the 2 up", len(conns), servers, err)
	}
	meshtest.Eventually(t, 20*time.Second, "bob's credential refused by node c", func() bool {
		nc, err := dial.As(ctx, nodes[2].URL(), bobCred)
		if err == nil {
			nc.Close()
			return false
		}
		return errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization violation")
	})
	carol, _ := connect("carol", nodes[2], func(context.Context, *cotal.Delivery) error { return nil })
	if carol.Principal().Actor() != "carol" {
		t.Fatal("carol connected as someone else")
	}

	if _, err := dirs[1].OpenKeyring(); !errors.Is(err, mesh.ErrKeyless) {
		t.Errorf("a node from a bundle opened a keyring: %v", err)
	}
	// A node's directory never starts alone: its store holds the cluster's state.
	for i := range 2 {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_ = nodes[i].Shutdown(sctx)
		cancel()
		if _, err := mesh.Up(ctx, dirs[i], mesh.Options{Port: -1, NoDaemons: true}); err == nil || !strings.Contains(err.Error(), "node of cluster") {
			t.Errorf("node %d started alone: %v", i, err)
		}
	}
}

// threeNodes starts three nodes of cluster "team" on loopback, as three `cotal up` would: node a
// from its own keys, node b from a's bundle (with the keys when secondAuthority) and node c from
// a's bundle without keys, with their daemons when daemons is set. It returns their directories,
// meshes and options, which start a node again; every node is shut down at the test's end.
func threeNodes(t *testing.T, secondAuthority, daemons bool) ([]mesh.Dir, []*mesh.Mesh, []mesh.Options) {
	t.Helper()
	base := t.TempDir()
	ports := meshtest.FreePorts(t, 6)
	clientPorts, clusterPorts := ports[:3], ports[3:]
	var routes []string
	for _, p := range clusterPorts {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	dirs := []mesh.Dir{{Path: filepath.Join(base, "a", ".cotal")}, {Path: filepath.Join(base, "b", ".cotal")}, {Path: filepath.Join(base, "c", ".cotal")}}
	bundles := make([]*mesh.Bundle, 3)
	for i, keys := range []bool{false, secondAuthority, false} {
		if i == 0 {
			continue
		}
		path := filepath.Join(base, fmt.Sprintf("bundle-%d.json", i))
		if err := dirs[0].WriteBundle(path, "team", nil, keys); err != nil {
			t.Fatal(err)
		}
		var err error
		if bundles[i], err = mesh.ReadBundle(path); err != nil {
			t.Fatal(err)
		}
	}
	ctx := t.Context()
	nodes := make([]*mesh.Mesh, 3)
	opts := make([]mesh.Options, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		opts[i] = mesh.Options{Port: clientPorts[i], NoDaemons: !daemons, Cluster: &mesh.ClusterOptions{
			Name: "team", Port: clusterPorts[i], Routes: routes, ServerName: fmt.Sprintf("node-%c", 'a'+i), Bundle: bundles[i]}}
		wg.Go(func() { nodes[i], errs[i] = mesh.Up(ctx, dirs[i], opts[i]) })
	}
	wg.Wait()
	meshtest.StopNodes(t, nodes)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	return dirs, nodes, opts
}

// TestClusterHistoryFromEveryNode joins a channel with history from each node in turn, several
// times: a history read's consumer is created for the read, on the CHAT stream's leader, and its
// first pull request may reach a node before the interest it needs has; the join must wait for it
// rather than fail with no responders.
func TestClusterHistoryFromEveryNode(t *testing.T) {
	meshtest.Long(t, "a cluster of several nodes")
	_, nodes, _ := threeNodes(t, false, false)
	ctx := t.Context()
	l := nodes[0].Ledger("")
	const channel, posts = "history", 3
	poster, _, err := l.StartAgent(ctx, ledger.Request{Name: "poster", Subscribe: []string{channel}})
	if err != nil {
		t.Fatal(err)
	}
	pc, err := cotal.Connect(ctx, nodes[0].URL(), cotal.WithCredsData(poster.Creds), cotal.WithPresence(false))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(context.Background())
	for i := range posts {
		if _, err := pc.Post(ctx, channel, []wire.Part{wire.TextPart(fmt.Sprint("post ", i))}); err != nil {
			t.Fatal(err)
		}
	}
	for i, node := range nodes {
		reader, _, err := l.StartAgent(ctx, ledger.Request{Name: fmt.Sprintf("reader%d", i), Subscribe: []string{channel}})
		if err != nil {
			t.Fatal(err)
		}
		rc, err := cotal.Connect(ctx, node.URL(), cotal.WithCredsData(reader.Creds), cotal.WithPresence(false))
		if err != nil {
			t.Fatal(err)
		}
		for round := range 4 {
			res, err := rc.Join(ctx, channel)
			if err != nil {
				t.Fatalf("node %d, join %d: %v", i, round, err)
			}
			if res.Backfilled != posts {
				t.Errorf("node %d, join %d: %d posts backfilled, want %d", i, round, res.Backfilled, posts)
			}
			if err := rc.Leave(ctx, channel); err != nil {
				t.Fatal(err)
			}
		}
		_ = rc.Close(context.Background())
	}
}

// TestClusterSecondAuthority runs a cluster of an authority node, a second authority node started
// from an authority bundle, and a node without keys, each with its daemons. Exactly one of the
// authorities serves the delivery daemon and the supervisor, the other stands by; revocations
// made on both authorities at once are both enforced by the third node; when the serving one stops,
// the other takes the daemons over and the durable channel keeps delivering, and its manager takes
// over the workflow run that was waiting on a checkpoint, which completes with the answer given
// there; what it revokes then is refused by the stopped node once it is back, which stands by.
func TestClusterSecondAuthority(t *testing.T) {
	meshtest.Long(t, "a cluster of several nodes")
	dirs, nodes, opts := threeNodes(t, true, true)
	ctx := t.Context()
	if st := nodes[1].State(); st.Keyless {
		t.Fatal("the second authority node started without keys")
	}
	serving := func() int {
		t.Helper()
		var which []int
		for i, n := range nodes[:2] {
			if n == nil {
				continue
			}
			delivery, manager := n.Serving("main")
			if delivery != manager && !delivery {
				t.Fatalf("node %d serves the manager without the delivery lease", i)
			}
			if delivery && manager {
				which = append(which, i)
			}
		}
		if len(which) != 1 {
			return -1
		}
		return which[0]
	}
	var active int
	meshtest.Eventually(t, 60*time.Second, "one authority node serving the daemons", func() bool {
		active = serving()
		return active >= 0
	})
	standby := 1 - active
	if d, m := nodes[standby].Serving("main"); d || m {
		t.Fatalf("the standby node serves too: delivery %v, manager %v", d, m)
	}

	// Both authorities revoke at once; node c refuses both credentials.
	var creds [2]*authority.Credential
	for i := range creds {
		cred, _, err := nodes[i].Ledger("").StartAgent(ctx, ledger.Request{Name: fmt.Sprintf("doomed_%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		creds[i] = cred
	}
	var wg sync.WaitGroup
	for i := range creds {
		wg.Go(func() {
			if _, err := nodes[i].Ledger("").RevokeUserKey(ctx, creds[i].PublicKey, "test"); err != nil {
				t.Errorf("revoke on node %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	refused := func(url string, cred *authority.Credential) bool {
		nc, err := dial.As(ctx, url, cred)
		if err == nil {
			nc.Close()
			return false
		}
		return errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization violation")
	}
	for i, cred := range creds {
		meshtest.Eventually(t, 20*time.Second, fmt.Sprintf("node c refusing the credential node %d revoked", i), func() bool {
			return refused(nodes[2].URL(), cred)
		})
	}

	// An agent on node c on a durable channel; a post reaches it through the serving delivery
	// daemon, before the serving node stops and after.
	got := make(chan string, 4)
	connect := func(name string, handler cotal.Handler) *cotal.Client {
		cred, _, err := nodes[standby].Ledger("").StartAgent(ctx, ledger.Request{Name: name, Subscribe: []string{"ops"}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := cotal.Connect(ctx, nodes[2].URL(), cotal.WithCredsData(cred.Creds), cotal.WithHandler(handler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		if _, err := c.Join(ctx, "ops"); err != nil {
			t.Fatal(err)
		}
		return c
	}
	connect("bob", func(_ context.Context, d *cotal.Delivery) error {
		got <- d.Message.Parts[0].Text
		return nil
	})
	alice := connect("alice", func(context.Context, *cotal.Delivery) error { return nil })
	post := func(text string) {
		t.Helper()
		if _, err := alice.Post(ctx, "ops", []wire.Part{wire.TextPart(text)}); err != nil {
			t.Fatal(err)
		}
		select {
		case g := <-got:
			if g != text {
				t.Fatalf("bob got %q, want %q", g, text)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("the post %q never reached bob", text)
		}
	}
	post("before")

	// A workflow run waiting on its checkpoint, hosted by the serving node's manager.
	mc := clusterOperator(t, nodes[standby], nodes[2].URL())
	runID, err := mc.RunStart(ctx, `const ok = await checkpoint("approve", "Ship it?", { timeout: "1h" })
log(ok.value)`, "approve.cotal.js")
	if err != nil {
		t.Fatal(err)
	}
	asked := func() bool {
		var v runhost.View
		if mc.RunStatus(ctx, runID, &v) != nil {
			return false
		}
		return slices.ContainsFunc(v.Journal, func(r runhost.JournalRow) bool { return r.Asks == "Ship it?" })
	}
	meshtest.Eventually(t, 30*time.Second, "the run waiting on its checkpoint", asked)

	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if err := nodes[active].Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	nodes[active] = nil
	meshtest.Eventually(t, 60*time.Second, "the standby authority taking the daemons over", func() bool {
		return serving() == standby
	})
	post("after the serving authority stopped")
	// The standby's manager serves the instance and takes the run back, its program read from
	// the mesh; the answer given to it completes the run.
	meshtest.Eventually(t, 60*time.Second, "the standby's manager waiting on the run's checkpoint", asked)
	if _, err := mc.RunAnswer(ctx, runID, "/checkpoint:approve#0", json.RawMessage(`"yes"`)); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 30*time.Second, "the run taken over completing", func() bool {
		var rows []runhost.Row
		if mc.RunPs(ctx, &rows) != nil {
			return false
		}
		return slices.ContainsFunc(rows, func(r runhost.Row) bool { return r.RunID == runID && r.State == meshwire.RunCompleted })
	})

	// Revoked on the surviving authority while the other is down: refused by node c, and by the
	// stopped node once it is back, which stands by.
	late, _, err := nodes[standby].Ledger("").StartAgent(ctx, ledger.Request{Name: "late"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[standby].Ledger("").RevokeUserKey(ctx, late.PublicKey, "test"); err != nil {
		t.Fatal(err)
	}
	// It comes back with a new disk limit, which its push of the store account takes to node c.
	disk := int64(3 << 30)
	opts[active].Storage = &mesh.StorageChange{Disk: &disk}
	if nodes[active], err = mesh.Up(ctx, dirs[active], opts[active]); err != nil {
		t.Fatalf("restart node %d: %v", active, err)
	}
	sk, err := nodes[active].Keyring().Space("main")
	if err != nil {
		t.Fatal(err)
	}
	lookup, err := nodes[active].Keyring().MintSystemUser("lookup", []string{jsapi.AccountClaimsLookup(sk.StorePublicKey())}, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	sys, err := dial.As(ctx, nodes[2].URL(), lookup)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	meshtest.Eventually(t, 20*time.Second, "node c holding the store account with the new disk limit", func() bool {
		rep, err := sys.Request(jsapi.AccountClaimsLookup(sk.StorePublicKey()), nil, 2*time.Second)
		if err != nil {
			return false
		}
		ac, err := jwt.DecodeAccountClaims(string(rep.Data))
		return err == nil && ac.Limits.JetStreamLimits.DiskStorage == disk
	})
	for _, cred := range []*authority.Credential{late, creds[0], creds[1]} {
		meshtest.Eventually(t, 20*time.Second, "the restarted node refusing a revoked credential", func() bool {
			return refused(nodes[active].URL(), cred)
		})
	}
	time.Sleep(2 * meshwire.ManagerLeaseTTL)
	if serving() != standby {
		t.Error("the restarted authority took the daemons back from the serving one")
	}
	post("after the first authority came back")
}

// clusterOperator is a manager client as node's operator instrument, connected at url.
func clusterOperator(t *testing.T, node *mesh.Mesh, url string) *manager.Client {
	t.Helper()
	cred, err := node.Ledger("").Issue(t.Context(), ledger.Request{Profile: authority.ProfileControlAdmin, Name: "cotal_control"})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := dial.As(t.Context(), url, cred)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return manager.NewClient(nc, "main", wire.Lifecycle{Principal: cred.Principal, UID: cred.Instrument}, "cotal_control")
}

// TestAuthorityBundleChecked: an authority bundle carries the keys its trust names, and the
// manager instance of each space; one whose keys are another authority's is refused on read.
func TestAuthorityBundleChecked(t *testing.T) {
	base := t.TempDir()
	a, b := mesh.Dir{Path: filepath.Join(base, "a")}, mesh.Dir{Path: filepath.Join(base, "b")}
	pa, pb := filepath.Join(base, "a.json"), filepath.Join(base, "b.json")
	for _, w := range []struct {
		d    mesh.Dir
		path string
	}{{a, pa}, {b, pb}} {
		if err := w.d.WriteBundle(w.path, "team", nil, true); err != nil {
			t.Fatal(err)
		}
	}
	good, err := mesh.ReadBundle(pa)
	if err != nil {
		t.Fatal(err)
	}
	if good.Keys == nil || good.Managers["main"] == "" {
		t.Fatalf("an authority bundle without keys or manager instance: %+v", good)
	}
	other, err := mesh.ReadBundle(pb)
	if err != nil {
		t.Fatal(err)
	}
	good.Keys = other.Keys
	raw, _ := json.Marshal(good)
	if err := os.WriteFile(pa, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := mesh.ReadBundle(pa); err == nil || !strings.Contains(err.Error(), "not the operator") {
		t.Fatalf("a bundle whose keys are another authority's: %v", err)
	}
}

// TestClusterConnectionListPages reads an account's connections through one node of three while
// another node holds more of them than one page of its list: every server's list is read to its
// end, and two users' connections are counted on every node, with the servers that answered.
func TestClusterConnectionListPages(t *testing.T) {
	meshtest.Long(t, "a cluster of several nodes")
	dirs, nodes, _ := threeNodes(t, false, false)
	ctx := t.Context()
	cred, _, err := nodes[0].Ledger("").StartAgent(ctx, ledger.Request{Name: "many"})
	if err != nil {
		t.Fatal(err)
	}
	few, _, err := nodes[0].Ledger("").StartAgent(ctx, ledger.Request{Name: "few"})
	if err != nil {
		t.Fatal(err)
	}
	const onB, onC, ofFew = 1030, 3, 2 // past the 1,024 connections of a page on node b
	for _, c := range []struct {
		node, n int
		cred    *authority.Credential
	}{{1, onB, cred}, {2, onC, cred}, {2, ofFew, few}} {
		for range c.n {
			nc, err := dial.As(ctx, nodes[c.node].URL(), c.cred)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
		}
	}
	sysc, acct := connectionLister(t, dirs[0], nodes[0].URL())
	meshtest.Eventually(t, 10*time.Second, "every connection listed through node a", func() bool {
		conns, servers, err := connz.OfUsers(ctx, sysc, acct, []string{cred.PublicKey, few.PublicKey}, 0)
		if err != nil {
			t.Fatal(err)
		}
		all, err := connz.List(ctx, sysc, acct)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, c := range all {
			if c.AuthorizedUser == cred.PublicKey {
				n++
			}
		}
		t.Logf("%d of the two users' connections by %d servers; %d of the first in the whole list", len(conns), servers, n)
		return len(conns) == onB+onC+ofFew && servers == 3 && n == onB+onC
	})
}

// connectionLister connects a system user of the keys in dir to url, allowed to list the
// connections of space main's account, and returns it with the account.
func connectionLister(t *testing.T, dir mesh.Dir, url string) (*nats.Conn, string) {
	t.Helper()
	kr, err := dir.OpenKeyring()
	if err != nil {
		t.Fatal(err)
	}
	sk, err := kr.Space("main")
	if err != nil {
		t.Fatal(err)
	}
	acct := sk.AccountPublicKey()
	sys, err := kr.MintSystemUser("check", []string{jsapi.AccountConnz(acct)}, nil, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := dial.As(t.Context(), url, sys)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, acct
}

// TestClusterMembershipFeed runs the delivery daemon on node a and two agents on nodes b and c:
// the membership feed it writes shows both live in the channel they joined, their connections
// read from the nodes they are on.
func TestClusterMembershipFeed(t *testing.T) {
	meshtest.Long(t, "a cluster of several nodes")
	_, nodes, _ := threeNodes(t, false, true)
	ctx := t.Context()
	l := nodes[0].Ledger("")
	var names []string
	for i, name := range map[int]string{1: "alice", 2: "bob"} {
		cred, _, err := l.StartAgent(ctx, ledger.Request{Name: name, Subscribe: []string{"general"}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := cotal.Connect(ctx, nodes[i].URL(), cotal.WithCredsData(cred.Creds), cotal.WithJoin("general"))
		if err != nil {
			t.Fatalf("%s on node %d: %v", name, i, err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		names = append(names, c.Principal().String())
	}
	reader, err := l.Issue(ctx, ledger.Request{Profile: authority.ProfileMembership, Name: "reader"})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := dial.As(ctx, nodes[0].URL(), reader)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	feed := meshwire.MembershipBucket(wire.Space("main"))
	for _, p := range names {
		meshtest.Eventually(t, 60*time.Second, p+"'s membership row live in general", func() bool {
			e, err := kvget.Get(ctx, rc, feed, p)
			if err != nil {
				return false
			}
			var row meshwire.MembershipRow
			return json.Unmarshal(e.Value, &row) == nil && slices.Contains(row.Live, "general")
		})
	}
}

// TestRestartedNodeEnforcesRevocations: a node without keys is down while the authority node
// revokes a credential; restarted, it refuses that credential from the first connect, having
// caught its accounts up with the cluster before serving, and still admits one not revoked.
func TestRestartedNodeEnforcesRevocations(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of three")
	}
	dirs, nodes, opts := threeNodes(t, false, false)
	ctx := t.Context()
	l := nodes[0].Ledger("")
	issue := func(name string) *authority.Credential {
		cred, _, err := l.StartAgent(ctx, ledger.Request{Name: name, Subscribe: []string{"general"}})
		if err != nil {
			t.Fatal(err)
		}
		return cred
	}
	victim, bystander := issue("victim"), issue("bystander")
	// Both connect to node c while it is up: it holds the accounts as they were then.
	for _, cred := range []*authority.Credential{victim, bystander} {
		nc, err := dial.As(ctx, nodes[2].URL(), cred, nats.NoReconnect())
		if err != nil {
			t.Fatalf("%s on node c: %v", cred.Principal, err)
		}
		nc.Close()
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := nodes[2].Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.RevokeUserKey(ctx, victim.PublicKey, "revoked while node c was down"); err != nil {
		t.Fatal(err)
	}
	restarted, err := mesh.Up(ctx, dirs[2], opts[2])
	if err != nil {
		t.Fatalf("restart node c: %v", err)
	}
	nodes[2] = restarted // stopped at cleanup
	if nc, err := dial.As(ctx, restarted.URL(), victim, nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("the restarted node admitted a credential revoked while it was down")
	}
	nc, err := dial.As(ctx, restarted.URL(), bystander, nats.NoReconnect())
	if err != nil {
		t.Fatalf("the restarted node refused a credential never revoked: %v", err)
	}
	nc.Close()
}
