package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/conf"
	"github.com/nats-io/nats-server/v2/server"
)

// readyTimeout bounds how long Start waits for the server to accept clients.
const readyTimeout = 15 * time.Second

// Server is a running embedded nats-server. It is safe for concurrent use.
type Server struct {
	ns *server.Server
}

// Start runs an embedded nats-server from the configuration file at confPath (one rendered by
// RenderAuth or RenderOpen) and waits until it accepts clients. Server logs go to log at the
// levels nats-server uses; nil discards them. A taken port is reported as ErrPortInUse before
// anything starts.
func Start(ctx context.Context, confPath string, log *slog.Logger) (*Server, error) {
	opts, err := server.ProcessConfigFile(confPath)
	if err != nil {
		return nil, fmt.Errorf("load broker config %s: %w", confPath, err)
	}
	opts.NoSigs = true // the process's signals belong to the cotal binary, not to the library
	if opts.Port > 0 {
		if err := checkPortFree(opts.Host, opts.Port); err != nil {
			return nil, err
		}
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("start broker: %w", err)
	}
	if log != nil {
		ns.SetLoggerV2(&logAdapter{log: log}, false, false, false)
	}
	ns.Start()
	deadline := readyTimeout
	if d, ok := ctx.Deadline(); ok {
		deadline = min(deadline, time.Until(d))
	}
	if !ns.ReadyForConnections(deadline) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("start broker: not ready to accept clients within %s (see the broker log)", deadline)
	}
	// The server loads an account when its first client comes, and a second client racing that
	// load can be bound to the account before its JetStream is enabled: its first JetStream
	// request is refused. Loading every preloaded account here, one at a time, closes that race
	// for the accounts the broker starts with.
	for _, account := range preloaded(confPath) {
		_, _ = ns.LookupAccount(account) // an account that fails to load fails again, logged, on its first client
	}
	return &Server{ns: ns}, nil
}

// preloaded lists the accounts the configuration file at confPath preloads into its resolver.
func preloaded(confPath string) []string {
	m, err := conf.ParseFile(confPath)
	if err != nil {
		return nil
	}
	pre, _ := m["resolver_preload"].(map[string]any)
	accounts := make([]string, 0, len(pre))
	for account := range pre {
		accounts = append(accounts, account)
	}
	return accounts
}

func checkPortFree(host string, port int) error {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("start broker on %s: %w: %v", addr, ErrPortInUse, err)
	}
	return l.Close()
}

// ClientURL returns the URL clients connect to, such as nats://127.0.0.1:4222, with the port
// actually chosen when the configuration asked for any free port.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// Name returns the server's name: its name in the cluster, or its generated id on one node.
func (s *Server) Name() string { return s.ns.Name() }

// Addr returns the client listener's address.
func (s *Server) Addr() net.Addr { return s.ns.Addr() }

// Shutdown stops accepting clients, closes every connection and flushes JetStream, returning
// ctx.Err() if ctx ends first (the server then finishes stopping in the background).
func (s *Server) Shutdown(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// logAdapter sends nats-server's log lines to slog.
type logAdapter struct{ log *slog.Logger }

func (l *logAdapter) Noticef(format string, v ...any) { l.log.Info(fmt.Sprintf(format, v...)) }
func (l *logAdapter) Warnf(format string, v ...any)   { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l *logAdapter) Fatalf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l *logAdapter) Errorf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l *logAdapter) Debugf(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *logAdapter) Tracef(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }

// ClusterStatus is what a broker knows of its cluster: its routes and JetStream's meta group.
type ClusterStatus struct {
	// Name is the cluster's name; empty for a broker that serves alone.
	Name string `json:"name,omitempty"`
	// Routes counts the other nodes this one has routes to (a pool of connections counts once).
	Routes int `json:"routes"`
	// MetaLeader names the server leading JetStream's meta group; empty until one is elected.
	MetaLeader string `json:"metaLeader,omitempty"`
	// Size is the meta group's known size: the JetStream nodes.
	Size int `json:"size"`
}

