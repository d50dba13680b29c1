// Package up implements `cotal up`: run a mesh from the project's .cotal directory.
package up

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/backup"
	"github.com/gocotal/cotal/internal/broker"
	clibackup "github.com/gocotal/cotal/internal/cli/backup"
	detachpkg "github.com/gocotal/cotal/internal/cli/detach"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/remotemgr"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/internal/userauth/oidc"
	"github.com/gocotal/cotal/wire"
)

// Options are the inputs of `cotal up`.
type Options struct {
	IO     *iostreams.IOStreams
	Dir    string
	Spaces []string
	Host   string
	Port   int
	Open   bool
	// MonitorPort serves the broker's monitoring endpoints on loopback.
	MonitorPort int
	// Metrics is the host:port /metrics is served at.
	Metrics string
	// Restore is a backup to start the mesh from, in a new directory; PassphraseFile opens its
	// keys.
	Restore, PassphraseFile string
	Detach                  bool
	TLSCert                 string
	TLSKey                  string
	Verbose                 bool
	// NoManager leaves the supervisor out, for `cotal supervise` to run beside the mesh.
	NoManager bool
	// MaxSessions is each supervisor's ceiling of attach sessions.
	MaxSessions int
	// NoDelivery leaves the delivery daemon out, for `cotal deliver` to run beside the mesh.
	NoDelivery bool
	// DaemonLifetime is the lifetime of the daemons' credentials.
	DaemonLifetime time.Duration
	// UserAuth runs the mesh in user-auth mode; DevIdP with the built-in development IdP on
	// DevIdPAddr, otherwise with the OIDC provider IdP and its client ClientID.
	UserAuth   bool
	DevIdP     bool
	DevIdPAddr string
	IdP        string
	ClientID   string
	// ExchangePort is the exchange's public face's port (0: any free one); ExchangeURL the URL
	// other machines reach it at, behind a TLS proxy.
	ExchangePort int
	ExchangeURL  string
	TrustedProxy bool
	// AdvertisedServer is the broker URL other machines are told, when not the one up records.
	AdvertisedServer string
	// RemoteManagerLifetime is the lifetime of remote managers' standing credentials.
	RemoteManagerLifetime time.Duration
	// BearerLifetime caps the bearers the exchange mints.
	BearerLifetime time.Duration
	// ClusterName, ClusterPort, Routes and ServerName join the node to a NATS cluster; a node
	// without keys starts from ClusterBundle.
	ClusterName   string
	ClusterPort   int
	Routes        []string
	ServerName    string
	ClusterBundle string
	// MaxDisk and MaxMemory, when set, are each space's JetStream storage limits (parseSize).
	MaxDisk   string
	MaxMemory string
	// File is a manifest (cotal.yaml) whose team the new mesh runs; DryRun prints its plan and
	// changes nothing.
	File   string
	DryRun bool
	// setFlags are the flags given on the command line as --name=value, for a detached start to
	// pass on.
	setFlags []string
	factory  *factory.Factory
}

// detachWait bounds how long a detached start may take before `up` gives up on it.
const detachWait = 60 * time.Second

