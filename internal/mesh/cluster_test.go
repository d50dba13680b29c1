package mesh_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
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
	base := t.TempDir()
	var routes []string
	var clusterPorts, clientPorts []int
	for range 3 {
		clusterPorts, clientPorts = append(clusterPorts, freePort(t)), append(clientPorts, freePort(t))
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", clusterPorts[len(clusterPorts)-1]))
	}
	dirs := []mesh.Dir{{Path: filepath.Join(base, "a", ".cotal")}, {Path: filepath.Join(base, "b", ".cotal")}, {Path: filepath.Join(base, "c", ".cotal")}}
	bundlePath := filepath.Join(base, "bundle.json")
	if err := dirs[0].WriteBundle(bundlePath, "team", nil); err != nil {
		t.Fatal(err)
	}
	bundle, err := mesh.ReadBundle(bundlePath)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	nodes := make([]*mesh.Mesh, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		co := &mesh.ClusterOptions{Name: "team", Port: clusterPorts[i], Routes: routes, ServerName: fmt.Sprintf("node-%c", 'a'+i)}
		if i > 0 {
			co.Bundle = bundle
		}
		wg.Go(func() {
			nodes[i], errs[i] = mesh.Up(ctx, dirs[i], mesh.Options{Port: clientPorts[i], NoDaemons: true, Cluster: co})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		t.Cleanup(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_ = nodes[i].Shutdown(sctx)
		})
	}
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
		cred, _, err := l.StartAgent(ctx, ledger.Request{Name: name})
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
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	if err := nodes[1].Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	meshtest.Eventually(t, 30*time.Second, "alice reconnected elsewhere", func() bool {
		u := alice.Conn().ConnectedUrl()
		return alice.Conn().IsConnected() && u != "" && !strings.Contains(u, fmt.Sprint(clientPorts[1]))
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

	// Revoked on the authority node, refused by node c.
	if _, err := l.RevokeUserKey(ctx, bobCred.PublicKey, "test"); err != nil {
		t.Fatal(err)
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

// freePort returns a port free now on loopback.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
