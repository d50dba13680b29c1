package mesh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/broker"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
)

// DefaultSpace is the space a mesh serves unless told otherwise.
const DefaultSpace wire.Space = "main"

// Options configure Up. The zero value runs an authenticated mesh of DefaultSpace on
// 127.0.0.1:4222.
type Options struct {
	// Spaces lists the spaces to serve; DefaultSpace when empty.
	Spaces []wire.Space
	Host   string
	// Port is the client port: 0 takes broker.DefaultPort, a negative value any free port.
	Port int
	// Open runs without authentication, loopback only: anyone local can do anything.
	Open bool
	// MonitorPort, when set, serves the broker's own monitoring endpoints on 127.0.0.1 at it.
	MonitorPort int
	// MetricsAddr, when set, is the host:port the mesh serves Prometheus metrics at, under
	// /metrics; port 0 picks a free one (Mesh.MetricsAddr).
	MetricsAddr string
	// Restore, when set, starts the mesh in a new directory from a backup.
	Restore *Restore
	TLS     *broker.TLSConfig
	// Log receives the broker's and the daemons' logs; nil discards them.
	Log *slog.Logger
	// NoDaemons leaves out the in-process delivery daemon and manager responder of an
	// authenticated mesh (tests start them when they need them).
	NoDaemons bool
	// NoManager leaves out the supervisor (run `cotal supervise` beside the mesh instead).
	NoManager bool
	// MaxSessions is each supervisor's ceiling of attach sessions; manager.DefaultMaxSessions
	// when zero.
	MaxSessions int
	// NoDelivery leaves out the in-process delivery daemon (run `cotal deliver` beside the mesh
	// instead).
	NoDelivery bool
	// DaemonCredentialLifetime is how long the daemons' credentials live before they are
	// renewed (at two thirds of it); authority.DaemonLifetime when zero.
	DaemonCredentialLifetime time.Duration
	// UserAuth, when set, runs the mesh in user-auth mode (SPEC §10): people log in with an
	// identity provider, and the auth service admits them and issues remote managers' authority.
	UserAuth *UserAuthOptions
	// Cluster, when set, runs this mesh as one node of a NATS cluster (cluster.go).
	Cluster *ClusterOptions
	// Storage, when set, changes every served space's JetStream storage limits before the
	// accounts are minted; only an authority node holds them.
	Storage *StorageChange
}

// StorageChange changes a space's storage limits (authority.StorageLimits): a nil field keeps
// the limit its keyring holds.
type StorageChange struct {
	Disk, Memory *int64
}

// apply records the change for every space in the keyring, each checked before the first is
// written.
func (c *StorageChange) apply(kr *authority.Keyring, spaces []wire.Space) error {
	next := make([]authority.StorageLimits, len(spaces))
	for i, s := range spaces {
		l, err := kr.StorageLimits(s)
		if err != nil {
			return err
		}
		if c.Disk != nil {
			l.Disk = *c.Disk
		}
		if c.Memory != nil {
			l.Memory = *c.Memory
		}
		if err := l.Validate(); err != nil {
			return err
		}
		next[i] = l
	}
	for i, s := range spaces {
		if err := kr.SetStorageLimits(s, next[i]); err != nil {
			return err
		}
	}
	return nil
}

// UserAuthOptions configure user-auth mode.
type UserAuthOptions struct {
	// DevIdP starts the built-in development identity provider on DevIdPAddr (loopback only)
	// and logs people in with it; otherwise IdP names a standard OIDC provider.
	DevIdP     bool
	DevIdPAddr string
	IdP        authservice.IdP
	// PublicAddr, PublicURL and TrustedProxy place the exchange's public face
	// (authservice.Config).
	PublicAddr   string
	PublicURL    string
	TrustedProxy bool
	// AdvertisedServer is the broker URL other machines are told (authservice.Config).
	AdvertisedServer string
	// RemoteManagerLifetime is how long a remote manager's standing credentials live before
	// their renewal (authservice.Config); remotemgr.StandingLifetime when zero.
	RemoteManagerLifetime time.Duration
	// BearerLifetime, when set, caps every bearer the exchange mints (authservice.Config).
	BearerLifetime time.Duration
}

// DefaultDevIdPAddr is where the development identity provider listens unless told otherwise: a
// fixed port, so its issuer, and every owner derived from it, survive a restart.
const DefaultDevIdPAddr = "127.0.0.1:4780"