// NewCmdUp returns the `cotal up` command. runF runs it; nil means upRun.
func NewCmdUp(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{IO: f.IO, factory: f}
	cmd := &cobra.Command{
		Use:   "up [-f cotal.yaml]",
		Short: "Run a mesh: an embedded NATS broker with the space provisioned",
		Long: "Run a mesh from this project's .cotal directory (found by walking up from the current\n" +
			"directory; --dir or $COTAL_DIR override): an embedded nats-server with JetStream, one NATS\n" +
			"account per space, and least-privilege credentials the broker enforces. It runs in the\n" +
			"foreground until Ctrl-C, or in the background with --detach. On a mesh that already runs\n" +
			"there, it starts again the parts `cotal down delivery|manager` stopped.\n\n" +
			"With -f cotal.yaml, the mesh is a fresh one for the manifest's team: its space, broker\n" +
			"address and channels come from the file (flags override them), every channel is seeded,\n" +
			"and every agent is launched through the mesh's manager, each with one least-privilege\n" +
			"credential (written to the mesh directory's creds folder as NAME.creds). It refuses when a\n" +
			"mesh already runs there or anything answers at the address; --dry-run prints the plan.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.setFlags = detachpkg.Given(cmd.Flags())
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return upRun(cmd.Context(), o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Dir, "dir", "", "the mesh directory (default: the nearest .cotal, or ./.cotal)")
	fs.StringSliceVar(&o.Spaces, "space", []string{string(mesh.DefaultSpace)}, "spaces to serve (repeat or comma-separate)")
	fs.StringVar(&o.Host, "host", broker.DefaultHost, "address to listen on (beyond loopback, use TLS: up warns without it)")
	fs.IntVar(&o.Port, "port", broker.DefaultPort, "client port (0 picks a free port)")
	fs.IntVar(&o.MonitorPort, "monitor-port", 0, "serve nats-server's monitoring endpoints (/varz, /jsz, /connz) on 127.0.0.1 at this port")
	fs.StringVar(&o.Metrics, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics (host:port; a host beyond loopback exposes them to the network)")
	fs.StringVar(&o.Restore, "restore", "", "start the mesh in a new directory from this backup (`cotal backup create`)")
	fs.StringVar(&o.PassphraseFile, "passphrase-file", "", "with --restore: the backup's passphrase, on this file's first line (default: $"+clibackup.EnvPassphrase+")")
	fs.BoolVar(&o.Open, "open", false, "run without authentication (loopback only; no security)")
	fs.BoolVar(&o.Detach, "detach", false, "run in the background, logging to .cotal/cotal.log")
	fs.StringVar(&o.TLSCert, "tls-cert", "", "server certificate file: clients must then use TLS")
	fs.StringVar(&o.TLSKey, "tls-key", "", "server key file, with --tls-cert")
	fs.BoolVar(&o.Verbose, "verbose", false, "log the broker's notices, not only its warnings")
	fs.BoolVar(&o.NoManager, "no-manager", false, "do not run the supervisors (run cotal supervise beside the mesh)")
	fs.IntVar(&o.MaxSessions, "max-sessions", manager.DefaultMaxSessions, "each supervisor's ceiling of attach sessions")
	fs.BoolVar(&o.NoDelivery, "no-delivery", false, "do not run the delivery daemon (run cotal deliver beside the mesh)")
	fs.DurationVar(&o.DaemonLifetime, "daemon-credential-lifetime", authority.DaemonLifetime, "lifetime of the daemons' credentials, each renewed at two thirds of it")
	fs.BoolVar(&o.UserAuth, "user-auth", false, "user-auth mode: people log in with an identity provider (cotal login) and run remote managers (cotal supervise --mesh)")
	fs.BoolVar(&o.DevIdP, "dev-idp", false, "with --user-auth: run the built-in development identity provider (loopback only; anyone who can reach it logs in as anyone)")
	fs.StringVar(&o.DevIdPAddr, "dev-idp-addr", mesh.DefaultDevIdPAddr, "with --dev-idp: where the development identity provider listens (loopback)")
	fs.StringVar(&o.IdP, "idp", "", "with --user-auth: the OIDC issuer people log in with (device flow)")
	fs.StringVar(&o.ClientID, "client-id", "cotal-cli", "with --idp: the OIDC client id of the cotal CLI")
	fs.IntVar(&o.ExchangePort, "exchange-public-port", 0, "with --user-auth: the exchange's public face port on 127.0.0.1 (0 picks a free port)")
	fs.StringVar(&o.ExchangeURL, "exchange-public-url", "", "with --user-auth: the https URL a TLS proxy serves the public face at, for other machines")
	fs.BoolVar(&o.TrustedProxy, "exchange-trusted-proxy", false, "with --exchange-public-url: take callers' addresses from the proxy's X-Forwarded-For")
	fs.DurationVar(&o.BearerLifetime, "bearer-lifetime", userauth.MaxBearerLifetime, "with --user-auth: the longest a bearer the exchange mints lives (people's and their agents' connections renew within it)")
	fs.DurationVar(&o.RemoteManagerLifetime, "remote-manager-lifetime", remotemgr.StandingLifetime, "with --user-auth: lifetime of a remote manager's standing credentials, each renewed at three quarters of it")
	fs.StringVar(&o.ClusterName, "cluster-name", "", "run this node as one of the NATS cluster of this name (with --cluster-port and --routes)")
	fs.IntVar(&o.ClusterPort, "cluster-port", 0, "with --cluster-name or --cluster-bundle: the port other nodes route to")
	fs.StringSliceVar(&o.Routes, "routes", nil, "with --cluster-port: the seed routes, nats://HOST:PORT (comma-separate)")
	fs.StringVar(&o.ServerName, "server-name", "", "with --cluster-port: this node's name in the cluster (default: host name and client port)")
	fs.StringVar(&o.ClusterBundle, "cluster-bundle", "", "start a node without keys from this bundle (cotal cluster bundle on an authority node)")
	fs.StringVar(&o.AdvertisedServer, "advertised-server", "", "with --user-auth: the broker URL (nats://, tls://, ws://, wss://) other machines are told, when not the one up listens at")
	fs.StringVar(&o.MaxDisk, "max-disk", "", "on an authority node: each space's JetStream file storage limit, over every replica (e.g. 64GiB, or unlimited; default: what the keyring holds, 16GiB at first)")
	fs.StringVarP(&o.File, "file", "f", "", "a manifest (cotal.yaml): bring up a fresh mesh running its team")
	fs.BoolVar(&o.DryRun, "dry-run", false, "with -f: print the plan and change nothing")
	fs.StringVar(&o.MaxMemory, "max-memory", "", "on an authority node: each space's JetStream memory storage limit (e.g. 1GiB, or unlimited; default: what the keyring holds, 256MiB at first)")
	return cmd
}

// storage returns the change to each space's storage limits that --max-disk and --max-memory
// ask for, nil when neither is given.
func (o *Options) storage() (*mesh.StorageChange, error) {
	if o.MaxDisk == "" && o.MaxMemory == "" {
		return nil, nil
	}
	if o.Open {
		return nil, &exit.UsageError{Err: errors.New("--max-disk and --max-memory bound an authenticated mesh's accounts; an open mesh has none")}
	}
	c := &mesh.StorageChange{}
	for _, f := range []struct {
		name, v string
		min     int64
		into    **int64
	}{{"--max-disk", o.MaxDisk, authority.MinDiskLimit, &c.Disk}, {"--max-memory", o.MaxMemory, authority.MinMemoryLimit, &c.Memory}} {
		if f.v == "" {
			continue
		}
		n, err := parseSize(f.v)
		if err != nil {
			return nil, &exit.UsageError{Err: fmt.Errorf("%s: %w", f.name, err)}
		}
		if n >= 0 && n < f.min {
			return nil, &exit.UsageError{Err: fmt.Errorf("%s %s: a space needs at least %d MiB, or unlimited", f.name, f.v, f.min>>20)}
		}
		*f.into = &n
	}
	return c, nil
}

func (o *Options) meshOptions() (mo mesh.Options, err error) {
	for _, s := range o.Spaces {
		sp, err := wire.ParseSpace(s)
		if err != nil {
			return mo, &exit.UsageError{Err: fmt.Errorf("--space: %w", err)}
		}
		mo.Spaces = append(mo.Spaces, sp)
	}
	if o.Port < 0 || o.Port > 65535 {
		return mo, &exit.UsageError{Err: fmt.Errorf("--port %d is outside 0-65535", o.Port)}
	}
	if o.MonitorPort < 0 || o.MonitorPort > 65535 || o.MonitorPort != 0 && o.MonitorPort == o.Port {
		return mo, &exit.UsageError{Err: fmt.Errorf("--monitor-port %d: must be 1-65535 and not the client port", o.MonitorPort)}
	}
	mo.MonitorPort = o.MonitorPort
	if o.Restore != "" {
		a, err := backup.Open(o.Restore)
		if err != nil {
			return mo, &exit.UsageError{Err: fmt.Errorf("--restore: %w", err)}
		}
		pass, err := clibackup.Passphrase(o.PassphraseFile)
		if err != nil {
			return mo, err
		}
		mo.Restore = &mesh.Restore{Archive: a, Passphrase: pass}
		// The backup names the spaces: the --space default gives way to it.
		if len(mo.Spaces) == 1 && mo.Spaces[0] == mesh.DefaultSpace {
			mo.Spaces = nil
		}
	} else if o.PassphraseFile != "" {
		return mo, &exit.UsageError{Err: errors.New("--passphrase-file goes with --restore")}
	}
	if o.Metrics != "" {
		if err := checkListenAddr(o.Metrics); err != nil {
			return mo, &exit.UsageError{Err: fmt.Errorf("--metrics %q: %w", o.Metrics, err)}
		}
		mo.MetricsAddr = o.Metrics
	}
	if o.DaemonLifetime < ledger.MinHeldLifetime {
		return mo, &exit.UsageError{Err: fmt.Errorf("--daemon-credential-lifetime %s: must be at least %s", o.DaemonLifetime, ledger.MinHeldLifetime)}
	}
	mo.Host, mo.Port, mo.Open, mo.NoManager, mo.DaemonCredentialLifetime = o.Host, o.Port, o.Open, o.NoManager, o.DaemonLifetime
	mo.NoDelivery = o.NoDelivery
	if o.MaxSessions < 1 {
		return mo, &exit.UsageError{Err: fmt.Errorf("--max-sessions %d: must be at least 1", o.MaxSessions)}
	}
	mo.MaxSessions = o.MaxSessions
	if mo.Storage, err = o.storage(); err != nil {
		return mo, err
	}
	ua, err := o.userAuth()
	if err != nil {
		return mo, err
	}
	mo.UserAuth = ua
	if mo.Cluster, err = o.cluster(); err != nil {
		return mo, err
	}
	if o.Port == 0 {
		mo.Port = -1 // any free port
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return mo, &exit.UsageError{Err: errors.New("--tls-cert and --tls-key go together")}
	}
	if o.TLSCert != "" {
		cert, err := filepath.Abs(o.TLSCert)
		if err != nil {
			return mo, err
		}
		key, err := filepath.Abs(o.TLSKey)
		if err != nil {
			return mo, err
		}
		mo.TLS = &broker.TLSConfig{CertFile: cert, KeyFile: key}
	}
	return mo, nil
}

// serverName is what --server-name takes.
var serverName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// cluster returns the cluster options the flags ask for, nil without --cluster-port.
func (o *Options) cluster() (*mesh.ClusterOptions, error) {
	if o.ClusterPort == 0 {
		if o.ClusterName != "" || len(o.Routes) > 0 || o.ServerName != "" || o.ClusterBundle != "" {
			return nil, &exit.UsageError{Err: errors.New("--cluster-name, --routes, --server-name and --cluster-bundle go with --cluster-port")}
		}
		return nil, nil
	}
	switch {
	case o.ClusterPort < 1 || o.ClusterPort > 65535:
		return nil, &exit.UsageError{Err: fmt.Errorf("--cluster-port %d is outside 1-65535", o.ClusterPort)}
	case o.ClusterName == "" && o.ClusterBundle == "":
		return nil, &exit.UsageError{Err: errors.New("--cluster-port needs --cluster-name (an authority node) or --cluster-bundle (a node without keys)")}
	case o.Open:
		return nil, &exit.UsageError{Err: errors.New("--open cannot join a cluster: anyone could join it")}
	case o.Port == 0 && o.ServerName == "":
		return nil, &exit.UsageError{Err: errors.New("--port 0 with --cluster-port needs --server-name: a node's name must survive its restarts")}
	}
	if o.ServerName != "" && !serverName.MatchString(o.ServerName) {
		return nil, &exit.UsageError{Err: fmt.Errorf("--server-name %q: must be 1 to 64 of A-Z a-z 0-9 _ -", o.ServerName)}
	}
	co := &mesh.ClusterOptions{Name: o.ClusterName, Port: o.ClusterPort, Routes: o.Routes, ServerName: o.ServerName}
	for _, r := range o.Routes {
		u, err := url.Parse(r)
		if err != nil || u.Scheme != "nats" || u.Hostname() == "" || u.Port() == "" || u.User != nil || (u.Path != "" && u.Path != "/") {
			return nil, &exit.UsageError{Err: fmt.Errorf("--routes %q: each route must be nats://HOST:PORT", r)}
		}
	}
	if o.ClusterBundle != "" {
		b, err := mesh.ReadBundle(o.ClusterBundle)
		if err != nil {
			return nil, &exit.UsageError{Err: err}
		}
		co.Bundle = b
	}
	return co, nil
}

// minBearerLifetime is the shortest --bearer-lifetime: a bearer must outlive the connect it is
// fetched for.
const minBearerLifetime = 10 * time.Second

// userAuth returns the user-auth options the flags ask for, nil without --user-auth.
func (o *Options) userAuth() (*mesh.UserAuthOptions, error) {
	if !o.UserAuth {
		if o.DevIdP || o.IdP != "" || o.ExchangeURL != "" || o.ExchangePort != 0 || o.TrustedProxy || o.AdvertisedServer != "" ||
			o.RemoteManagerLifetime != remotemgr.StandingLifetime || o.BearerLifetime != userauth.MaxBearerLifetime {
			return nil, &exit.UsageError{Err: errors.New("--dev-idp, --idp, --advertised-server, --bearer-lifetime, --remote-manager-lifetime and the --exchange-public flags go with --user-auth")}
		}
		return nil, nil
	}
	switch {
	case o.Open:
		return nil, &exit.UsageError{Err: errors.New("--user-auth and --open exclude each other")}
	case o.DevIdP == (o.IdP != ""):
		return nil, &exit.UsageError{Err: errors.New("--user-auth needs an identity provider: --dev-idp, or --idp ISSUER")}
	case len(o.Spaces) != 1:
		return nil, &exit.UsageError{Err: errors.New("--user-auth serves one space: give one --space")}
	case o.ExchangePort < 0 || o.ExchangePort > 65535:
		return nil, &exit.UsageError{Err: fmt.Errorf("--exchange-public-port %d is outside 0-65535", o.ExchangePort)}
	case o.TrustedProxy && o.ExchangeURL == "":
		return nil, &exit.UsageError{Err: errors.New("--exchange-trusted-proxy goes with --exchange-public-url")}
	case o.BearerLifetime < minBearerLifetime || o.BearerLifetime > userauth.MaxBearerLifetime:
		return nil, &exit.UsageError{Err: fmt.Errorf("--bearer-lifetime %s: must be from %s to %s", o.BearerLifetime, minBearerLifetime, userauth.MaxBearerLifetime)}
	case o.RemoteManagerLifetime < remotemgr.MinStandingLifetime || o.RemoteManagerLifetime > remotemgr.StandingLifetime:
		return nil, &exit.UsageError{Err: fmt.Errorf("--remote-manager-lifetime %s: must be from %s to %s", o.RemoteManagerLifetime, remotemgr.MinStandingLifetime, remotemgr.StandingLifetime)}
	}
	if o.ExchangeURL != "" {
		if u, err := url.Parse(o.ExchangeURL); err != nil || u.Scheme != "https" || u.RawQuery != "" || oidc.CheckURL(o.ExchangeURL) != nil {
			return nil, &exit.UsageError{Err: fmt.Errorf("--exchange-public-url %q: must be an https URL with no query, user or fragment", o.ExchangeURL)}
		}
	}
	if o.AdvertisedServer != "" {
		u, err := url.Parse(o.AdvertisedServer)
		if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || !slices.Contains([]string{"nats", "tls", "ws", "wss"}, u.Scheme) {
			return nil, &exit.UsageError{Err: fmt.Errorf("--advertised-server %q: must be a nats://, tls://, ws:// or wss:// URL with a host", o.AdvertisedServer)}
		}
	}
	if o.IdP != "" {
		if err := oidc.CheckURL(o.IdP); err != nil {
			return nil, &exit.UsageError{Err: fmt.Errorf("--idp %s: %w", o.IdP, err)}
		}
	}
	return &mesh.UserAuthOptions{
		DevIdP: o.DevIdP, DevIdPAddr: o.DevIdPAddr, IdP: authservice.IdP{Issuer: o.IdP, ClientID: o.ClientID},
		PublicAddr: fmt.Sprintf("127.0.0.1:%d", o.ExchangePort), PublicURL: o.ExchangeURL, TrustedProxy: o.TrustedProxy,
		AdvertisedServer: o.AdvertisedServer, RemoteManagerLifetime: o.RemoteManagerLifetime, BearerLifetime: o.BearerLifetime,
	}, nil
}

// restartParts answers `up` on a running mesh: it starts again each part of the mesh process's
// daemons that `cotal down PART` stopped, and says what runs.
func restartParts(ctx context.Context, o *Options, d mesh.Dir, st *mesh.State) error {
	parts, err := mesh.RunningParts(ctx, d)
	if errors.Is(err, mesh.ErrNoControl) { // an open mesh, or a node without keys: no parts
		fmt.Fprintf(o.IO.ErrOut, "a mesh is already running at %s (pid %d); `cotal down` stops it\n", st.URL, st.PID)
		return nil
	}
	if err != nil {
		return err
	}
	var stopped []mesh.Part
	for _, p := range parts {
		if p.State == mesh.PartStopped && !slices.Contains(stopped, mesh.Part(p.Name)) {
			stopped = append(stopped, mesh.Part(p.Name))
		}
	}
	if len(stopped) == 0 {
		fmt.Fprintf(o.IO.ErrOut, "a mesh is already running at %s (pid %d), every part serving; `cotal down` stops it\n", st.URL, st.PID)
		return nil
	}
	var errs []error
	for _, p := range stopped {
		now, err := mesh.StartPart(ctx, d, p)
		if err != nil {
			errs = append(errs, fmt.Errorf("start the %s again: %w", p, err))
			continue
		}
		parts = now
	}
	for _, p := range parts { // standing by: it serves once it holds its lease
		if slices.Contains(stopped, mesh.Part(p.Name)) {
			fmt.Fprintf(o.IO.ErrOut, "%s of space %s: %s\n", p.Name, p.Space, p.State)
		}
	}
	return errors.Join(errs...)
}

func upRun(ctx context.Context, o *Options) error {
	switch {
	case o.File != "":
		return upManifest(ctx, o)
	case o.DryRun:
		return &exit.UsageError{Err: errors.New("--dry-run goes with -f")}
	}
	mo, d, err := o.prepare()
	if err != nil {
		return err
	}
	if st, err := d.ReadState(); err == nil {
		return restartParts(ctx, o, d, st)
	}
	if o.Detach {
		return detach(ctx, o, d)
	}
	err = o.serve(ctx, d, mo, nil)
	var running *mesh.AlreadyRunningError
	if errors.As(err, &running) {
		fmt.Fprintf(o.IO.ErrOut, "%v; `cotal down` stops it\n", err)
		return nil
	}
	return err
}

// checkListenAddr checks that addr is a host:port to listen on: a port of 1-65535 (0 would pick
// one no scraper could be told of) on an IP address, a host name or, empty, every interface.
func checkListenAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port, such as 127.0.0.1:9464")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q: must be 1-65535", port)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("host %q: not a host name or an address", host)
	}
	return nil
}

