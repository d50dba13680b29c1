// Package meshtest is the integration-test harness: a real authenticated mesh (embedded
// nats-server, operator mode, provisioned spaces) in a temporary directory on a free port, with
// credentials for any profile and clients that report what the broker refused. NATS is never
// mocked.
package meshtest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/broker/brokertest"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/wire"
)

// Mesh is a running test mesh. Its Space is the first space it serves.
type Mesh struct {
	*mesh.Mesh
	Dir   mesh.Dir
	Space wire.Space
}

// Option configures Start.
type Option func(*mesh.Options)

// WithDaemons runs the in-process delivery daemon and manager responder, as `cotal up` does.
func WithDaemons() Option {
	return func(o *mesh.Options) { o.NoDaemons = false }
}

// WithDaemonLifetime runs the daemons on credentials that live life, renewed at two thirds of it.
func WithDaemonLifetime(life time.Duration) Option {
	return func(o *mesh.Options) { o.DaemonCredentialLifetime = life }
}

// WithLog sends the broker's and the daemons' logs to log.
func WithLog(log *slog.Logger) Option {
	return func(o *mesh.Options) { o.Log = log }
}

// WithSpaces serves these spaces instead of "main".
func WithSpaces(spaces ...wire.Space) Option {
	return func(o *mesh.Options) { o.Spaces = spaces }
}

// Start runs an authenticated mesh for the test and stops it at cleanup.
func Start(t testing.TB, opts ...Option) *Mesh {
	t.Helper()
	o := mesh.Options{Port: -1, NoDaemons: true}
	for _, opt := range opts {
		opt(&o)
	}
	dir := mesh.Dir{Path: t.TempDir() + "/" + mesh.DirName}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := mesh.Up(ctx, dir, o)
	if err != nil {
		t.Fatalf("start mesh: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.Shutdown(ctx); err != nil {
			t.Errorf("stop mesh: %v", err)
		}
	})
	return &Mesh{Mesh: m, Dir: dir, Space: m.State().Spaces[0]}
}

// Mint mints a credential in the mesh's first space unless req names another.
func (m *Mesh) Mint(t testing.TB, req ledger.Request) *authority.Credential {
	t.Helper()
	if req.Space == "" {
		req.Space = m.Space
	}
	cred, err := ledger.Mint(m.Keyring(), req)
	if err != nil {
		t.Fatalf("mint %s %s: %v", req.Profile, req.Name, err)
	}
	return cred
}

// AgentCred issues an agent credential for req.Name through the mesh's ledger and provisions its
// durables.
func (m *Mesh) AgentCred(t testing.TB, req ledger.Request) *authority.Credential {
	t.Helper()
	if req.Space == "" {
		req.Space = m.Space
	}
	req.Profile = authority.ProfileAgent
	l := m.Ledger(req.Space)
	cred, err := l.Issue(t.Context(), req)
	if err != nil {
		t.Fatalf("issue agent %s: %v", req.Name, err)
	}
	if err := l.ProvisionAgent(t.Context(), cred, req); err != nil {
		t.Fatalf("provision agent %s: %v", req.Name, err)
	}
	return cred
}

// Agent mints and provisions an agent credential, and connects it.
func (m *Mesh) Agent(t testing.TB, req ledger.Request) (*authority.Credential, *Client) {
	t.Helper()
	cred := m.AgentCred(t, req)
	return cred, m.Connect(t, cred)
}

// Client is a connection that records the asynchronous errors the broker sends it, so a test
// can tell that the broker refused an operation (a permission violation) rather than our code.
type Client struct {
	*nats.Conn
	JS jetstream.JetStream

	mu     sync.Mutex
	errs   []error
	notify chan struct{}
}

// Connect connects cred to the mesh, closing the connection at cleanup.
func (m *Mesh) Connect(t testing.TB, cred *authority.Credential, opts ...nats.Option) *Client {
	t.Helper()
	return m.Dial(t, cred.Principal.String(), func(more ...nats.Option) (*nats.Conn, error) {
		return dial.As(t.Context(), m.URL(), cred, append(opts, more...)...)
	})
}

