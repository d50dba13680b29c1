// Package factory is what every command of the cotal binary takes what it needs from, in the
// style of gh's cmdutil.Factory: the IO streams and a clock, the --dir and --space pair that
// names the running mesh and space, and, opened lazily and at most once per run, that mesh's
// ledger, one-shot clients on freshly issued credentials, the operator's control instrument for
// the endpoint commands, and agents that are retired when the command ends. Main closes what it
// opened.
package factory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/agentlock"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/cli/target"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// Factory builds what commands need. One Factory serves one run of the binary.
type Factory struct {
	IO *iostreams.IOStreams
	// Now is the clock commands read.
	Now func() time.Time
	// Target holds --dir and --space for the commands that register them. Every command binds
	// its flags to this one pair, so each binding defaults to empty: a binding's default is
	// written when it is registered, over the defaults of the commands registered before.
	Target target.Flags

	mu      sync.Mutex
	ledgers map[wire.Space]*ledger.Ledger // guarded by mu; opened by Ledger, closed by Close
	// oneShots are the credentials the run issued for itself, let go by Close; guarded by mu.
	oneShots []oneShot
}

// oneShot is a credential a command issued for itself, with the ledger that issued it.
type oneShot struct {
	l    *ledger.Ledger
	cred *authority.Credential
}

// New returns a factory on io with the system clock.
func New(io *iostreams.IOStreams) *Factory {
	return &Factory{IO: io, Now: time.Now}
}

// Mesh finds the running mesh and the space Target names; a space the mesh does not serve is a
// usage error. openRefusal, when set, is the error an open (unauthenticated) mesh gets from a
// command that needs credentials.
func (f *Factory) Mesh(openRefusal string) (mesh.Dir, *mesh.State, wire.Space, error) {
	return f.Target.Resolve(openRefusal)
}

// UserAuthStore returns the running mesh's directory, its space (the one Target names) and that
// space's user-auth store, reached through the space's ledger: the people ledger, the remote
// managers' registrations and the auth services' node records. A mesh that runs without
// authentication, or not in user-auth mode, is refused.
func (f *Factory) UserAuthStore(ctx context.Context) (mesh.Dir, wire.Space, jetstream.KeyValue, error) {
	d, st, sp, err := f.Mesh("an open mesh has no people ledger: run `cotal up --user-auth`")
	if err != nil {
		return mesh.Dir{}, "", nil, err
	}
	if st.ExchangeURL == "" {
		return mesh.Dir{}, "", nil, errors.New("the running mesh is not in user-auth mode: run `cotal up --user-auth`")
	}
	l, err := f.Ledger(ctx, sp)
	if err != nil {
		return mesh.Dir{}, "", nil, err
	}
	kv, err := l.UserAuthStore(ctx)
	if err != nil {
		return mesh.Dir{}, "", nil, err
	}
	return d, sp, kv, nil
}

// ErrOpenMesh is returned by Ledger for a mesh that runs without authentication.
var ErrOpenMesh = errors.New("cli: an open mesh has no ledger: it runs without credentials")