// prepare resolves the mesh options and the mesh directory o names.
func (o *Options) prepare() (mesh.Options, mesh.Dir, error) {
	mo, err := o.meshOptions()
	if err != nil {
		return mesh.Options{}, mesh.Dir{}, err
	}
	d, err := mesh.ProjectDir(o.Dir, ".")
	return mo, d, err
}

// serve brings the mesh up in d in the foreground, logging to the terminal, says where it is,
// runs then on it (when set; its failure is reported, and the mesh keeps running), and stops the
// mesh once ctx ends.
func (o *Options) serve(ctx context.Context, d mesh.Dir, mo mesh.Options, then func() error) error {
	level := slog.LevelWarn
	if o.Verbose {
		level = slog.LevelInfo
	}
	mo.Log = slog.New(slog.NewTextHandler(o.IO.ErrOut, &slog.HandlerOptions{Level: level}))
	m, err := mesh.Up(ctx, d, mo)
	if err != nil {
		return err
	}
	credsDir := ""
	if !m.State().Open {
		credsDir = d.CredsDir(m.State().Spaces[0])
	}
	metrics := ""
	if a := m.MetricsAddr(); a != nil {
		metrics = a.String()
	}
	printUp(o.IO.Out, m.State(), credsDir, metrics)
	warnExposure(o.IO.ErrOut, m.State().Exposure())
	if then != nil {
		if err := then(); err != nil {
			fmt.Fprintf(o.IO.ErrOut, "%v\n", err)
		}
	}
	<-ctx.Done()
	fmt.Fprintln(o.IO.ErrOut, "stopping the mesh")
	return shutdown(m)
}