// AlreadyRunningError is returned by Up when the directory's mesh is already running.
type AlreadyRunningError struct{ State *State }

// Error implements error.
func (e *AlreadyRunningError) Error() string {
	return fmt.Sprintf("a mesh is already running at %s (pid %d)", e.State.URL, e.State.PID)
}

// Mesh is a running mesh: the embedded broker and its provisioned spaces.
type Mesh struct {
	dir     Dir
	server  *broker.Server
	keyring *authority.Keyring
	// ledgers holds one connected ledger per space, in the order of the state's spaces.
	ledgers []*ledger.Ledger
	daemons *Daemons
	// replicas is how many copies each stream and bucket keeps: 3 on a cluster of three nodes or
	// more, 1 otherwise.
	replicas int
	// auth and devIdP run in user-auth mode.
	auth   *authservice.Service
	devIdP *devIdPHolder
	state  State
	// metrics serves /metrics when Options.MetricsAddr is set.
	metrics *metricsServer
	// control is the control socket's listener, when daemons run.
	control net.Listener
	// Reports are the provisioning reports, by space.
	Reports map[wire.Space]*space.Report
}

// catchUpWait bounds how long a node without keys waits for a route to another node before it
// serves the accounts as it holds them.
const catchUpWait = 10 * time.Second

// Up starts the mesh of d: it loads or creates the keys (auth mode), renders and writes the broker
// configuration, starts the embedded broker, provisions every space under a least-privilege
// provisioner credential, and records the mesh as running. It returns *AlreadyRunningError when
// d's mesh is up, and leaves nothing running when it fails.
//
// The modes differ in what follows the broker: a node without keys serves the broker alone; an
// open mesh provisions its spaces; an authenticated one (static, user-auth, or an authority node
// of a cluster) also opens its ledgers and runs its daemons.
func Up(ctx context.Context, d Dir, o Options) (_ *Mesh, err error) {
	spaces, o, err := o.resolve(d)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.MkdirPrivate(d.Path); err != nil {
		return nil, err
	}
	if st, err := d.ReadState(); err == nil {
		return nil, &AlreadyRunningError{State: st}
	} else if !errors.Is(err, ErrNotRunning) {
		return nil, err
	}
	if o.Restore != nil {
		if spaces, err = prepareRestore(d, o); err != nil {
			return nil, err
		}
		// A restore that fails leaves the new directory as it found it: without keys or store.
		defer func() {
			if err != nil {
				_ = os.RemoveAll(d.AuthDir())
				_ = os.RemoveAll(d.StoreDir())
			}
		}()
	}
	m := &Mesh{dir: d, Reports: map[wire.Space]*space.Report{}, replicas: 1}
	url, err := m.startBroker(ctx, d, o, spaces)
	if err != nil {
		return nil, err
	}
	if !o.keyless() {
		if err := m.serve(ctx, d, o, url, spaces); err != nil {
			m.stopServer()
			return nil, err
		}
	}
	if o.MetricsAddr != "" {
		if err := m.startMetrics(ctx, o.MetricsAddr, url, spaces, o.keyless(), o.Log); err != nil {
			m.stopServer()
			return nil, err
		}
	}
	if o.keyless() {
		return m, m.record(d, o, url, spaces)
	}
	if err := m.record(d, o, url, spaces); err != nil {
		return nil, err
	}
	if o.Cluster != nil && m.keyring != nil {
		m.keepClusterCurrent(ctx, o.Log)
	}
	return m, nil
}

// keyless reports whether o starts a cluster node without keys, from a bundle.
func (o Options) keyless() bool { return o.Cluster != nil && o.Cluster.Bundle != nil }

