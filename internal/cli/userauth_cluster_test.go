package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/ps"
	"github.com/gocotal/cotal/internal/cli/status"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/internal/userauth/oidc"
	"github.com/gocotal/cotal/wire"
)

// userAuthDMs is how many direct messages, and how many posts to a durable channel, flow between
// two people while the node that logged them in is killed.
const userAuthDMs = 1000

// userAuthCluster is a cluster of three authority nodes in user-auth mode with the development
// IdP, each with its exchange on its own port: node i's flags.
func userAuthCluster(t *testing.T, extra ...string) (*nodes, []string) {
	t.Helper()
	// c.ports[6:9] are the exchanges' ports, c.ports[9] the development IdP's.
	c := startNodes(t, 4, func(c *nodes, i int) []string {
		return append([]string{"--user-auth", "--dev-idp", "--dev-idp-addr", fmt.Sprintf("127.0.0.1:%d", c.ports[9]),
			"--exchange-public-port", fmt.Sprint(c.ports[6+i])}, extra...)
	})
	exchanges := make([]string, 3)
	for i, st := range c.states {
		if want := fmt.Sprintf("http://127.0.0.1:%d", c.ports[6+i]); st.ExchangeURL != want {
			t.Fatalf("node %s's exchange is %q, want %s", c.names[i], st.ExchangeURL, want)
		}
		exchanges[i] = st.ExchangeURL
	}
	return c, exchanges
}

// person is someone logged in to the mesh from a home of their own.
type person struct {
	t    *testing.T
	name string
	home string
}

// as runs a cotal command as the person.
func (p *person) as(args ...string) (int, string, string) {
	p.t.Helper()
	p.t.Setenv("HOME", p.home)
	return run(p.t, args...)
}

// sessions is the person's login cache.
func (p *person) sessions() string { return filepath.Join(p.home, ".cotal", "idp-sessions.json") }

// connect connects the person's CLI actor through the mesh at meshURL, as `cotal send --mesh`
// does, with handler.
func (p *person) connect(meshURL string, handler cotal.Handler, extra ...cotal.Option) (*cotal.Client, error) {
	ctx := p.t.Context()
	server, opts, err := authservice.PersonOptions(ctx, userauth.NewHTTPClient(), p.sessions(), meshURL, "cli")
	if err != nil {
		return nil, err
	}
	c, err := cotal.Connect(ctx, server, append(append(opts, cotal.WithHandler(handler)), extra...)...)
	if err != nil {
		return nil, err
	}
	p.t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c, nil
}

// bearer fetches a bearer of the person's CLI actor at the exchange at url with their cached
// login.
func (p *person) bearer(url string) string {
	p.t.Helper()
	all, err := oidc.LoadSessions(p.sessions())
	if err != nil {
		p.t.Fatal(err)
	}
	_, sess, err := all.Find(url)
	if err != nil {
		p.t.Fatal(err)
	}
	tok, _, err := userauth.FetchPersonBearer(p.t.Context(), userauth.NewHTTPClient(), url, sess.IDToken, userauth.PersonBearer{Actor: "cli"})
	if err != nil {
		p.t.Fatal(err)
	}
	return tok
}

// authServices reads `cotal status --json` of node i's directory: its exit code and its auth
// services.
func (c *nodes) authServices(i int) (int, []status.AuthServiceStatus) {
	c.t.Helper()
	code, out, stderr := run(c.t, "status", "--dir", c.dirs[i], "--json")
	var rep status.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		c.t.Fatalf("status --json: exit %d %s %s", code, out, stderr)
	}
	return code, rep.AuthServices
}

