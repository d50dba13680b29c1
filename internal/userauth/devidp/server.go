package devidp

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

const (
	// DefaultClientID is the client id the server accepts when Options.ClientID is empty.
	DefaultClientID = "cotal-cli"
	// defaultAddr listens on an ephemeral loopback port.
	defaultAddr = "127.0.0.1:0"
	// defaultTokenLifetime is the lifetime of an ID token.
	defaultTokenLifetime = 10 * time.Minute
	// defaultInterval is the device poll interval.
	defaultInterval = time.Second
	// deviceCodeLifetime is how long a device code may wait for approval.
	deviceCodeLifetime = 10 * time.Minute
	// refreshLifetime is how long a refresh token can be redeemed.
	refreshLifetime = 24 * time.Hour
	// maxBody caps every request body.
	maxBody = 64 << 10
	// maxPending caps device codes awaiting approval, and maxRefresh live refresh tokens.
	maxPending = 1000
	maxRefresh = 10000
)

// Options configures a [Start]ed server. The zero value gives the defaults.
type Options struct {
	// Addr is the listen address; default 127.0.0.1:0 (an ephemeral port). Its host must be a
	// loopback address or "localhost".
	Addr string
	// ClientID is the only client id accepted; default "cotal-cli".
	ClientID string
	// TokenLifetime is the lifetime of an ID token; default 10 minutes.
	TokenLifetime time.Duration
	// Interval is the least time between two token polls for a device code; a faster poll is
	// answered slow_down. It is advertised rounded up to whole seconds, since RFC 8628 counts
	// seconds; default 1 s. Tests set a shorter one and shorten the client's interval to match.
	Interval time.Duration
	// Log receives a line per login event; default discard.
	Log *slog.Logger
	// Key signs the ID tokens; a fresh key when nil (LoadOrCreateKey keeps one across starts).
	Key ed25519.PrivateKey

	now func() time.Time // the clock; tests replace it
}

// Server is a running development provider. Its methods are safe for concurrent use.
type Server struct {
	base     string
	clientID string
	lifetime time.Duration
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	key ed25519.PrivateKey
	kid string

	srv       *http.Server
	done      chan struct{} // closed when Serve returns
	stopWatch func() bool   // stops the ctx watcher
	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex               // guards the maps below
	devices map[string]*deviceGrant  // by device code
	codes   map[string]string        // user code (normalised) → device code
	refresh map[string]*refreshGrant // by refresh token
	users   map[string]time.Time     // user name → first seen
}

// Start listens on o.Addr and serves until ctx is done or Close is called. It fails if the address
// is not loopback, an option is out of range, or the listener cannot be opened.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Addr == "" {
		o.Addr = defaultAddr
	}
	if err := checkLoopbackAddr(o.Addr); err != nil {
		return nil, fmt.Errorf("start dev idp: %w", err)
	}
	if o.ClientID == "" {
		o.ClientID = DefaultClientID
	}
	if o.TokenLifetime == 0 {
		o.TokenLifetime = defaultTokenLifetime
	}
	if o.TokenLifetime < time.Second || o.TokenLifetime > 24*time.Hour {
		return nil, fmt.Errorf("start dev idp: token lifetime %s is outside 1s..24h", o.TokenLifetime)
	}
	if o.Interval == 0 {
		o.Interval = defaultInterval
	}
	if o.Interval < 0 || o.Interval > time.Minute {
		return nil, fmt.Errorf("start dev idp: interval %s is outside 0..1m", o.Interval)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.now == nil {
		o.now = time.Now
	}
	key := o.Key
	if key == nil {
		var err error
		if _, key, err = ed25519.GenerateKey(rand.Reader); err != nil {
			return nil, fmt.Errorf("start dev idp: generate key: %w", err)
		}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("start dev idp: %w", err)
	}
	s := &Server{
		base:     "http://" + ln.Addr().String(),
		clientID: o.ClientID,
		lifetime: o.TokenLifetime,
		interval: o.Interval,
		log:      o.Log,
		now:      o.now,
		key:      key,
		kid:      thumbprint(key.Public().(ed25519.PublicKey)),
		done:     make(chan struct{}),
		devices:  map[string]*deviceGrant{},
		codes:    map[string]string{},
		refresh:  map[string]*refreshGrant{},
		users:    map[string]time.Time{},
	}
	s.srv = &http.Server{
		Handler:           s.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    32 << 10,
		ErrorLog:          slog.NewLogLogger(o.Log.Handler(), slog.LevelWarn),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("dev idp stopped", "err", err)
		}
	}()
	s.stopWatch = context.AfterFunc(ctx, func() { _ = s.shutdown() }) // its error is kept for Close's callers
	s.log.Info("dev idp listening", "issuer", s.base, "client_id", s.clientID)
	return s, nil
}

// URL returns the server's base URL, which is also its issuer: http://127.0.0.1:PORT.
func (s *Server) URL() string { return s.base }

// Close stops the server at once and waits for it to finish. Later calls return the first result.
func (s *Server) Close() error {
	s.stopWatch()
	return s.shutdown()
}

// shutdown closes the HTTP server once and waits for Serve to return.
func (s *Server) shutdown() error {
	s.closeOnce.Do(func() {
		s.closeErr = s.srv.Close()
		<-s.done
	})
	return s.closeErr
}

// checkLoopbackAddr accepts host:port whose host is a loopback IP or "localhost".
func checkLoopbackAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if !isLoopbackHost(host) {
		return fmt.Errorf("listen address %q is not loopback", addr)
	}
	return nil
}

// isLoopbackHost reports whether host (no port, no brackets) names the loopback interface.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// hostFromHeader extracts the host name from a Host header value.
func hostFromHeader(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}
