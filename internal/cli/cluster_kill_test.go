package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// clusterDMs is how many direct messages, and how many posts to a durable channel, flow while a
// node is killed.
const clusterDMs = 2000

// nodes is three `cotal up` processes on loopback forming a cluster: the authority node a, node b
// started from its authority bundle (a second authority) and node c from its bundle without keys,
// each named, with a ledger on the authority and a provisioner credential to read the streams.
type nodes struct {
	t          *testing.T
	self       string
	ports      []int
	routes     string
	dirs       []string
	names      []string
	bundle     string
	authBundle string
	states     []*mesh.State
	// userAuth, when set, runs every node as an authority node in user-auth mode: it returns
	// node i's flags.
	userAuth func(c *nodes, i int) []string
	l        *ledger.Ledger
	prov     *authority.Credential
	// logs are the nodes' logs of their latest start, at --verbose.
	logs []string

	mu    sync.Mutex
	procs []*exec.Cmd
}

func startCluster(t *testing.T) *nodes { return startNodes(t, 0, nil) }

// startNodes starts the cluster, every node in user-auth mode when userAuth is set. It picks the
// nodes' client and route ports, and extra more (c.ports[6:]) for userAuth's flags, in one go, so
// no two of them are the same.
func startNodes(t *testing.T, extra int, userAuth func(c *nodes, i int) []string) *nodes {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := &nodes{t: t, self: self, ports: meshtest.FreePorts(t, 6+extra), dirs: []string{t.TempDir(), t.TempDir(), t.TempDir()},
		names: []string{"node-a", "node-b", "node-c"}, bundle: filepath.Join(t.TempDir(), "bundle.json"),
		authBundle: filepath.Join(t.TempDir(), "authority.json"), procs: make([]*exec.Cmd, 3), logs: make([]string, 3), userAuth: userAuth}
	c.routes = fmt.Sprintf("nats://127.0.0.1:%d,nats://127.0.0.1:%d,nats://127.0.0.1:%d", c.ports[3], c.ports[4], c.ports[5])
	t.Cleanup(func() {
		for i := range c.procs {
			c.stop(i)
		}
	})
	c.start(0)
	// The bundles are written once the authority holds its route secret and, in user-auth mode,
	// its callout keys.
	ready := filepath.Join(c.dirs[0], mesh.DirName, "auth", "cluster.json")
	if userAuth != nil {
		ready = filepath.Join(c.dirs[0], mesh.DirName, "auth", "space.main.auth.xkey.nk")
	}
	meshtest.Eventually(t, 30*time.Second, "the authority's route secret", func() bool {
		_, err := os.Stat(ready)
		return err == nil
	})
	if code, _, stderr := run(t, "cluster", "bundle", "--dir", c.dirs[0], "--out", c.bundle); code != exit.OK {
		t.Fatalf("cluster bundle: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(t, "cluster", "bundle", "--dir", c.dirs[0], "--out", c.authBundle, "--authority"); code != exit.OK {
		t.Fatalf("cluster bundle --authority: exit %d %s", code, stderr)
	}
	c.start(1)
	c.start(2)
	c.states = make([]*mesh.State, 3)
	for i := range c.dirs {
		c.states[i] = c.waitUp(i)
	}
	c.l = openLedger(t, c.dirs[0], c.states[0].URL)
	if c.prov, err = c.l.Issue(t.Context(), ledger.Request{Profile: authority.ProfileProvisioner, Name: "check"}); err != nil {
		t.Fatal(err)
	}
	return c
}

// start starts node i's cotal up process.
func (c *nodes) start(i int) {
	c.t.Helper()
	args := []string{"up", "--dir", c.dirs[i], "--port", fmt.Sprint(c.ports[i]), "--cluster-name", "team",
		"--cluster-port", fmt.Sprint(c.ports[3+i]), "--routes", c.routes, "--server-name", c.names[i], "--verbose"}
	switch {
	case i == 1 || i == 2 && c.userAuth != nil:
		args = append(args, "--cluster-bundle", c.authBundle)
	case i == 2:
		args = append(args, "--cluster-bundle", c.bundle)
	}
	if c.userAuth != nil {
		args = append(args, c.userAuth(c, i)...)
	}
	cmd := exec.Command(c.self, args...)
	cmd.Env = append(os.Environ(), envRunCLI+"=1")
	logPath := filepath.Join(c.t.TempDir(), "up.log")
	log, err := os.Create(logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		if c.t.Failed() {
			raw, _ := os.ReadFile(logPath)
			c.t.Logf("%s's log:\n%s", c.names[i], raw)
		}
	})
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.procs[i], c.logs[i] = cmd, logPath
	c.mu.Unlock()
}