// Ledger returns the connected ledger of space sp of the running mesh (the space Target names
// when sp is empty), opening it on first use. It stays open until Close, renewing its own
// credentials, so a command that runs for days holds it as the mesh's daemons do.
func (f *Factory) Ledger(ctx context.Context, sp wire.Space) (*ledger.Ledger, error) {
	d, st, tsp, err := f.Mesh("")
	if err != nil {
		return nil, err
	}
	if sp == "" {
		sp = tsp
	}
	if st.Open {
		return nil, ErrOpenMesh
	}
	if st.Creds != "" {
		return nil, keysRefusal(st)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if l := f.ledgers[sp]; l != nil {
		return l, nil
	}
	kr, err := d.OpenKeyring()
	if err != nil {
		return nil, err
	}
	l, err := ledger.Open(ctx, st.URL, kr, sp)
	if err != nil {
		return nil, err
	}
	if f.ledgers == nil {
		f.ledgers = map[wire.Space]*ledger.Ledger{}
	}
	f.ledgers[sp] = l
	return l, nil
}

// keysRefusal is the error a command that needs the mesh's keys gets on a mesh the registry
// reaches by its server and a credential file.
func keysRefusal(st *mesh.State) error {
	return fmt.Errorf("mesh %q is reached through the credential file %s: this command issues credentials, which needs the mesh's keys (register its directory: `cotal meshes add %s --dir D --force`)", st.Registered, st.Creds, st.Registered)
}

// releaseWait bounds how long Close takes to let the run's own credentials go.
const releaseWait = 15 * time.Second

// Close lets go of the credentials the run issued for itself, so a command leaves no active
// row behind (an agent's lifecycle is retired, any other credential revoked, and the broker
// refuses both from then on), then closes the ledgers. The command's connections must be closed
// by then. A failure is reported on ErrOut: the credential still expires on its own.
func (f *Factory) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), releaseWait)
	defer cancel()
	for _, o := range f.oneShots {
		if err := o.release(ctx); err != nil {
			fmt.Fprintf(f.IO.ErrOut, "let go of the command's %s credential: %v\n", o.cred.Profile, err)
		}
	}
	f.oneShots = nil
	for _, l := range f.ledgers {
		l.Close()
	}
	f.ledgers = nil
}

// release retires a one-shot agent's lifecycle, or revokes any other one-shot credential.
func (o oneShot) release(ctx context.Context) error {
	if o.cred.Profile == authority.ProfileAgent {
		return o.l.Retire(ctx, wire.Lifecycle{Principal: o.cred.Principal, UID: o.cred.LifecycleUID})
	}
	_, err := o.l.Revoke(ctx, o.cred.LifecycleUID, o.cred.CredentialID, "the command that issued it ended")
	return err
}

// oneShotAgent is the lifetime of an agent credential the CLI issues for one command.
const oneShotAgent = time.Minute

// issueOneShot issues the credential of profile for local.<name> in space sp (the space Target
// names when empty) that one command runs as; nil on an open mesh, which takes no credentials.
//
// The credential lives life (the profile's default when zero); a one-shot agent lives a minute.
func (f *Factory) issueOneShot(ctx context.Context, sp wire.Space, profile authority.Profile, name string, life time.Duration) (*authority.Credential, *mesh.State, wire.Space, error) {
	_, st, tsp, err := f.Mesh("")
	if err != nil {
		return nil, nil, "", err
	}
	if sp == "" {
		sp = tsp
	}
	if st.Open {
		return nil, st, sp, nil
	}
	l, err := f.Ledger(ctx, sp)
	if err != nil {
		return nil, nil, "", err
	}
	req := ledger.Request{Profile: profile, Name: name, Expires: life}
	if profile == authority.ProfileAgent {
		req.Expires = oneShotAgent
	}
	cred, err := l.Issue(ctx, req)
	if err != nil {
		return nil, nil, "", err
	}
	f.mu.Lock()
	f.oneShots = append(f.oneShots, oneShot{l: l, cred: cred})
	f.mu.Unlock()
	return cred, st, sp, nil
}

// Client connects an SDK client to space sp of the running mesh (the space Target names when
// empty) as a freshly issued credential of profile for local.<name>: the CLI issues the
// short-lived credentials it needs itself. On an open mesh it connects without credentials; on a
// mesh the registry reaches by its server, as the registered credential file.
//
// The credential expires within a command's few minutes (authority.OneShotLifetime) even if the
// command is killed before it lets it go; a command that runs until stopped takes WatchClient.
func (f *Factory) Client(ctx context.Context, sp wire.Space, profile authority.Profile, name string, opts ...cotal.Option) (*cotal.Client, error) {
	return f.client(ctx, sp, profile, name, authority.OneShotLifetime, opts...)
}

// WatchClient is Client for a command that runs until it is stopped (`cotal console`): its
// credential does not expire, and is let go when the command ends.
func (f *Factory) WatchClient(ctx context.Context, sp wire.Space, profile authority.Profile, name string, opts ...cotal.Option) (*cotal.Client, error) {
	return f.client(ctx, sp, profile, name, -1, opts...)
}

