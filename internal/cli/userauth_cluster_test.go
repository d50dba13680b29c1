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
	"syscall"
	"testing"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/ps"
	"github.com/gocotal/cotal/internal/cli/status"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/internal/userauth/oidc"
)

// userAuthDMs is how many direct messages, and how many posts to a durable channel, flow between
// two people while the node that logged them in is killed.
const userAuthDMs = 1000

// userAuthCluster is a cluster of three authority nodes in user-auth mode with the development
// IdP, each with its exchange on its own port: node i's flags.
func userAuthCluster(t *testing.T, extra ...string) (*nodes, []string) {
	t.Helper()
	ports := meshtest.FreePorts(t, 4)
	idp := fmt.Sprintf("127.0.0.1:%d", ports[3])
	c := startNodes(t, func(i int) []string {
		return append([]string{"--user-auth", "--dev-idp", "--dev-idp-addr", idp, "--exchange-public-port", fmt.Sprint(ports[i])}, extra...)
	})
	exchanges := make([]string, 3)
	for i, st := range c.states {
		if want := fmt.Sprintf("http://127.0.0.1:%d", ports[i]); st.ExchangeURL != want {
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
func (p *person) connect(meshURL string, handler cotal.Handler) (*cotal.Client, error) {
	ctx := p.t.Context()
	server, opts, err := authservice.PersonOptions(ctx, userauth.NewHTTPClient(), p.sessions(), meshURL, "cli")
	if err != nil {
		return nil, err
	}
	c, err := cotal.Connect(ctx, server, append(opts, cotal.WithHandler(handler))...)
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
	// The remote manager renews through the survivors (its credentials live 20 s), and its agent
	// keeps answering.
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
	c.states[0] = waitUp(t, c.dirs[0], nil)
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
