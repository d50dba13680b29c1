package cotaltest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/wire"
)

// ErrClosed is returned by Issue on a closed mesh.
var ErrClosed = errors.New("mesh closed")

// Bounds on the mesh's own work; they only keep a broken test from hanging.
const (
	// startTimeout bounds StartMesh and each Agent: starting the broker and the daemons, or
	// issuing and provisioning one credential, takes well under a second.
	startTimeout = 30 * time.Second
	// closeTimeout bounds Close: stopping the daemons and the broker, flushing JetStream.
	closeTimeout = 30 * time.Second
)

// Mesh is a running test mesh: a broker, its provisioned space and, unless WithoutDaemons, the
// delivery daemon and the warden. It is safe for concurrent use. Create one with StartMesh or
// NewMesh; the zero value is not usable.
type Mesh struct {
	m     *mesh.Mesh
	tmp   string // the temporary directory holding the keys, the configuration and the store
	space wire.Space

	// mu guards closed, and is held through each issue so that Close waits for one in flight.
	mu     sync.Mutex
	closed bool
}

// Option configures a Mesh. Options validate their input: a bad one fails NewMesh with an error
// matching cotal.ErrInvalidOption, and StartMesh fails the test.
type Option func(*options) error

type options struct {
	space   wire.Space
	daemons bool
	log     *slog.Logger
}

// WithSpace names the mesh's space (default "main"). The agents' credentials name it, so a
// client connected with one adopts it.
func WithSpace(name string) Option {
	return func(o *options) error {
		sp, err := wire.ParseSpace(name)
		if err != nil {
			return fmt.Errorf("%w: %w", cotal.ErrInvalidOption, err)
		}
		o.space = sp
		return nil
	}
}

// WithoutDaemons runs the broker alone, without the delivery daemon and the warden (default:
// both run). Channels are still provisioned durable, but a join is then live only and says so
// (cotal.JoinResult.Backstop); use it to test an agent's behaviour when the daemon is down.
func WithoutDaemons() Option {
	return func(o *options) error { o.daemons = false; return nil }
}

// WithLogger sends the broker's and the daemons' logs to log (default: discarded).
func WithLogger(log *slog.Logger) Option {
	return func(o *options) error {
		if log == nil {
			return fmt.Errorf("%w: nil logger", cotal.ErrInvalidOption)
		}
		o.log = log
		return nil
	}
}

// StartMesh starts a mesh for the test and stops it at the test's cleanup, after the clients the
// test connected through Agent.Connect have closed. It fails the test if an option is invalid or
// the mesh does not start.
func StartMesh(t testing.TB, opts ...Option) *Mesh {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	m, err := NewMesh(ctx, opts...)
	if err != nil {
		t.Fatalf("cotaltest: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("cotaltest: %v", err)
		}
	})
	return m
}

// NewMesh starts a mesh in a new temporary directory on a free loopback port. With the daemons,
// it returns once the warden is watching. The caller must Close it. It returns an error matching
// cotal.ErrInvalidOption for a bad option, and leaves nothing running when it fails.
func NewMesh(ctx context.Context, opts ...Option) (*Mesh, error) {
	o := options{space: mesh.DefaultSpace, daemons: true}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("start mesh: %w", err)
		}
	}
	tmp, err := os.MkdirTemp("", "cotaltest-")
	if err != nil {
		return nil, fmt.Errorf("start mesh: %w", err)
	}
	m, err := mesh.Up(ctx, mesh.Dir{Path: filepath.Join(tmp, mesh.DirName)}, mesh.Options{
		Spaces: []wire.Space{o.space},
		Port:   -1, // any free port
		Log:    o.log,
		// The supervisor spawns agent processes from the cotal binary; in a test the agent
		// under test runs in the test itself.
		NoDaemons: !o.daemons,
		NoManager: true,
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start mesh: %w", err), os.RemoveAll(tmp))
	}
	tm := &Mesh{m: m, tmp: tmp, space: o.space}
	// A test that provokes the warden must not race its start.
	if err := m.WardensReady(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("start mesh: wait for the warden: %w", err), tm.Close())
	}
	return tm, nil
}

// URL returns the broker's URL, such as nats://127.0.0.1:54321, for cotal.Connect.
func (m *Mesh) URL() string { return m.m.URL() }

// Space returns the mesh's space.
func (m *Mesh) Space() wire.Space { return m.space }

// Close stops the daemons and the broker, which disconnects every client still connected, and
// removes the mesh's temporary directory. It waits for an Issue in flight, and at most 30
// seconds for the broker to stop. Closing a closed mesh does nothing and returns nil.
func (m *Mesh) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	var errs []error
	if err := m.m.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stop mesh at %s: %w", m.URL(), err))
	}
	if err := os.RemoveAll(m.tmp); err != nil {
		errs = append(errs, fmt.Errorf("stop mesh: %w", err))
	}
	return errors.Join(errs...)
}

// AgentOption shapes an agent's credential: what it may read and post, and its role. Options
// validate their input: a bad channel or role fails Issue with an error matching both
// cotal.ErrInvalidOption and wire.ErrInvalid, and Agent fails the test.
type AgentOption func(*agentOptions) error