// TestUserAuthCluster runs user-auth mode on a cluster of three authority nodes, each a `cotal up
// --user-auth --dev-idp` process: every node's callout and exchange answer (`cotal status`); a
// person logged in through node b posts through node c, and a revocation on node a ends her
// connection on c. Then two people logged in through node a exchange 1,000 DMs and 1,000 durable
// posts while a remote manager registered through a serves an agent, and a is killed -9: every
// message arrives once, the people connect again through the survivors (naming a's exchange,
// which is down), the remote manager keeps renewing and its agent keeps answering, and a
// revocation made during the outage is enforced by every node, a once it is back included.
func TestUserAuthCluster(t *testing.T) {
	meshtest.Long(t, "a user-auth cluster of several nodes")
	c, ex := userAuthCluster(t, "--remote-manager-lifetime", "20s")
	ctx := t.Context()

	// Every node's auth service answers, and each node's status reports all three.
	meshtest.Eventually(t, 30*time.Second, "every node's auth service answering", func() bool {
		code, list := c.authServices(2)
		if code != exit.OK || len(list) != 3 {
			return false
		}
		for _, a := range list {
			if a.Callout != "answering" || a.Exchange != "answering" || !slices.Contains(ex, a.ExchangeURL) {
				return false
			}
		}
		return true
	})
	// The mesh document of every node lists every node's exchange and broker.
	doc, err := authservice.FetchMeshDocument(ctx, userauth.NewHTTPClient(), ex[1])
	if err != nil {
		t.Fatal(err)
	}
	if doc.ExchangeURL != ex[1] || len(doc.ExchangeURLs) != 3 || len(doc.Servers) != 3 || doc.ExchangeURLs[0] != ex[1] {
		t.Fatalf("node b's mesh document: %+v", doc)
	}

	grant := func(name string, scopes ...string) {
		t.Helper()
		args := []string{"actor", "grant", name, "--allow-publish", "general," + trafficChannel, "--allow-subscribe", "general," + trafficChannel, "--dir", c.dirs[0]}
		for _, s := range scopes {
			args = append(args, "--scope", s)
		}
		if code, _, stderr := run(t, args...); code != exit.OK {
			t.Fatalf("actor grant %s: exit %d %s", name, code, stderr)
		}
	}
	ana := &person{t: t, name: "ana", home: t.TempDir()}
	ben := &person{t: t, name: "ben", home: t.TempDir()}
	grant("ana", "spawn")

	// Ana logs in through node b and posts through node c; her connection through c ends when
	// node a revokes her.
	if code, _, stderr := ana.as("login", "--mesh", ex[1], "--dev-user", "ana"); code != exit.OK {
		t.Fatalf("login through node b: exit %d %s", code, stderr)
	}
	if code, out, stderr := ana.as("send", "--mesh", ex[2], "msg", "general", "hi"); code != exit.OK || !strings.Contains(out, "stored seq") {
		t.Fatalf("send through node c: exit %d %s %s", code, out, stderr)
	}
	onC, err := ana.connect(ex[2], func(context.Context, *cotal.Delivery) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if got := onC.Conn().ConnectedServerName(); got != "node-c" {
		t.Fatalf("ana connected through %s, want node-c (the first broker node c's document lists)", got)
	}
	if code, _, stderr := run(t, "actor", "revoke", "ana", "--dir", c.dirs[0]); code != exit.OK {
		t.Fatalf("actor revoke on node a: exit %d %s", code, stderr)
	}
	meshtest.Eventually(t, 20*time.Second, "ana's connection on node c closed", func() bool {
		return !onC.Conn().IsConnected()
	})
	if code, _, _ := ana.as("send", "--mesh", ex[2], "msg", "general", "revoked"); code == exit.OK {
		t.Fatal("a revoked person still posts")
	}

	// Two people log in through node a; ben runs a remote manager registered through a.
	grant("ana", "spawn")
	grant("ben", "supervise", "spawn")
	for _, p := range []*person{ana, ben} {
		if code, _, stderr := p.as("login", "--mesh", ex[0], "--dev-user", p.name); code != exit.OK {
			t.Fatalf("%s's login through node a: exit %d %s", p.name, code, stderr)
		}
	}
	sup := c.superviseAs(ben, ex[0])
	meshtest.Eventually(t, 60*time.Second, "ben's remote manager serving", func() bool {
		raw, _ := os.ReadFile(sup.log)
		return strings.Contains(string(raw), "remote manager") && strings.Contains(string(raw), "serving space")
	})
	args := append([]string{"spawn", "--mesh", ex[0], "--name", "erin", "--detach", "--"}, agentCommand(t)...)
	if code, _, stderr := ben.as(args...); code != exit.OK {
		t.Fatalf("spawn on ben's remote manager: exit %d %s (supervise: %s)", code, stderr, sup.output())
	}
	r := &receiver{got: map[string]bool{}}
	benC, err := ben.connect(ex[0], r.handle)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := benC.Join(ctx, trafficChannel); err != nil {
		t.Fatal(err)
	}
	anaC, err := ana.connect(ex[0], func(context.Context, *cotal.Delivery) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	erin := c.erin(benC, ben)
	erin(60 * time.Second)

	// Node a dies -9 while the traffic flows.
	sent := traffic(ctx, anaC, benC.Principal(), "ua", userAuthDMs)
	for range userAuthDMs / 10 {
		<-sent
	}
	c.kill(0)
	for range sent {
	}
	r.all(t, 2*userAuthDMs)

	// A new connect, naming node a's exchange, goes through the survivors, authorized by a
	// surviving node's callout.
	again, err := ana.connect(ex[0], func(context.Context, *cotal.Delivery) error { return nil })
	if err != nil {
		t.Fatalf("ana's connect after the kill: %v", err)
	}
	if got := again.Conn().ConnectedServerName(); got == "node-a" {
		t.Fatalf("connected through the killed node")
	}
	if code, out, stderr := ana.as("send", "--mesh", ex[0], "msg", "general", "after the kill"); code != exit.OK {
		t.Fatalf("send naming the dead node's exchange: exit %d %s %s", code, out, stderr)
	}
	// The remote manager renews through the survivors (its credentials live 20 s, renewed every
	// 15 s), and its agent keeps answering.
	time.Sleep(30 * time.Second)
	if sup.exited() {
		t.Fatalf("the remote manager ended after node a died: %s", sup.output())
	}
	erin(45 * time.Second)

	// A revocation made during the outage ends ana's connections, and every node refuses her
	// bearer, node a once it is back included.
	held := ana.bearer(ex[1])
	if code, _, stderr := run(t, "actor", "revoke", "ana", "--dir", c.dirs[1]); code != exit.OK {
		t.Fatalf("actor revoke during the outage: exit %d %s", code, stderr)
	}
	meshtest.Eventually(t, 20*time.Second, "ana's connections closed", func() bool {
		return !anaC.Conn().IsConnected() && !again.Conn().IsConnected()
	})
	c.start(0)
	c.states[0] = c.waitUp(0)
	for i, st := range c.states {
		nc, err := dial.Bearer(ctx, st.URL, []byte(doc.SentinelCreds), func(context.Context) (string, error) { return held, nil })
		if err == nil {
			nc.Close()
			t.Errorf("node %s admitted a bearer of a revoked person", c.names[i])
		}
	}
	meshtest.Eventually(t, 30*time.Second, "node a's auth service answering again", func() bool {
		code, list := c.authServices(0)
		return code == exit.OK && len(list) == 3
	})
	// A node stopped on purpose takes its auth service off the list: the others stay healthy.
	c.stop(2)
	meshtest.Eventually(t, 30*time.Second, "node c's auth service off the list", func() bool {
		code, list := c.authServices(0)
		return code == exit.OK && len(list) == 2
	})
}

// superviser is a `cotal supervise --mesh` process.
type superviser struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func (s *superviser) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *superviser) output() string {
	raw, _ := os.ReadFile(s.log)
	return string(raw)
}

// superviseAs starts `cotal supervise --mesh meshURL` as p, a process of its own.
func (c *nodes) superviseAs(p *person, meshURL string) *superviser {
	c.t.Helper()
	s := &superviser{log: filepath.Join(c.t.TempDir(), "supervise.log"), done: make(chan struct{})}
	log, err := os.Create(s.log)
	if err != nil {
		c.t.Fatal(err)
	}
	s.cmd = exec.Command(c.self, "supervise", "--mesh", meshURL, "--dir", c.t.TempDir())
	s.cmd.Env = append(os.Environ(), envRunCLI+"=1", "HOME="+p.home)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	c.t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		if c.t.Failed() {
			c.t.Logf("supervise's log:\n%s", s.output())
		}
	})
	return s
}