// ConnzObserver connects a system-account user that may list the connections of the mesh's
// space account (CONNZ) and nothing else, closed at cleanup, and returns it with that account.
func (m *Mesh) ConnzObserver(t testing.TB) (*nats.Conn, string) {
	t.Helper()
	keys, err := m.Keyring().Space(m.Space)
	if err != nil {
		t.Fatal(err)
	}
	account := keys.AccountPublicKey()
	observer, err := m.Keyring().MintSystemUser("connz-observer", []string{jsapi.AccountConnz(account)}, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := dial.As(t.Context(), m.URL(), observer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, account
}

// StoreClient connects a user of the space's store account (authority.MintStoreUser), closed at
// cleanup: a reply subject it sets reaches the stream that captures it, so a test plants with it
// exactly what a capture would have stored, where no credential of the space's account can.
func (m *Mesh) StoreClient(t testing.TB) *Client {
	t.Helper()
	cred, err := m.Keyring().MintStoreUser(m.Space, "test_store_user", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return m.Connect(t, cred)
}

// Dial connects with connect, which must apply the options it is given, recording the broker's
// asynchronous errors as Connect does; who names the connection in a failure.
func (m *Mesh) Dial(t testing.TB, who string, connect func(opts ...nats.Option) (*nats.Conn, error)) *Client {
	t.Helper()
	return Dial(t, who, connect)
}

// Dial is Mesh.Dial for a broker the test did not start with Start (a `cotal up`'s).
func Dial(t testing.TB, who string, connect func(opts ...nats.Option) (*nats.Conn, error)) *Client {
	t.Helper()
	c := &Client{notify: make(chan struct{}, 1)}
	nc, err := connect(nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { c.record(err) }))
	if err != nil {
		t.Fatalf("connect %s: %v", who, err)
	}
	t.Cleanup(nc.Close)
	c.Conn = nc
	if c.JS, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *Client) record(err error) {
	c.mu.Lock()
	c.errs = append(c.errs, err)
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// verdictWait bounds how long a test waits for the broker's verdict on a sentinel. It arrives
// within a round trip; the bound only keeps a broken test from hanging.
const verdictWait = 10 * time.Second

// sentinelPrefix starts subjects that no profile may publish to.
const sentinelPrefix = "_meshtest.sentinel."

// Refused reports whether the broker refused op ("Publish" or "Subscription") on subject, as a
// permission violation on this connection. It is deterministic: after what was sent, it publishes
// to a sentinel subject no credential may use and waits for that refusal; the broker judges a
// connection's messages in order and the client reports them in order, so every verdict on what
// came before has been recorded by then.
func (c *Client) Refused(op, subject string) (bool, error) {
	sentinel := sentinelPrefix + nuid.Next()
	if err := c.Publish(sentinel, nil); err != nil {
		return false, fmt.Errorf("publish sentinel: %w", err)
	}
	if err := c.Flush(); err != nil {
		return false, fmt.Errorf("flush: %w", err)
	}
	if err := c.waitFor(violation("Publish", sentinel)); err != nil {
		return false, err
	}
	want := violation(op, subject)
	for _, err := range c.Errors() {
		if strings.Contains(err.Error(), want) {
			return true, nil
		}
	}
	return false, nil
}

func violation(op, subject string) string {
	return fmt.Sprintf("Permissions Violation for %s to %q", op, subject)
}

func (c *Client) waitFor(text string) error {
	deadline := time.NewTimer(verdictWait)
	defer deadline.Stop()
	for {
		for _, err := range c.Errors() {
			if strings.Contains(err.Error(), text) {
				return nil
			}
		}
		select {
		case <-c.notify:
		case <-deadline.C:
			return fmt.Errorf("no %q from the broker within %s (errors seen: %v)", text, verdictWait, c.Errors())
		}
	}
}

// Errors returns the asynchronous errors recorded so far.
func (c *Client) Errors() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.errs...)
}

// StartBroker runs a bare open broker (no authentication, nothing provisioned) for tests of the
// pieces below a mesh, and returns its URL. It stops at cleanup.
func StartBroker(t testing.TB) string {
	t.Helper()
	return brokertest.Start(t)
}

// Eventually polls cond until it holds, and fails t naming what when within passes first. The
// bound only keeps a broken test from hanging; a passing test returns as soon as cond holds.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Long skips the test under `go test -short`: it starts several processes or a cluster, drives a
// browser, a terminal or a harness, or soaks. why says which, in the skip message.
func Long(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("long (%s): runs without -short", why)
	}
}