// resolve checks o against itself and d, and returns the spaces to serve and the options to serve
// them with: a second authority node's bundle is adopted into d (its keys and route secret) and
// the node then starts as the first one did; a node without keys is marked so in d.
func (o Options) resolve(d Dir) ([]wire.Space, Options, error) {
	spaces := o.Spaces
	if len(spaces) == 0 {
		spaces = []wire.Space{DefaultSpace}
	}
	for _, s := range spaces {
		if _, err := wire.ParseSpace(string(s)); err != nil {
			return nil, o, err
		}
		if !o.Open {
			if err := managerServeFits(s); err != nil {
				return nil, o, err
			}
		}
	}
	c := o.Cluster
	switch {
	case o.UserAuth != nil && (o.Open || len(spaces) != 1):
		return nil, o, errors.New("user-auth mode runs an authenticated mesh of one space")
	case o.Storage != nil && (o.Open || (o.keyless() && !c.Bundle.authorityNode())):
		return nil, o, errors.New("storage limits are set on an authority node of an authenticated mesh: a node without keys serves the limits the authority sends")
	case c != nil && o.Open:
		return nil, o, errors.New("an open mesh cannot join a cluster: anyone could join it")
	case o.UserAuth != nil && c != nil && o.UserAuth.DevIdP && strings.HasSuffix(o.UserAuth.DevIdPAddr, ":0"):
		return nil, o, errors.New("on a cluster the development IdP listens at a fixed address (--dev-idp-addr HOST:PORT): every node serves it there in turn, under one issuer")
	case o.UserAuth != nil && o.keyless() && !c.Bundle.authorityNode():
		return nil, o, errors.New("a node without keys cannot answer the auth callout: start it without --user-auth (its bundle makes it serve the user-auth mesh), or from an authority bundle")
	case o.UserAuth != nil && c != nil && c.Bundle != nil && !c.Bundle.userAuth():
		return nil, o, errors.New("the authority bundle is of a mesh not in user-auth mode: write it again (`cotal cluster bundle --authority`) once the first authority node has run `cotal up --user-auth`")
	case o.UserAuth == nil && c != nil && c.Bundle != nil && c.Bundle.authorityNode() && c.Bundle.userAuth():
		return nil, o, errors.New("the authority bundle is of a mesh in user-auth mode: start this authority node with --user-auth and the same identity provider")
	case o.DaemonCredentialLifetime != 0 && o.DaemonCredentialLifetime < ledger.MinHeldLifetime:
		return nil, o, fmt.Errorf("daemon credential lifetime %s: must be at least %s", o.DaemonCredentialLifetime, ledger.MinHeldLifetime)
	}
	if c == nil {
		if name, ok := d.clusterOf(); ok {
			return nil, o, fmt.Errorf("this mesh directory is a node of cluster %q: start it with its cluster flags (--cluster-port, --routes)", name)
		}
		return spaces, o, nil
	}
	switch {
	case c.Bundle != nil && c.Bundle.authorityNode():
		if err := d.adoptAuthorityBundle(c.Bundle); err != nil {
			return nil, o, err
		}
		adopted := *c
		adopted.Bundle = nil
		o.Cluster = &adopted
		return c.Bundle.Spaces, o, nil
	case c.Bundle != nil:
		if err := d.markKeyless(); err != nil {
			return nil, o, err
		}
		return c.Bundle.Spaces, o, nil
	}
	return spaces, o, nil
}

// startBroker renders the broker's configuration for o's mode, writes it to d and starts the
// broker, and returns the URL clients reach it at. An authority's keyring is opened (and told the
// storage limits o sets) to render the accounts it trusts.
func (m *Mesh) startBroker(ctx context.Context, d Dir, o Options, spaces []wire.Space) (string, error) {
	port := o.Port
	switch {
	case port == 0:
		port = broker.DefaultPort
	case port < 0:
		port = 0
	}
	cfg := broker.Config{Host: o.Host, Port: port, StoreDir: d.StoreDir(), TLS: o.TLS, MonitorPort: o.MonitorPort}
	var err error
	if !o.Open && !o.keyless() {
		// Before anything is written: a store it refuses leaves the directory as it was.
		if m.keyring, err = d.OpenKeyring(); err != nil {
			return "", err
		}
		for _, sp := range spaces {
			sk, err := m.keyring.Space(sp)
			if err != nil {
				return "", err
			}
			if err := moveToStoreAccount(cfg.StoreDir, sk, o.Cluster != nil); err != nil {
				return "", err
			}
		}
	}
	if c := o.Cluster; c != nil {
		if cfg.Cluster, err = d.brokerCluster(c); err != nil {
			return "", err
		}
		cfg.ServerName = cmp.Or(c.ServerName, DefaultServerName(port))
	}
	var conf []byte
	switch {
	case o.Open:
		conf, err = broker.RenderOpen(cfg)
	case o.keyless():
		conf, err = broker.RenderAuth(cfg, o.Cluster.Bundle.trust())
	default:
		if o.Storage != nil {
			if err := o.Storage.apply(m.keyring, spaces); err != nil {
				return "", err
			}
		}
		var t broker.Trust
		if t, err = trust(m.keyring, spaces, o.UserAuth != nil); err != nil {
			return "", err
		}
		conf, err = broker.RenderAuth(cfg, t)
	}
	if err != nil {
		return "", err
	}
	if err := atomicfile.Write(d.ConfPath(), conf, 0o600); err != nil {
		return "", err
	}
	if o.keyless() {
		// A node without keys holds the accounts as it stored them or its bundle carried them,
		// without what the others pushed since (a revocation): it takes the cluster's newer ones
		// in before it serves a client.
		synced, err := broker.CatchUp(ctx, d.ConfPath(), broker.ResolverDir(cfg.StoreDir), catchUpWait, o.Log)
		if err != nil {
			return "", err
		}
		if !synced && o.Log != nil {
			o.Log.Warn("no other node of the cluster answered: serving the accounts as this node holds them", "waited", catchUpWait)
		}
	}
	if m.server, err = broker.Start(ctx, d.ConfPath(), o.Log); err != nil {
		return "", err
	}
	if o.TLS != nil {
		return "tls://" + m.server.Addr().String(), nil
	}
	return m.server.ClientURL(), nil
}

