package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/cli/status"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
)

// TestClusterCommands forms a three-node cluster with the command lines an operator types: the
// authority node's cotal up with the cluster flags, cotal cluster bundle on it while it waits for
// a quorum, and two nodes started from the bundle. cotal send then works through the authority's
// directory, and a node started from the bundle refuses to write bundles. Bad cluster flags are
// usage errors.
func TestClusterCommands(t *testing.T) {
	meshtest.Long(t, "a cluster of several nodes")
	// Six ports free now: three client ports, then three route ports.
	ports := meshtest.FreePorts(t, 6)
	routes := fmt.Sprintf("nats://127.0.0.1:%d,nats://127.0.0.1:%d,nats://127.0.0.1:%d", ports[3], ports[4], ports[5])
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	bundle := filepath.Join(t.TempDir(), "bundle.json")
	// Each node stops at the test's end, the authority last: its daemons stop without a quorum,
	// which their shutdown bounds rather than wait out every write.
	stops := make([]func(), 3)
	t.Cleanup(func() {
		for _, i := range []int{2, 1, 0} {
			if stops[i] != nil {
				stops[i]()
			}
		}
	})
	up := func(i int, extra ...string) {
		// Not the test's context, which ends for all three at once before the clean-up runs.
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int, 1)
		upIO, _, _, upErr := iostreams.Test()
		args := append([]string{"up", "--dir", dirs[i], "--port", fmt.Sprint(ports[i]), "--cluster-name", "team",
			"--cluster-port", fmt.Sprint(ports[3+i]), "--routes", routes}, extra...)
		go func() { done <- Main(ctx, upIO, args) }()
		stops[i] = func() {
			cancel()
			select {
			case code := <-done:
				if code != exit.OK {
					t.Errorf("cotal up of node %d: exit %d: %s", i, code, upErr.String())
				}
			case <-time.After(30 * time.Second):
				t.Errorf("cotal up of node %d did not stop", i)
			}
		}
	}
	up(0)
	// The authority node makes its route secret as it starts, then waits for a quorum.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dirs[0], mesh.DirName, "auth", "cluster.json")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the authority node made no route secret")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, out, stderr := run(t, "cluster", "bundle", "--dir", dirs[0], "--out", bundle); code != exit.OK || !strings.Contains(out, "cluster-bundle") {
		t.Fatalf("cluster bundle: exit %d %s %s", code, out, stderr)
	}
	if fi, err := os.Stat(bundle); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the bundle: %v, mode %v", err, fi.Mode())
	}
	up(1, "--cluster-bundle", bundle)
	up(2, "--cluster-bundle", bundle)
	for _, d := range dirs {
		waitUp(t, d, nil)
	}
	code, out, stderr := run(t, "status", "--dir", dirs[0], "--json")
	var rep struct {
		Cluster string
		Nodes   []struct {
			Name   string
			Routes []string
		}
		Spaces []struct {
			Streams []struct {
				Name     string
				Leader   string
				Replicas []struct {
					Name    string
					Current bool
				}
			}
		}
	}
	if code != exit.OK || json.Unmarshal([]byte(out), &rep) != nil || rep.Cluster != "team" || len(rep.Nodes) != 3 || len(rep.Spaces) != 1 {
		t.Fatalf("status --json of the authority node: exit %d %s %s", code, out, stderr)
	}
	for _, n := range rep.Nodes {
		if len(n.Routes) != 2 {
			t.Errorf("node %s routes to %v, want the two others", n.Name, n.Routes)
		}
	}
	for _, st := range rep.Spaces[0].Streams {
		if st.Leader == "" || len(st.Replicas) != 2 {
			t.Errorf("stream %s: leader %q, replicas %+v", st.Name, st.Leader, st.Replicas)
		}
	}
	if code, out, stderr := run(t, "status", "--dir", dirs[0]); code != exit.OK || !strings.Contains(out, "cluster: team (an authority node)") ||
		!strings.Contains(out, "LEADER") || !strings.Contains(out, "routes to") {
		t.Errorf("status of the authority node: exit %d %s %s", code, out, stderr)
	}
	if code, out, stderr := run(t, "status", "--dir", dirs[2], "--json"); code != exit.OK || !strings.Contains(out, `"cluster":"team","keyless":true`) {
		t.Errorf("status of a node without keys: exit %d %s %s", code, out, stderr)
	}
	if code, _, stderr := run(t, "send", "msg", "general", "hello-cluster", "--dir", dirs[0]); code != exit.OK {
		t.Fatalf("send through the authority node: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(t, "cluster", "bundle", "--dir", dirs[1], "--out", filepath.Join(t.TempDir(), "b.json")); code == exit.OK || !strings.Contains(stderr, "no keys") {
		t.Errorf("a bundle from a node without keys: exit %d %s", code, stderr)
	}
	for _, bad := range [][]string{
		{"up", "--cluster-name", "team"},
		{"up", "--cluster-port", "6222"},
		{"up", "--cluster-port", "6222", "--cluster-name", "team", "--routes", "http://x:1"},
		{"up", "--cluster-port", "6222", "--cluster-name", "team", "--open"},
		{"up", "--cluster-port", "6222", "--cluster-name", "team", "--port", "0"},
		{"up", "--cluster-port", "6222", "--cluster-bundle", filepath.Join(t.TempDir(), "missing.json")},
		{"cluster", "bundle"},
	} {
		if code, _, stderr := run(t, append(bad, "--dir", t.TempDir())...); code != exit.Usage {
			t.Errorf("%v: exit %d, want usage: %s", bad, code, stderr)
		}
	}
}

