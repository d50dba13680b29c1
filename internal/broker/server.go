package broker

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

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
	return &Server{ns: ns}, nil
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