// serve brings up what runs over the broker: the cluster's quorum, the provisioned spaces and, on
// an authenticated mesh, the ledgers, the daemons and user-auth mode's auth service. Up stops
// whatever it started when it fails.
func (m *Mesh) serve(ctx context.Context, d Dir, o Options, url string, spaces []wire.Space) error {
	// Each step is logged (at --verbose) with the time since the broker came up, so a start that
	// stalls (a cluster node whose streams are slow to recover) says where.
	began := time.Now()
	step := func(msg string) {
		if o.Log != nil {
			o.Log.Info(msg, "after", time.Since(began).Round(time.Millisecond))
		}
	}
	step("the broker is up")
	if o.Cluster != nil {
		if err := m.awaitQuorum(ctx, len(o.Cluster.Routes)); err != nil {
			return err
		}
		step("the cluster's JetStream is ready")
	}
	if o.Restore != nil {
		if err := m.restoreStreams(ctx, url, spaces, o.Restore); err != nil {
			return err
		}
		step("the backup's streams are restored")
	}
	if err := m.provision(ctx, url, spaces, o.Open); err != nil {
		return err
	}
	step("the spaces are provisioned")
	if o.Open {
		return nil
	}
	if err := m.openLedgers(ctx, url, spaces, o.Cluster != nil); err != nil {
		return err
	}
	step("the ledgers are open")
	if !o.NoDaemons {
		if err := m.startDaemons(ctx, d, o); err != nil {
			return err
		}
		step("the daemons are up and the wardens ready")
		if err := m.serveControl(d, o.Log); err != nil {
			return err
		}
	}
	if o.UserAuth != nil {
		return m.startUserAuth(ctx, url, *o.UserAuth, o.Cluster, o.Log)
	}
	return nil
}

// openLedgers opens a ledger per space and writes the admin credentials; on a cluster it also
// pushes each space's store account (its storage limits), merges the revocations another
// authority node made while this one was down, and pushes those it recorded but never pushed.
func (m *Mesh) openLedgers(ctx context.Context, url string, spaces []wire.Space, cluster bool) error {
	for _, sp := range spaces {
		l, err := ledger.Open(ctx, url, m.keyring, sp)
		if err != nil {
			return err
		}
		m.ledgers = append(m.ledgers, l)
	}
	if err := m.writeAdminCreds(ctx); err != nil {
		return err
	}
	if !cluster {
		return nil
	}
	for _, l := range m.ledgers {
		if err := l.PushStoreAccount(ctx); err != nil {
			return err
		}
	}
	return m.reconcileRevocations(ctx)
}