func (f *Factory) client(ctx context.Context, sp wire.Space, profile authority.Profile, name string, life time.Duration, opts ...cotal.Option) (*cotal.Client, error) {
	if _, st, tsp, err := f.Mesh(""); err == nil && st.Creds != "" {
		// A mesh registered by its server: the command acts as the registered credential.
		return cotal.Connect(ctx, st.URL, append([]cotal.Option{cotal.WithSpace(string(cmp.Or(sp, tsp))), cotal.WithCreds(st.Creds)}, opts...)...)
	}
	cred, st, sp, err := f.issueOneShot(ctx, sp, profile, name, life)
	if err != nil {
		return nil, err
	}
	base := []cotal.Option{cotal.WithSpace(string(sp))}
	if cred != nil {
		base = append(base, cotal.WithCredsData(cred.Creds))
	}
	return cotal.Connect(ctx, st.URL, append(base, opts...)...)
}

// JetStream connects to space sp of the running mesh (the space Target names when empty) as a
// freshly issued credential of profile for local.<name> (without credentials on an open mesh)
// and returns a JetStream context on it, with closeFn to close the connection.
func (f *Factory) JetStream(ctx context.Context, sp wire.Space, profile authority.Profile, name string) (js jetstream.JetStream, closeFn func(), err error) {
	cred, st, _, err := f.issueOneShot(ctx, sp, profile, name, authority.OneShotLifetime)
	if err != nil {
		return nil, nil, err
	}
	var nc *nats.Conn
	if cred == nil {
		nc, err = dial.Anonymous(ctx, st.URL)
	} else {
		nc, err = dial.As(ctx, st.URL, cred)
	}
	if err != nil {
		return nil, nil, err
	}
	if js, err = jetstream.New(nc); err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream on %s: %w", st.URL, err)
	}
	return js, nc.Close, nil
}

// stopWait bounds how long a command that ran an agent waits to revoke its credential.
const stopWait = 10 * time.Second

// RunningAgent is an agent this process runs by name: its identity, held for one process at a
// time, and the credential of its lifecycle.
type RunningAgent struct {
	Cred *authority.Credential
	// Resumed reports that the agent's current lifecycle was resumed, not started.
	Resumed bool
	lock    *agentlock.Lock
	stop    func()
}

// RunAgent runs the agent req names in this process, as command ("cotal mcp"). It takes the
// agent's identity for this process (a process already running it is refused, naming it, unless
// takeover), then issues a credential through the ledger of req.Space (the space Target names
// when empty) on the agent's current lifecycle, which it keeps across runs so the agent receives
// what was sent to it while no process ran it; fresh starts a new lifecycle instead. The publish
// policy is that of every command that runs an agent (ledger.Request.WithDefaultPublish). A
// malformed request is a usage error. Stop lets it go; the caller defers it.
func (f *Factory) RunAgent(ctx context.Context, req ledger.Request, command string, fresh, takeover bool) (*RunningAgent, error) {
	d, _, sp, err := f.Mesh("")
	if err != nil {
		return nil, err
	}
	if req.Space == "" {
		req.Space = sp
	}
	if err := req.Validate(); err != nil {
		return nil, &exit.UsageError{Err: err}
	}
	l, err := f.Ledger(ctx, req.Space)
	if err != nil {
		return nil, err
	}
	p, err := req.Principal()
	if err != nil {
		return nil, &exit.UsageError{Err: err}
	}
	lock, err := agentlock.Acquire(ctx, d.LocksDir(), req.Space, p, command, takeover)
	if err != nil {
		return nil, err
	}
	a := &RunningAgent{lock: lock}
	if a.Cred, a.Resumed, err = l.RunAgent(ctx, req, fresh); err != nil {
		lock.Release()
		if _, ok := errors.AsType[*wire.ValidationError](err); ok {
			return nil, &exit.UsageError{Err: err}
		}
		return nil, err
	}
	a.stop = func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopWait)
		defer cancel()
		if _, err := l.Revoke(rctx, a.Cred.LifecycleUID, a.Cred.CredentialID, "its process stopped"); err != nil {
			fmt.Fprintf(f.IO.ErrOut, "revoke the credential of %s.%s: %v\n", a.Cred.Principal, a.Cred.LifecycleUID, err)
		}
		lock.Release()
	}
	return a, nil
}