type agentOptions struct {
	read []string // the read ACL, which is also what the credential subscribes to
	post []string // the channels it may post to
	role string
}

// Channels lets the agent read and post to each of these concrete channels, the mesh's default
// policy for a channel member. An agent given no channel may still send and receive direct
// messages.
func Channels(names ...string) AgentOption {
	return func(o *agentOptions) error {
		for _, ch := range names {
			if err := wire.ValidateChannel(ch); err != nil {
				return fmt.Errorf("%w: channels: %w", cotal.ErrInvalidOption, err)
			}
		}
		o.read = appendNew(o.read, names...)
		o.post = appendNew(o.post, names...)
		return nil
	}
}

// ReadOnly lets the agent read these channels, without posting to them. Each is a concrete
// channel or a pattern such as "team.*" or "team.>".
func ReadOnly(patterns ...string) AgentOption {
	return func(o *agentOptions) error {
		for _, ch := range patterns {
			if err := wire.ValidateChannelPattern(ch); err != nil {
				return fmt.Errorf("%w: read-only: %w", cotal.ErrInvalidOption, err)
			}
		}
		o.read = appendNew(o.read, patterns...)
		return nil
	}
}

// Role makes the agent a member of role: it receives the tasks sent to the role (cotal.Client.Ask)
// when it connects with a handler, one member per task (default: no role).
func Role(name string) AgentOption {
	return func(o *agentOptions) error {
		if _, err := wire.TaskDurable(name); err != nil {
			return fmt.Errorf("%w: role: %w", cotal.ErrInvalidOption, err)
		}
		o.role = name
		return nil
	}
}

// appendNew appends to s the items it does not hold yet.
func appendNew(s []string, items ...string) []string {
	for _, it := range items {
		if !slices.Contains(s, it) {
			s = append(s, it)
		}
	}
	return s
}

// Agent issues a credential for the agent local.<name>, as Issue does, and fails the test if it
// cannot.
func (m *Mesh) Agent(t testing.TB, name string, opts ...AgentOption) *Agent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	a, err := m.Issue(ctx, name, opts...)
	if err != nil {
		t.Fatalf("cotaltest: %v", err)
	}
	return a
}

// Issue issues a credential for the agent local.<name> (name is one token of [A-Za-z0-9_]) in a
// fresh lifecycle, with its ledger row, and provisions its durables, so that direct messages and
// tasks sent to it wait for it before it connects. Issuing a name again starts a new lifecycle
// and revokes the earlier credential at the broker, as when a real agent restarts. It returns an
// error matching wire.ErrInvalid for a bad name, cotal.ErrInvalidOption for a bad option, and
// ErrClosed once the mesh is closed.
func (m *Mesh) Issue(ctx context.Context, name string, opts ...AgentOption) (*Agent, error) {
	if err := wire.ValidateActor(name); err != nil {
		return nil, fmt.Errorf("issue agent %q: %w", name, err)
	}
	var o agentOptions
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("issue agent %s: %w", name, err)
		}
	}
	req := ledger.Request{Name: name, Subscribe: o.read, AllowPublish: o.post, Role: o.role}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("issue agent %s: %w", name, ErrClosed)
	}
	l := m.m.Ledger(m.space)
	cred, err := l.Issue(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("issue agent %s: %w", name, err)
	}
	if err := l.ProvisionAgent(ctx, cred, req); err != nil {
		return nil, fmt.Errorf("provision agent %s: %w", name, err)
	}
	return &Agent{Principal: cred.Principal, Creds: cred.Creds, mesh: m}, nil
}

// Agent is an issued agent credential. Its String and LogValue print the principal, never the
// credential.
type Agent struct {
	// Principal is the agent's identity, local.<name>: the address of its direct messages.
	Principal wire.Principal
	// Creds is the credential as a NATS creds file (a user JWT and its seed), for
	// cotal.WithCredsData; write it to a file (mode 0600) for cotal.WithCreds.
	Creds []byte

	mesh *Mesh
}

// Connect connects the agent to its mesh with cotal.Connect, its credential first in opts, and
// closes the client at the test's cleanup (before the mesh stops). It fails the test if the
// client does not connect, or does not close cleanly unless its connection was already closed.
func (a *Agent) Connect(t testing.TB, opts ...cotal.Option) *cotal.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	c, err := cotal.Connect(ctx, a.mesh.URL(), append([]cotal.Option{cotal.WithCredsData(a.Creds)}, opts...)...)
	if err != nil {
		t.Fatalf("cotaltest: connect %s: %v", a.Principal, err)
	}
	t.Cleanup(func() {
		// A test may kill the connection to play a crash; then no final presence row can be
		// written, and that is what the test wanted.
		killed := c.Conn().IsClosed()
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		if err := c.Close(ctx); err != nil && !killed {
			t.Errorf("cotaltest: close %s: %v", a.Principal, err)
		}
	})
	return c
}

// String returns the agent's principal.
func (a *Agent) String() string { return a.Principal.String() }

// LogValue logs the agent as its principal, keeping the credential out of logs.
func (a *Agent) LogValue() slog.Value { return slog.StringValue(a.Principal.String()) }