// startDaemons runs the daemons on the ledgers and waits for the wardens, then starts a
// supervisor per space (on a cluster, one that stands by while another node serves the instance).
func (m *Mesh) startDaemons(ctx context.Context, d Dir, o Options) error {
	var err error
	if m.daemons, err = StartDaemons(m.ledgers, o.DaemonCredentialLifetime, o.NoDelivery, o.Log); err != nil {
		return err
	}
	// The mesh serves once its wardens judge what is stored: a capture made before would go
	// unseen.
	rctx, cancel := context.WithTimeout(ctx, wardenStart)
	err = m.daemons.WardensReady(rctx)
	cancel()
	if err != nil {
		return fmt.Errorf("the warden did not start: %w", err)
	}
	if o.NoManager {
		return nil
	}
	sv := &supervising{dir: d, opts: SupervisorOptions{Name: ManagerActor, MaxSessions: o.MaxSessions}, cluster: o.Cluster != nil}
	m.daemons.supervising = sv
	for _, l := range m.ledgers {
		m.daemons.manages(l.Space())
		if sv.cluster {
			m.daemons.standBySupervisor(d, l, sv.opts, o.Log)
			continue
		}
		if err := m.daemons.startSupervisor(m.daemons.part(PartManager).ctx, d, l, sv.opts, o.Log); err != nil {
			return err
		}
	}
	return nil
}

// keepClusterCurrent records the cluster's peers, so the CLI in this directory reaches the
// cluster through the other nodes while this one is down, and keeps the list and the revocations
// current while the node runs.
func (m *Mesh) keepClusterCurrent(ctx context.Context, log *slog.Logger) {
	if err := m.recordPeers(ctx); err != nil && log != nil {
		log.Warn("record the cluster's peers", "err", err)
	}
	if m.daemons == nil {
		return
	}
	m.daemons.wg.Go(func() {
		every(m.daemons.ctx, sessionSweepEvery, func() {
			if err := m.reconcileRevocations(m.daemons.ctx); err != nil && log != nil {
				log.Warn("reconcile the revocations with the cluster", "err", err)
			}
			if err := m.recordPeers(m.daemons.ctx); err != nil && log != nil {
				log.Warn("record the cluster's peers", "err", err)
			}
		})
	})
}

// record writes the running mesh's state to d; on failure it stops everything it started.
func (m *Mesh) record(d Dir, o Options, url string, spaces []wire.Space) error {
	m.state = State{PID: os.Getpid(), ProcessStart: processStart(os.Getpid()), URL: url, Spaces: spaces, Open: o.Open, StartedAt: time.Now().UTC().Truncate(time.Second),
		Listen: listenAddr(o.Host, m.server.Addr()), TLS: o.TLS != nil}
	if m.auth != nil {
		m.state.ExchangeURL = m.auth.PublicURL
	}
	if c := o.Cluster; c != nil {
		m.state.Cluster, m.state.Keyless = m.server.Cluster().Name, c.Bundle != nil
	}
	if err := d.writeState(&m.state); err != nil {
		m.Shutdown(context.Background()) //nolint:errcheck // the state write's failure is the one to report
		return err
	}
	return nil
}

// provision provisions every space with the defaults of the mesh's mode: an authenticated mesh
// runs the delivery daemon, so channels default to durable; an open one has no daemon and
// defaults to live.
func (m *Mesh) provision(ctx context.Context, url string, spaces []wire.Space, open bool) error {
	yes := true
	defaults := wire.ChannelDefaults{Replay: &yes, DeliveryClass: wire.ClassDurable}
	if open {
		defaults = wire.ChannelDefaults{DeliveryClass: wire.ClassLive}
	}
	for _, s := range spaces {
		rep, err := m.provisionSpace(ctx, url, s, defaults)
		// A node that rejoins a cluster catches its replicas up before it answers for them: a
		// request that times out then is tried again (provisioning is idempotent), a drift never.
		for wait := time.Now().Add(QuorumWait); err != nil && m.replicas > 1 && time.Now().Before(wait) && ctx.Err() == nil; {
			if _, drift := errors.AsType[*space.DriftError](err); drift {
				break
			}
			time.Sleep(time.Second)
			rep, err = m.provisionSpace(ctx, url, s, defaults)
		}
		if err != nil {
			return fmt.Errorf("provision space %s: %w", s, err)
		}
		m.Reports[s] = rep
	}
	return nil
}

// provisionSpace provisions sp: on an authenticated mesh under a provisioner credential minted
// for the setup alone (the auth store it would be issued through does not exist yet), so the
// setup itself runs with least privilege.
func (m *Mesh) provisionSpace(ctx context.Context, url string, sp wire.Space, defaults wire.ChannelDefaults) (*space.Report, error) {
	var nc *nats.Conn
	var err error
	if m.keyring == nil {
		nc, err = dial.Anonymous(ctx, url)
	} else {
		var cred *authority.Credential
		if cred, err = ledger.MintProvisioner(m.keyring, sp); err != nil {
			return nil, err
		}
		nc, err = dial.As(ctx, url, cred)
	}
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream on %s: %w", url, err)
	}
	return space.Provision(ctx, js, sp, defaults, space.WithReplicas(m.replicas))
}