// TestClusterForget: `cotal cluster forget` takes the record of a node taken out of a user-auth
// cluster off the status at once; a running node, and a name with no record, are refused.
func TestClusterForget(t *testing.T) {
	a := upMesh(t, "--user-auth", "--dev-idp", "--dev-idp-addr", "127.0.0.1:0", "--no-manager")
	st, err := mesh.Dir{Path: filepath.Join(a, mesh.DirName)}.ReadState()
	if err != nil {
		t.Fatal(err)
	}
	kv, err := openLedger(t, a, st.URL).UserAuthStore(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	gone := authservice.NodeRecord{Node: "node-gone", Server: "nats://127.0.0.1:1", ExchangeURL: "http://127.0.0.1:2",
		ManagerAuthorityURL: "http://127.0.0.1:2/manager-service-authority", Callout: true, SeenAt: time.Now().Add(-time.Hour).UTC()}
	raw, _ := json.Marshal(gone)
	if _, err := kv.Put(t.Context(), "node.node-gone", raw); err != nil {
		t.Fatal(err)
	}
	services := func() (int, []string) {
		code, out, _ := run(t, "status", "--dir", a, "--json")
		var rep status.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("status --json: %v", err)
		}
		var names []string
		for _, s := range rep.AuthServices {
			names = append(names, s.Node)
		}
		return code, names
	}
	if code, names := services(); code == exit.OK || !slices.Contains(names, "node-gone") {
		t.Fatalf("status with a node gone: exit %d, auth services %v", code, names)
	}
	if code, _, stderr := run(t, "cluster", "forget", "node-gone", "--dir", a); code != exit.OK || !strings.Contains(stderr, "forgot node node-gone") {
		t.Fatalf("cluster forget: exit %d %s", code, stderr)
	}
	code, names := services()
	if code != exit.OK || slices.Contains(names, "node-gone") || len(names) != 1 {
		t.Fatalf("status after forgetting: exit %d, auth services %v", code, names)
	}
	if code, _, stderr := run(t, "cluster", "forget", "node-gone", "--dir", a); code == exit.OK || !strings.Contains(stderr, "no auth service of node node-gone") {
		t.Errorf("forget a node with no record: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(t, "cluster", "forget", names[0], "--dir", a); code == exit.OK || !strings.Contains(stderr, "stop it before forgetting it") {
		t.Errorf("forget the running node: exit %d %s", code, stderr)
	}
}