// waitUp waits for node i as waitUp does; a node that does not come up is made to dump its
// goroutines into its log (SIGQUIT) before the test fails, so the log says where it stalled.
func (c *nodes) waitUp(i int) *mesh.State {
	c.t.Helper()
	d := mesh.Dir{Path: filepath.Join(c.dirs[i], mesh.DirName)}
	var err error
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var st *mesh.State
		if st, err = d.ReadState(); err == nil {
			return st
		}
	}
	c.mu.Lock()
	cmd, path := c.procs[i], c.logs[i]
	c.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		time.Sleep(2 * time.Second)
	}
	// The log's end says why (an error `up` exited on); the whole log follows at cleanup.
	raw, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	c.t.Fatalf("%s did not come up: %v; its log ends:\n%s", c.names[i], err, strings.Join(lines[max(0, len(lines)-20):], "\n"))
	return nil
}

// serving reports whether node i, since its latest start, took the space's delivery lease and
// serves the manager, as its log says.
func (c *nodes) serving(i int) bool {
	c.mu.Lock()
	path := c.logs[i]
	c.mu.Unlock()
	raw, _ := os.ReadFile(path)
	return strings.Contains(string(raw), "delivery lease acquired") && strings.Contains(string(raw), "serving the manager")
}

// stop stops node i as Ctrl-C does, killing it if it does not end within 30 s.
func (c *nodes) stop(i int) {
	c.mu.Lock()
	cmd := c.procs[i]
	c.procs[i] = nil
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		c.t.Errorf("%s did not stop on SIGTERM", c.names[i])
		_ = cmd.Process.Kill()
		<-done
	}
}

// kill kills node i with SIGKILL.
func (c *nodes) kill(i int) {
	c.mu.Lock()
	cmd := c.procs[i]
	c.procs[i] = nil
	c.mu.Unlock()
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// agent starts an agent issued by the authority, connected to node i, in trafficChannel.
func (c *nodes) agent(name string, i int, handler cotal.Handler) *cotal.Client {
	c.t.Helper()
	ctx := c.t.Context()
	cred, _, err := c.l.StartAgent(ctx, ledger.Request{Name: name, Subscribe: []string{trafficChannel}})
	if err != nil {
		c.t.Fatal(err)
	}
	cl, err := cotal.Connect(ctx, c.states[i].URL, cotal.WithCredsData(cred.Creds), cotal.WithHandler(handler))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = cl.Close(context.Background()) })
	if _, err := cl.Join(ctx, trafficChannel); err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// dmStream reads the DM stream's cluster info through node i.
func (c *nodes) dmStream(i int) (*jetstream.ClusterInfo, error) {
	ctx := c.t.Context()
	nc, err := dial.As(ctx, c.states[i].URL, c.prov)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, wire.Space("main").DMStream())
	if err != nil {
		return nil, err
	}
	if st.CachedInfo().Cluster == nil {
		return nil, fmt.Errorf("the DM stream has no cluster info")
	}
	return st.CachedInfo().Cluster, nil
}

// caughtUp waits until the DM stream is led and followed by all three nodes, the followers
// current with no lag, read through node i.
func (c *nodes) caughtUp(i int) {
	c.t.Helper()
	meshtest.Eventually(c.t, 60*time.Second, "the DM stream's replicas current", func() bool {
		ci, err := c.dmStream(i)
		if err != nil || len(ci.Replicas) != 2 {
			return false
		}
		peers := []string{ci.Leader}
		for _, r := range ci.Replicas {
			if !r.Current || r.Lag != 0 || r.Offline {
				return false
			}
			peers = append(peers, r.Name)
		}
		slices.Sort(peers)
		return slices.Equal(peers, c.names) // every node, the restarted one too
	})
}

