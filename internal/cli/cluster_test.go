package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
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