// OpenStore opens the auth store of space on the broker at url as the ledger opens it, on a
// connection of its own closed at cleanup, with kr's signing keys: for a test that sets up or
// reads rows no ledger operation covers. What it writes bypasses the ledger, so a revocation it
// makes is not pushed to the broker. The store is safe for concurrent use.
func OpenStore(t testing.TB, url string, kr *authority.Keyring, space wire.Space) (*authstore.Store, *authority.SpaceKeys) {
	t.Helper()
	s, keys, nc, err := openStore(url, kr, space)
	if err != nil {
		t.Fatalf("open the auth store: %v", err)
	}
	t.Cleanup(nc.Close)
	return s, keys
}

// WithStore runs fn on the auth store of space (OpenStore), on a connection of its own that it
// closes after.
func WithStore(t testing.TB, url string, kr *authority.Keyring, space wire.Space, fn func(s *authstore.Store, keys *authority.SpaceKeys) error) error {
	t.Helper()
	s, keys, nc, err := openStore(url, kr, space)
	if err != nil {
		return err
	}
	defer nc.Close()
	return fn(s, keys)
}

// openStore connects a ledger-profile credential of its own to url and opens space's auth store on it.
func openStore(url string, kr *authority.Keyring, space wire.Space) (*authstore.Store, *authority.SpaceKeys, *nats.Conn, error) {
	keys, err := kr.Space(space)
	if err != nil {
		return nil, nil, nil, err
	}
	cred, err := ledger.Mint(kr, ledger.Request{Space: space, Profile: authority.ProfileLedger, Name: "test_store"})
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := dial.As(ctx, url, cred)
	if err != nil {
		return nil, nil, nil, err
	}
	s, err := authstore.Open(ctx, nc, space)
	if err != nil {
		nc.Close()
		return nil, nil, nil, err
	}
	return s, keys, nc, nil
}

// WithStore runs fn on the auth store of the mesh's first space (see the function WithStore).
func (m *Mesh) WithStore(t testing.TB, fn func(s *authstore.Store, keys *authority.SpaceKeys) error) error {
	t.Helper()
	return WithStore(t, m.URL(), m.Keyring(), m.Space, fn)
}

// FreePorts returns n distinct loopback ports free now (brokertest.FreePorts).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	return brokertest.FreePorts(t, n)
}

// nodeStopWait bounds StopNodes: a node's daemons and auth service wait out their own bounds on a
// cluster that lost its quorum, and its broker must be down before the test removes its store.
const nodeStopWait = 2 * time.Minute

// StopNodes shuts the nodes of a cluster down together at cleanup and waits until each broker has
// stopped, so that none still writes into a directory the test is removing. Nil nodes (those that
// failed to start) are skipped; a node already shut down stops again at once.
func StopNodes(t testing.TB, nodes []*mesh.Mesh) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), nodeStopWait)
		defer cancel()
		var wg sync.WaitGroup
		for i, n := range nodes {
			if n == nil {
				continue
			}
			wg.Go(func() {
				if err := n.Shutdown(ctx); err != nil {
					t.Errorf("node %d did not stop: %v", i, err)
				}
			})
		}
		wg.Wait()
	})
}