// traffic sends n DMs from alice to bob and n posts to the durable channel trafficChannel, each
// retried under its own id until the cluster acknowledges it, and returns a channel that receives
// each index once both its messages are acknowledged.
func traffic(ctx context.Context, alice *cotal.Client, to wire.Principal, prefix string, n int) <-chan int {
	sent := make(chan int, n)
	go func() {
		defer close(sent)
		for i := range n {
			for _, m := range []*wire.CotalMessage{
				{ID: fmt.Sprintf("%s-dm-%05d", prefix, i), To: to.String(), Parts: []wire.Part{wire.TextPart("n")}},
				{ID: fmt.Sprintf("%s-post-%05d", prefix, i), Channel: trafficChannel, Parts: []wire.Part{wire.TextPart("n")}},
			} {
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
					time.Sleep(100 * time.Millisecond) // a leader is being elected: the same id again
				}
			}
			sent <- i
		}
	}()
	return sent
}

// trafficChannel is the durable channel the traffic posts to.
const trafficChannel = "ops"

// receiver counts the distinct messages a handler surfaces, and those it surfaces twice.
type receiver struct {
	mu   sync.Mutex
	got  map[string]bool
	dups int
}

func (r *receiver) handle(_ context.Context, d *cotal.Delivery) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got[d.Message.ID] {
		r.dups++
	}
	r.got[d.Message.ID] = true
	return nil
}

// surfaceWait bounds how long the messages sent around a node's kill take to surface: the
// streams' leaders and the delivery daemon fail over first, which under CI's load (three
// race-instrumented nodes beside other packages' tests) has taken over a minute.
const surfaceWait = 3 * time.Minute