// erin returns a check that ben's remote manager lists erin running and her presence is fresh
// within wait.
func (c *nodes) erin(benC *cotal.Client, ben *person) func(wait time.Duration) {
	roster, err := benC.Roster(c.t.Context())
	if err != nil {
		c.t.Fatal(err)
	}
	return func(wait time.Duration) {
		c.t.Helper()
		meshtest.Eventually(c.t, wait, "erin running and present", func() bool {
			code, out, _ := ben.as("ps", "--mesh", c.states[1].ExchangeURL+","+c.states[2].ExchangeURL, "--json")
			var rows []ps.Row
			if code != exit.OK || json.Unmarshal([]byte(out), &rows) != nil {
				return false
			}
			running := slices.ContainsFunc(rows, func(r ps.Row) bool {
				return strings.HasSuffix(r.Principal, ".erin") && r.Process != nil && r.Process.Status == "running"
			})
			return running && slices.ContainsFunc(roster.Find("erin"), func(p cotal.Peer) bool { return p.Online })
		})
	}
}

// TestUserAuthClusterChurn runs a user-auth cluster whose every credential lives one minute
// (people's and agents' bearers, the daemons' credentials, the remote manager's standing ones) for
// 90 seconds, ten minutes under COTAL_SOAK=1, while a person logs in, posts and logs out every 10 s
// through each node in turn and another sends a DM every second: no connection that should be
// allowed is refused (every login, post and DM succeeds, and every DM arrives once), the remote
// manager and its agent keep renewing, and `cotal doctor auth` is clean at the end.
func TestUserAuthClusterChurn(t *testing.T) {
	meshtest.Long(t, "a user-auth cluster under churn")
	length := 90 * time.Second
	if os.Getenv("COTAL_SOAK") == "1" {
		length = 10 * time.Minute
	}
	c, ex := userAuthCluster(t, "--daemon-credential-lifetime", "1m", "--remote-manager-lifetime", "1m", "--bearer-lifetime", "1m")
	ctx := t.Context()
	for _, g := range [][]string{{"ana", "spawn"}, {"ben", "supervise", "spawn"}, {"cara", "spawn"}} {
		args := []string{"actor", "grant", g[0], "--allow-publish", "general", "--allow-subscribe", "general", "--dir", c.dirs[0]}
		for _, s := range g[1:] {
			args = append(args, "--scope", s)
		}
		if code, _, stderr := run(t, args...); code != exit.OK {
			t.Fatalf("actor grant %s: exit %d %s", g[0], code, stderr)
		}
	}
	ana := &person{t: t, name: "ana", home: t.TempDir()}
	ben := &person{t: t, name: "ben", home: t.TempDir()}
	cara := &person{t: t, name: "cara", home: t.TempDir()}
	for i, p := range []*person{ana, ben} {
		if code, _, stderr := p.as("login", "--mesh", ex[i+1], "--dev-user", p.name); code != exit.OK {
			t.Fatalf("%s's login: exit %d %s", p.name, code, stderr)
		}
	}
	sup := c.superviseAs(ben, ex[2])
	meshtest.Eventually(t, 60*time.Second, "ben's remote manager serving", func() bool {
		return strings.Contains(sup.output(), "serving space")
	})
	args := append([]string{"spawn", "--mesh", ex[2], "--name", "erin", "--detach", "--"}, agentCommand(t)...)
	if code, _, stderr := ben.as(args...); code != exit.OK {
		t.Fatalf("spawn on ben's remote manager: exit %d %s (supervise: %s)", code, stderr, sup.output())
	}
	// Every reconnect on a fresh bearer (each lives a minute) must be admitted.
	var refused atomic.Int64
	countRefusals := cotal.WithNATSOptions(nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
		if strings.Contains(strings.ToLower(err.Error()), "authorization") {
			refused.Add(1)
		}
	}))
	r := &receiver{got: map[string]bool{}}
	benC, err := ben.connect(ex[2], r.handle, countRefusals)
	if err != nil {
		t.Fatal(err)
	}
	anaC, err := ana.connect(ex[1], func(context.Context, *cotal.Delivery) error { return nil }, countRefusals)
	if err != nil {
		t.Fatal(err)
	}
	erin := c.erin(benC, ben)
	erin(60 * time.Second)

	deadline := time.Now().Add(length)
	sent := make(chan int, 1)
	go func() {
		n := 0
		defer func() { sent <- n }()
		for ; time.Now().Before(deadline) && ctx.Err() == nil; n++ {
			m := &wire.CotalMessage{ID: fmt.Sprintf("churn-dm-%05d", n), To: benC.Principal().String(), Parts: []wire.Part{wire.TextPart("n")}}
			for {
				sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := anaC.Send(sctx, m)
				cancel()
				if err == nil || ctx.Err() != nil {
					break
				}
				time.Sleep(100 * time.Millisecond) // a reconnect on a fresh bearer: the same id again
			}
			time.Sleep(time.Second)
		}
	}()
	for k := 0; time.Now().Before(deadline); k++ {
		next := time.Now().Add(10 * time.Second)
		node := ex[k%3]
		for _, step := range [][]string{
			{"login", "--mesh", node, "--dev-user", "cara"},
			{"send", "--mesh", node, "msg", "general", fmt.Sprintf("churn %d", k)},
			{"logout", "--mesh", node},
		} {
			if code, _, stderr := cara.as(step...); code != exit.OK {
				t.Errorf("churn %d through %s: %s: exit %d %s", k, node, step[0], code, stderr)
			}
		}
		time.Sleep(time.Until(next))
	}
	r.all(t, <-sent)
	if n := refused.Load(); n != 0 {
		t.Errorf("%d reconnects on a fresh bearer were refused", n)
	}
	if sup.exited() {
		t.Fatalf("the remote manager ended: %s", sup.output())
	}
	erin(60 * time.Second)
	for i := range c.dirs {
		if code, out, stderr := run(t, "doctor", "auth", "--dir", c.dirs[i]); code != exit.OK {
			t.Errorf("doctor auth on %s: exit %d %s %s", c.names[i], code, out, stderr)
		}
	}
}