func printUp(w io.Writer, st mesh.State, credsDir, metrics string) {
	mode := "authenticated"
	if st.Open {
		mode = "open (no authentication)"
	}
	fmt.Fprintf(w, "cotal mesh up (%s)\n", mode)
	fmt.Fprintf(w, "  url:    %s\n", st.URL)
	if st.ExchangeURL != "" {
		fmt.Fprintf(w, "  exchange: %s (user-auth: `cotal login --mesh` and `cotal supervise --mesh` take it)\n", st.ExchangeURL)
	}
	for _, sp := range st.Spaces {
		fmt.Fprintf(w, "  space:  %s\n", sp)
	}
	if credsDir != "" {
		fmt.Fprintf(w, "  creds:  %s (admin.creds reads everything; `cotal mint NAME` makes an agent)\n", credsDir)
	}
	if metrics != "" {
		fmt.Fprintf(w, "  metrics: http://%s/metrics\n", metrics)
	}
	fmt.Fprintf(w, "  stop:   Ctrl-C, or `cotal down`\n")
}

// warnExposure warns on w when the broker can be reached from the network without TLS. It only
// warns: scripts that listen on a trusted network keep working. The broker still authenticates
// every client; what is lost is confidentiality and integrity on the path.
func warnExposure(w io.Writer, e mesh.Exposure) {
	if e.Loopback || e.TLS {
		return
	}
	fmt.Fprintf(w, "warning: the broker listens on %s without TLS, reachable from the network.\n", e.Listen)
	fmt.Fprint(w, "  Its traffic is in clear: anyone on the network path can read and alter every message and\n"+
		"  presence row, and read the credential JWTs clients present. Seeds never cross the wire (a\n"+
		"  client signs the server's nonce), so a captured JWT alone does not connect. Use --tls-cert\n"+
		"  and --tls-key, or --host 127.0.0.1 to stay on this machine.\n")
}