// Watch calls takenOver, once, when another process takes the agent over: by then this process
// has let the identity go, and must stop acting as the agent.
func (a *RunningAgent) Watch(takenOver func(by agentlock.Holder)) { a.lock.Watch(takenOver) }

// Stop revokes the run's credential, which the broker then refuses, and lets the identity go. The
// lifecycle stays, for the agent's next run.
func (a *RunningAgent) Stop() { a.stop() }

// openControl is the refusal of an endpoint command on an open mesh.
const openControl = "the endpoint commands need an authenticated mesh: an open mesh has no service registry and no control credential"

// Control is the operator's control instrument on one space: a connection as a one-shot
// control-caller-admin credential, the caller lifecycle its rows pin, a manager client calling
// as it (in mode any), and the space's records bucket, whose service registry it reads; or a
// person's manager-caller view of one instance (MeshControl), with no records bucket. Close
// closes the connection; the credential is let go when the factory closes.
type Control struct {
	Conn  *nats.Conn
	Space wire.Space
	// Me is the caller lifecycle: the credential's principal and its instrument uid.
	Me      wire.Lifecycle
	Manager *manager.Client
	// Records is the space's records bucket: read it through watches (endpoint.Instances), which
	// the credential's grant admits, never by Get. Nil for a manager-caller view.
	Records jetstream.KeyValue
}

// Caller returns the endpoint caller the instrument calls with.
func (c *Control) Caller() *endpoint.Caller { return c.Manager.Caller() }

// Close closes the instrument's connection.
func (c *Control) Close() { c.Conn.Close() }

// Control connects the operator's control instrument to the space Target names: a freshly issued
// control-caller-admin credential, which expires within a command's few minutes
// (authority.OneShotLifetime). An open mesh is refused: it has no credentials and no registry.
func (f *Factory) Control(ctx context.Context) (*Control, error) {
	return f.control(ctx, authority.OneShotLifetime)
}

// WatchControl is Control for a command that runs until its work is done (`cotal spawn` waiting
// for its agent): the credential does not expire, and is let go when the command ends.
func (f *Factory) WatchControl(ctx context.Context) (*Control, error) {
	return f.control(ctx, -1)
}

func (f *Factory) control(ctx context.Context, life time.Duration) (*Control, error) {
	if _, _, _, err := f.Mesh(openControl); err != nil {
		return nil, err
	}
	cred, st, sp, err := f.issueOneShot(ctx, "", authority.ProfileControlAdmin, ledger.ControlActor, life)
	if err != nil {
		return nil, err
	}
	nc, err := dial.As(ctx, st.URL, cred)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream on %s: %w", st.URL, err)
	}
	records, err := js.KeyValue(ctx, string(meshwire.RecordsBucket(sp)))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("open the records bucket of space %s: %w", sp, err)
	}
	me := wire.Lifecycle{Principal: cred.Principal, UID: cred.Instrument}
	mc := manager.NewClient(nc, sp, me, ledger.ControlActor)
	mc.Any = true
	return &Control{Conn: nc, Space: sp, Me: me, Manager: mc, Records: records}, nil
}

// Refusal marks an endpoint call refused for want of authority, an *wire.EndpointError coded
// permission-denied or unauthenticated, as not authorized (exit.NotAuthorized); any other error
// is returned as it is.
func Refusal(err error) error {
	if e, ok := errors.AsType[*wire.EndpointError](err); ok && (e.Code == wire.CodePermissionDenied || e.Code == wire.CodeUnauthenticated) {
		return &exit.AuthError{Err: err}
	}
	return err
}