// Cluster reports the broker's cluster.
func (s *Server) Cluster() ClusterStatus {
	st := ClusterStatus{Name: s.ns.ClusterName(), Routes: s.ns.NumRemotes()}
	if js, err := s.ns.Jsz(&server.JSzOptions{}); err == nil && js.Meta != nil {
		st.MetaLeader, st.Size = js.Meta.Leader, js.Meta.Size
	}
	return st
}

// catchUpSync is how often the catch-up broker asks the cluster for the accounts it holds newer,
// and catchUpRounds how many rounds it waits once a route is up.
const (
	catchUpSync   = 500 * time.Millisecond
	catchUpRounds = 4
)

// CatchUp brings a cluster node's account resolver up to the cluster before the node serves a
// client. A node's distributed resolver loads the account JWTs it stored, which lack whatever
// another node pushed while it was down (a revocation), and syncs with the others only on its
// interval: a restarted node would accept a revoked credential until then. CatchUp starts the
// broker of confPath on its resolver directory (ResolverDir of its store) with no client port a
// client knows (a random one on loopback), a random route port, no JetStream and a short sync
// interval, waits for a route and a few sync rounds (the others answer with every account JWT
// newer than the node's, which it stores), and stops it. It returns false when no route came up
// within wait: the cluster's other nodes are down, and the node starts on what it holds.
func CatchUp(ctx context.Context, confPath, resolverDir string, wait time.Duration, log *slog.Logger) (bool, error) {
	opts, err := server.ProcessConfigFile(confPath)
	if err != nil {
		return false, fmt.Errorf("load broker config %s: %w", confPath, err)
	}
	dr, ok := opts.AccountResolver.(*server.DirAccResolver)
	if !ok || opts.Cluster.Name == "" {
		return false, errors.New("catch up: the broker of " + confPath + " is no cluster node with a distributed resolver")
	}
	resolver, err := server.NewDirAccResolver(resolverDir, 0, catchUpSync, server.NoDelete)
	if err != nil {
		return false, fmt.Errorf("catch up: %w", err)
	}
	dr.Close()
	opts.AccountResolver = resolver
	opts.NoSigs, opts.JetStream = true, false
	opts.Host, opts.Port, opts.Cluster.Port = "127.0.0.1", server.RANDOM_PORT, server.RANDOM_PORT
	opts.HTTPPort, opts.HTTPSPort = 0, 0
	ns, err := server.NewServer(opts)
	if err != nil {
		return false, fmt.Errorf("catch up: %w", err)
	}
	if log != nil {
		ns.SetLoggerV2(&logAdapter{log: log}, false, false, false)
	}
	ns.Start()
	defer func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	}()
	deadline := time.Now().Add(wait)
	for ns.NumRoutes() == 0 {
		if time.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-time.After(catchUpRounds * catchUpSync):
	}
	return true, nil
}

// StreamStat is one stream this broker holds, as its JetStream reports it: its size and, for
// each consumer, how many messages wait for it.
type StreamStat struct {
	Name     string
	Messages uint64
	Bytes    uint64
	// Pending is, by consumer name, the messages not yet delivered plus those delivered and not
	// yet acknowledged.
	Pending map[string]uint64
}

// Streams lists the streams this broker holds a copy of, in every account, read in process
// (no connection, no permission). On a cluster a follower's copy may lag its leader's.
func (s *Server) Streams() ([]StreamStat, error) {
	info, err := s.ns.Jsz(&server.JSzOptions{Accounts: true, Streams: true, Consumer: true})
	if err != nil {
		return nil, fmt.Errorf("read the broker's streams: %w", err)
	}
	var out []StreamStat
	for _, acc := range info.AccountDetails {
		for _, sd := range acc.Streams {
			st := StreamStat{Name: sd.Name, Messages: sd.State.Msgs, Bytes: sd.State.Bytes, Pending: map[string]uint64{}}
			for _, c := range sd.Consumer {
				if c != nil {
					st.Pending[c.Name] = c.NumPending + uint64(c.NumAckPending)
				}
			}
			out = append(out, st)
		}
	}
	return out, nil
}