func shutdown(m *mesh.Mesh) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return m.Shutdown(ctx)
}

// detach starts `cotal up` again in the background, as its own session so a closed terminal does
// not stop it, with its output in the log, and waits until it records itself as running.
func detach(ctx context.Context, o *Options, d mesh.Dir) error {
	if err := atomicfile.MkdirPrivate(d.Path); err != nil {
		return err
	}
	// The child runs in this directory, so relative paths in the flags mean the same to it; --dir
	// is the directory found here, wherever the child would look.
	pid, exited, err := detachpkg.Start(append([]string{"up", "--dir", d.Path}, o.setFlags...), d.LogPath())
	if err != nil {
		return err
	}
	wait := detachWait
	if o.ClusterPort != 0 {
		wait += mesh.QuorumWait // the first nodes wait for a majority of the cluster
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if st, err := d.ReadState(); err == nil && st.PID == pid {
			credsDir := ""
			if !st.Open {
				credsDir = d.CredsDir(st.Spaces[0])
			}
			printUp(o.IO.Out, *st, credsDir, o.Metrics)
			fmt.Fprintf(o.IO.Out, "  pid:    %d, logging to %s\n", pid, d.LogPath())
			warnExposure(o.IO.ErrOut, st.Exposure())
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the detached mesh exited (%v); see %s", err, d.LogPath())
		case <-deadline.C:
			return fmt.Errorf("the detached mesh (pid %d) did not come up within %s; see %s", pid, wait, d.LogPath())
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