// all waits until n distinct messages surfaced, and fails on any surfaced twice. A wait that
// times out says which messages are missing (receiver.missing).
func (r *receiver) all(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(surfaceWait); ; time.Sleep(20 * time.Millisecond) {
		r.mu.Lock()
		got, dups := len(r.got), r.dups
		r.mu.Unlock()
		if got == n {
			if dups != 0 {
				t.Errorf("%d messages surfaced twice", dups)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %d of %d messages surfaced: %s", surfaceWait, got, n, r.missing())
		}
	}
}

// missing names, for each kind of message surfaced (its id up to the index: "kill-dm"), the
// first index that has not surfaced and how many of those below the highest one seen are missing.
func (r *receiver) missing() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	top := map[string]int{}
	for id := range r.got {
		if i := strings.LastIndex(id, "-"); i > 0 {
			if n, err := strconv.Atoi(id[i+1:]); err == nil {
				top[id[:i]] = max(top[id[:i]], n)
			}
		}
	}
	var out []string
	for kind, hi := range top {
		gaps, first := 0, ""
		for i := range hi {
			if id := fmt.Sprintf("%s-%05d", kind, i); !r.got[id] {
				if gaps++; first == "" {
					first = id
				}
			}
		}
		out = append(out, fmt.Sprintf("%s up to %d: %d missing (first %q)", kind, hi, gaps, first))
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// TestClusterSurvivesNodeKill runs three `cotal up` processes as a cluster, agents on two of them,
// and kills -9 the node leading the DM stream while 2,000 direct messages and 2,000 posts to a
// durable channel flow (each retried under its own id until the cluster acknowledges it): every
// message arrives, none twice, and the killed node, started again, catches up.
func TestClusterSurvivesNodeKill(t *testing.T) {
	meshtest.Long(t, "a cluster of several nodes")
	c := startCluster(t)
	ctx := t.Context()
	r := &receiver{got: map[string]bool{}}
	bob := c.agent("bob", 2, r.handle)
	alice := c.agent("alice", 1, func(context.Context, *cotal.Delivery) error { return nil })
	ci, err := c.dmStream(1)
	if err != nil {
		t.Fatal(err)
	}
	victim := slices.Index(c.names, ci.Leader)
	if victim < 0 {
		t.Fatalf("the DM stream's leader %q is none of %v", ci.Leader, c.names)
	}
	t.Logf("killing %s, the DM stream's leader", ci.Leader)
	sent := traffic(ctx, alice, bob.Principal(), "kill", clusterDMs)
	for range clusterDMs / 10 {
		<-sent
	}
	c.kill(victim)
	for range sent {
	}
	r.all(t, 2*clusterDMs)
	c.start(victim)
	c.states[victim] = c.waitUp(victim)
	c.caughtUp((victim + 1) % 3)
}

// TestClusterAuthorityFailover kills -9 the authority node that serves the daemons (the delivery
// daemon and the supervisor) while 2,000 DMs and 2,000 posts to a durable channel flow: the second
// authority takes the daemons over and every message arrives, none twice. During the outage the
// CLI in the killed node's directory works through the other nodes (`status` says the node is
// down, `send` posts, `creds revoke` revokes); the agent it revoked is refused by the surviving
// nodes and by the killed one once it is back, which stands by.
func TestClusterAuthorityFailover(t *testing.T) {
	meshtest.Long(t, "a cluster of several nodes")
	c := startCluster(t)
	ctx := t.Context()
	active := -1
	meshtest.Eventually(t, 60*time.Second, "an authority node serving the daemons", func() bool {
		for i := range 2 {
			if c.serving(i) {
				active = i
				return true
			}
		}
		return false
	})
	standby := 1 - active
	if c.serving(standby) {
		t.Fatalf("both authority nodes serve the daemons")
	}
	r := &receiver{got: map[string]bool{}}
	bob := c.agent("bob", 2, r.handle)
	alice := c.agent("alice", standby, func(context.Context, *cotal.Delivery) error { return nil })
	carolCred, _, err := c.l.StartAgent(ctx, ledger.Request{Name: "carol"})
	if err != nil {
		t.Fatal(err)
	}
	var carolMu sync.Mutex
	var carolLog []string // what befell carol's connection, for a failure's report
	note := func(format string, args ...any) {
		carolMu.Lock()
		defer carolMu.Unlock()
		carolLog = append(carolLog, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
	}
	carol, err := dial.As(ctx, c.states[2].URL, carolCred,
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) { note("disconnected: %v", err) }),
		nats.ReconnectHandler(func(nc *nats.Conn) { note("reconnected to %s", nc.ConnectedServerName()) }))
	if err != nil {
		t.Fatal(err)
	}
	defer carol.Close()
	note("connected to %s", carol.ConnectedServerName())
	defer func() {
		if t.Failed() {
			carolMu.Lock()
			defer carolMu.Unlock()
			t.Logf("carol's connection (now on %q, connected %v):\n%s", carol.ConnectedServerName(), carol.IsConnected(), strings.Join(carolLog, "\n"))
		}
	}()
	t.Logf("killing %s, which serves the daemons", c.names[active])
	sent := traffic(ctx, alice, bob.Principal(), "failover", clusterDMs)
	for range clusterDMs / 10 {
		<-sent
	}
	c.kill(active)
	// The takeover waits out the killed node's delivery lease, then the elections of the streams
	// it led; on two loaded cores that has taken longer than a minute and a half.
	meshtest.Eventually(t, 3*time.Minute, "the second authority taking the daemons over", func() bool {
		return c.serving(standby)
	})
	// The CLI in the killed node's directory reaches the cluster through the other nodes (each
	// command tried again while the cluster elects new stream leaders, as a person would).
	var rep struct {
		Running  bool `json:"running"`
		NodeDown bool `json:"nodeDown"`
		Nodes    []struct {
			Name string `json:"name"`
		} `json:"nodes"`
		Spaces []struct {
			Provisioned bool                               `json:"provisioned"`
			Planes      map[wire.Plane]wire.ResponderState `json:"planes"`
		} `json:"spaces"`
	}
	var last string
	// The liveness planes report the daemons the second authority took over as bound.
	meshtest.Eventually(t, 60*time.Second, "status in the killed node's directory reporting it down, the daemons bound", func() bool {
		code, out, stderr := run(t, "status", "--json", "--dir", c.dirs[active])
		last = fmt.Sprintf("exit %d %s %s", code, out, stderr)
		return json.Unmarshal([]byte(out), &rep) == nil && code != exit.OK && rep.Running && rep.NodeDown &&
			len(rep.Nodes) == 2 && len(rep.Spaces) == 1 && rep.Spaces[0].Provisioned &&
			rep.Spaces[0].Planes[wire.PlaneDelivery] == wire.ResponderBound && rep.Spaces[0].Planes[wire.PlaneManager] == wire.ResponderBound
	})
	t.Logf("status through the others: %s", last)
	// A credential minted there comes with every node's URL, and connects through them.
	var minted struct {
		Creds   string `json:"creds"`
		Servers string `json:"servers"`
	}
	meshtest.Eventually(t, 60*time.Second, "mint in the killed node's directory", func() bool {
		code, out, stderr := run(t, "mint", "dave", "--json", "--dir", c.dirs[active])
		if code != exit.OK {
			t.Logf("mint: exit %d %s", code, stderr)
		}
		return code == exit.OK && json.Unmarshal([]byte(out), &minted) == nil
	})
	if n := len(strings.Split(minted.Servers, ",")); n != 3 {
		t.Fatalf("minted with servers %q, want the three nodes", minted.Servers)
	}
	dave, err := cotal.Connect(ctx, minted.Servers, cotal.WithCreds(minted.Creds), cotal.WithPresence(false))
	if err != nil {
		t.Fatalf("connect with the minted credential and servers: %v", err)
	}
	_ = dave.Close(ctx)
	for _, args := range [][]string{{"send", "msg", "general", "through the others"}, {"creds", "revoke", "carol"}} {
		note("run %q", args)
		meshtest.Eventually(t, 60*time.Second, fmt.Sprintf("%q in the killed node's directory", args), func() bool {
			code, _, stderr := run(t, append(args, "--dir", c.dirs[active])...)
			if code != exit.OK {
				t.Logf("%q: exit %d %s", args, code, stderr)
			}
			return code == exit.OK
		})
	}
	// The revocation reaches carol's node through the account resolver's propagation, while the
	// cluster still elects leaders for what the killed node led: allow it a minute.
	meshtest.Eventually(t, time.Minute, "carol's connection closed by the broker", func() bool {
		return carol.IsClosed() || !carol.IsConnected()
	})
	for range sent {
	}
	r.all(t, 2*clusterDMs)

	c.start(active)
	c.states[active] = c.waitUp(active)
	for _, i := range []int{active, standby, 2} {
		meshtest.Eventually(t, 30*time.Second, fmt.Sprintf("%s refusing carol's revoked credential", c.names[i]), func() bool {
			nc, err := dial.As(ctx, c.states[i].URL, carolCred)
			if err == nil {
				nc.Close()
				return false
			}
			return strings.Contains(strings.ToLower(err.Error()), "authorization violation")
		})
	}
	time.Sleep(2 * meshwire.ManagerLeaseTTL)
	if c.serving(active) {
		t.Errorf("%s, back, took the daemons from %s", c.names[active], c.names[standby])
	}
	c.caughtUp(standby)
}

// TestClusterRollingRestart restarts every node in turn, both authorities included, each with
// SIGTERM and started again once the others carry the DM stream, while 2,000 direct messages and
// 2,000 posts to a durable channel flow: every message arrives, none twice.
func TestClusterRollingRestart(t *testing.T) {
	meshtest.Long(t, "a cluster of several nodes")
	c := startCluster(t)
	ctx := t.Context()
	r := &receiver{got: map[string]bool{}}
	bob := c.agent("bob", 2, r.handle)
	alice := c.agent("alice", 1, func(context.Context, *cotal.Delivery) error { return nil })
	sent := traffic(ctx, alice, bob.Principal(), "roll", clusterDMs)
	for i := range 3 {
		for range clusterDMs / 5 {
			<-sent
		}
		c.stop(i)
		c.start(i)
		c.states[i] = c.waitUp(i)
		c.caughtUp((i + 1) % 3)
	}
	for range sent {
	}
	r.all(t, 2*clusterDMs)
}
