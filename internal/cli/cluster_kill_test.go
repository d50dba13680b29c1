package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// clusterDMs is how many direct messages flow while a node is killed.
const clusterDMs = 2000

// TestClusterSurvivesNodeKill runs three `cotal up` processes as a cluster, agents on two of them,
// and kills -9 the node leading the DM stream while 2,000 direct messages flow (each retried under
// its own id until the cluster acknowledges it): every message arrives, none twice, and the killed
// node, started again, catches up.
func TestClusterSurvivesNodeKill(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ports := make([]int, 6)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	routes := fmt.Sprintf("nats://127.0.0.1:%d,nats://127.0.0.1:%d,nats://127.0.0.1:%d", ports[3], ports[4], ports[5])
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	names := []string{"node-a", "node-b", "node-c"}
	bundle := filepath.Join(t.TempDir(), "bundle.json")
	procs := make([]*exec.Cmd, 3)
	var mu sync.Mutex
	start := func(i int) {
		args := []string{"up", "--dir", dirs[i], "--port", fmt.Sprint(ports[i]), "--cluster-name", "team",
			"--cluster-port", fmt.Sprint(ports[3+i]), "--routes", routes, "--server-name", names[i]}
		if i > 0 {
			args = append(args, "--cluster-bundle", bundle)
		}
		cmd := exec.Command(self, args...)
		cmd.Env = append(os.Environ(), envRunCLI+"=1")
		log, err := os.Create(filepath.Join(t.TempDir(), "up.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		procs[i] = cmd
		mu.Unlock()
	}
	t.Cleanup(func() {
		// The authority first, while the others make its quorum; then the rest.
		for _, cmd := range procs {
			if cmd != nil && cmd.ProcessState == nil {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				done := make(chan struct{})
				go func() { _ = cmd.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					_ = cmd.Process.Kill()
				}
			}
		}
	})
	start(0)
	meshtest.Eventually(t, 30*time.Second, "the authority's route secret", func() bool {
		_, err := os.Stat(filepath.Join(dirs[0], mesh.DirName, "auth", "cluster.json"))
		return err == nil
	})
	if code, _, stderr := run(t, "cluster", "bundle", "--dir", dirs[0], "--out", bundle); code != exit.OK {
		t.Fatalf("cluster bundle: exit %d %s", code, stderr)
	}
	start(1)
	start(2)
	states := make([]*mesh.State, 3)
	for i, d := range dirs {
		states[i] = waitUp(t, d, nil)
	}
	ctx := t.Context()
	l := openLedger(t, dirs[0], states[0].URL)
	agent := func(name string, node int, handler cotal.Handler) *cotal.Client {
		cred, _, err := l.StartAgent(ctx, ledger.Request{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		c, err := cotal.Connect(ctx, states[node].URL, cotal.WithCredsData(cred.Creds), cotal.WithHandler(handler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	var gotMu sync.Mutex
	got, dups := map[string]bool{}, 0
	bob := agent("bob", 2, func(_ context.Context, d *cotal.Delivery) error {
		gotMu.Lock()
		defer gotMu.Unlock()
		if got[d.Message.ID] {
			dups++
		}
		got[d.Message.ID] = true
		return nil
	})
	alice := agent("alice", 1, func(context.Context, *cotal.Delivery) error { return nil })

	// The node leading the DM stream is the one to kill.
	prov, err := l.Issue(ctx, ledger.Request{Profile: authority.ProfileProvisioner, Name: "check"})
	if err != nil {
		t.Fatal(err)
	}
	leaderOf := func(url string) (string, error) {
		nc, err := dial.As(ctx, url, prov)
		if err != nil {
			return "", err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return "", err
		}
		st, err := js.Stream(ctx, wire.Space("main").DMStream())
		if err != nil {
			return "", err
		}
		if c := st.CachedInfo().Cluster; c != nil {
			return c.Leader, nil
		}
		return "", nil
	}
	leader, err := leaderOf(states[1].URL)
	if err != nil || leader == "" {
		t.Fatalf("the DM stream's leader: %q, %v", leader, err)
	}
	victim := slices.Index(names, leader)
	if victim < 0 {
		t.Fatalf("the DM stream's leader %q is none of %v", leader, names)
	}
	t.Logf("killing %s, the DM stream's leader", leader)

	sent := make(chan int, clusterDMs)
	go func() {
		defer close(sent)
		for i := range clusterDMs {
			m := &wire.CotalMessage{ID: fmt.Sprintf("kill-%05d", i), To: bob.Principal().String(), Parts: []wire.Part{wire.TextPart("n")}}
			for {
				sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := alice.Send(sctx, m)
				cancel()
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return
				}
				time.Sleep(100 * time.Millisecond) // the cluster elects a new leader; the same id again
			}
			sent <- i
		}
	}()
	for range clusterDMs / 10 {
		<-sent
	}
	if err := procs[victim].Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = procs[victim].Wait()
	n := 0
	for range sent {
		n++
	}
	if n != clusterDMs-clusterDMs/10 {
		t.Fatalf("alice sent %d of %d", n+clusterDMs/10, clusterDMs)
	}
	meshtest.Eventually(t, 90*time.Second, "bob has every DM", func() bool {
		gotMu.Lock()
		defer gotMu.Unlock()
		return len(got) == clusterDMs
	})
	if dups != 0 {
		t.Errorf("%d DMs surfaced twice", dups)
	}

	// The killed node, started again, catches up: the DM stream is current on all three.
	start(victim)
	survivor := (victim + 1) % 3
	meshtest.Eventually(t, 60*time.Second, "the restarted node caught up", func() bool {
		nc, err := dial.As(ctx, states[survivor].URL, prov)
		if err != nil {
			return false
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return false
		}
		st, err := js.Stream(ctx, wire.Space("main").DMStream())
		if err != nil || st.CachedInfo().Cluster == nil {
			return false
		}
		c := st.CachedInfo().Cluster
		for _, r := range c.Replicas {
			if !r.Current || r.Lag != 0 {
				return false
			}
		}
		return len(c.Replicas) == 2
	})
}