// reconcileRevocations reconciles every space's revocations with the cluster's servers.
func (m *Mesh) reconcileRevocations(ctx context.Context) error {
	var errs []error
	for _, l := range m.ledgers {
		errs = append(errs, l.ReconcileRevocations(ctx))
	}
	return errors.Join(errs...)
}

// AdminCredsName is the creds file Up writes in each space's creds directory: a read-only admin
// credential for watching the mesh (with the nats CLI, say).
const AdminCredsName = "admin"

// writeAdminCreds issues and writes each space's admin credential.
func (m *Mesh) writeAdminCreds(ctx context.Context) error {
	for _, l := range m.ledgers {
		cred, err := l.Issue(ctx, ledger.Request{Profile: authority.ProfileAdmin, Name: AdminCredsName})
		if err != nil {
			return err
		}
		if err := m.dir.WriteCreds(m.dir.CredsPath(l.Space(), AdminCredsName), cred.Creds); err != nil {
			return err
		}
	}
	return nil
}

// URL returns the URL clients connect to.
func (m *Mesh) URL() string { return m.state.URL }

// State returns the mesh's recorded state.
func (m *Mesh) State() State { return m.state }

// daemonsStopWait bounds how long Shutdown waits for the daemons to stop before it stops the
// broker under them.
const daemonsStopWait = 15 * time.Second

// wardenStart bounds how long Up waits for the wardens to watch.
const wardenStart = time.Minute

// WardensReady waits until the warden of every space is watching; it returns at once for a mesh
// run without daemons.
func (m *Mesh) WardensReady(ctx context.Context) error {
	if m.daemons == nil {
		return nil
	}
	return m.daemons.WardensReady(ctx)
}

// Serving reports whether this node's daemons serve space sp: whether its delivery daemon holds
// the space's delivery lease, and whether its supervisor serves the space's manager. On a cluster
// with two authority nodes one serves and the other stands by.
func (m *Mesh) Serving(sp wire.Space) (delivery, manager bool) {
	if m.daemons == nil {
		return false, false
	}
	ds := m.daemons
	ds.mu.Lock()
	defer ds.mu.Unlock()
	d := ds.deliveries[sp]
	return d != nil && d.Active(), slices.ContainsFunc(ds.supervisors, func(s *servedSupervisor) bool { return s.space == sp })
}

// Keyring returns the mesh's minting authority, nil for an open mesh.
func (m *Mesh) Keyring() *authority.Keyring { return m.keyring }

// Ledger returns the mesh's connected ledger of space sp (the first space when sp is empty), nil
// for an open mesh or a space it does not serve. It stays the mesh's: Shutdown closes it.
func (m *Mesh) Ledger(sp wire.Space) *ledger.Ledger {
	for _, l := range m.ledgers {
		if sp == "" || l.Space() == sp {
			return l
		}
	}
	return nil
}

// Shutdown stops the daemons, then the broker (flushing JetStream), and clears the running
// record.
func (m *Mesh) Shutdown(ctx context.Context) error {
	m.dir.clearState(m.state.PID)
	m.stopControl()
	m.stopMetrics(ctx)
	m.stopUserAuth(ctx)
	m.stopDaemons(ctx)
	m.closeLedgers()
	return m.server.Shutdown(ctx)
}

// stopDaemons stops the daemons, if any. They let go of their leases and retire what they ran; on
// a cluster that lost its quorum each of those writes waits out its timeout, so the wait is
// bounded by daemonsStopWait and ctx, and the broker's shutdown that follows ends what is left.
func (m *Mesh) stopDaemons(ctx context.Context) {
	if m.daemons == nil {
		return
	}
	stopped := make(chan struct{})
	go func() { m.daemons.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(daemonsStopWait):
	case <-ctx.Done():
	}
}

func (m *Mesh) closeLedgers() {
	for _, l := range m.ledgers {
		l.Close()
	}
}

func (m *Mesh) stopServer() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m.stopControl()
	m.stopMetrics(ctx)
	m.stopUserAuth(ctx)
	m.stopDaemons(ctx)
	m.closeLedgers()
	_ = m.server.Shutdown(ctx) // already failing; the first error is the one to report
}
