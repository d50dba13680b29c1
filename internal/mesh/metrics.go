package mesh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/metrics"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
)

// metricsActor is the name of the observer the metrics server reads each space's roster as.
const metricsActor = "cotal_metrics"

// scrapeWait bounds what one scrape reads from the mesh.
const scrapeWait = 5 * time.Second

// metricsServer serves the mesh's metrics over HTTP, reading the roster of each space through an
// observer of its own.
type metricsServer struct {
	http    *http.Server
	addr    net.Addr
	rosters map[wire.Space]*cotal.Roster
	clients []*cotal.Client
	// creds are the observers' credentials, revoked when the server stops.
	creds []heldCred
}

// heldCred is a credential with the ledger that issued it.
type heldCred struct {
	l    *ledger.Ledger
	cred *authority.Credential
}

// startMetrics listens on addr and serves the metrics of m's spaces at /metrics: the process's
// counters, and at each scrape the streams the broker holds, each space's agents online and, on
// an authenticated mesh, its credentials by profile and state. A node without keys, which can
// issue no observer, reports its streams alone.
func (m *Mesh) startMetrics(ctx context.Context, addr, url string, spaces []wire.Space, keyless bool, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve metrics on %s: %w", addr, err)
	}
	ms := &metricsServer{addr: ln.Addr(), rosters: map[wire.Space]*cotal.Roster{}}
	m.metrics = ms
	for _, sp := range spaces {
		if keyless {
			break
		}
		opts := []cotal.Option{cotal.WithSpace(string(sp)), cotal.WithPresence(false)}
		if l := m.Ledger(sp); l != nil {
			// A read-only observer whose JWT never leaves this process; it is revoked when the
			// server stops.
			cred, err := l.Issue(ctx, ledger.Request{Profile: authority.ProfileObserver, Name: metricsActor, Expires: -1})
			if err != nil {
				_ = ln.Close()
				return fmt.Errorf("serve metrics: %w", err)
			}
			ms.creds = append(ms.creds, heldCred{l: l, cred: cred})
			opts = append(opts, cotal.WithCredsData(cred.Creds))
		}
		c, err := cotal.Connect(ctx, url, opts...)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("serve metrics: %w", err)
		}
		ms.clients = append(ms.clients, c)
		r, err := c.Roster(ctx)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("serve metrics: %w", err)
		}
		ms.rosters[sp] = r
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler(&meshCollector{m: m, spaces: spaces, rosters: ms.rosters}))
	ms.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logHandler(log), slog.LevelWarn)}
	go func() {
		if err := ms.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && log != nil {
			log.Error("the metrics server stopped", "err", err)
		}
	}()
	return nil
}

// logHandler is log's handler, or one that drops everything when log is nil.
func logHandler(log *slog.Logger) slog.Handler {
	if log == nil {
		return slog.DiscardHandler
	}
	return log.Handler()
}

// MetricsAddr is the address the metrics server listens on; nil when it runs none.
func (m *Mesh) MetricsAddr() net.Addr {
	if m.metrics == nil {
		return nil
	}
	return m.metrics.addr
}

// stopMetrics stops the metrics server, if any, and lets its observers go.
func (m *Mesh) stopMetrics(ctx context.Context) {
	ms := m.metrics
	if ms == nil {
		return
	}
	if ms.http != nil {
		_ = ms.http.Shutdown(ctx) // a scrape cut short is retried by the scraper
	}
	for _, r := range ms.rosters {
		r.Stop()
	}
	for _, c := range ms.clients {
		_ = c.Close(ctx)
	}
	for _, h := range ms.creds {
		_, _ = h.l.Revoke(ctx, h.cred.LifecycleUID, h.cred.CredentialID, "the metrics server stopped")
	}
}

// meshCollector reads, at each scrape, what the mesh holds now.
type meshCollector struct {
	m       *Mesh
	spaces  []wire.Space
	rosters map[wire.Space]*cotal.Roster
}

var (
	descOnline = prometheus.NewDesc("cotal_agents_online",
		"Agents online in the space: a presence row not offline and not stale.", []string{"space"}, nil)
	descMessages = prometheus.NewDesc("cotal_stream_messages",
		"Messages a stream or bucket of the space holds on this node.", []string{"space", "stream"}, nil)
	descBytes = prometheus.NewDesc("cotal_stream_bytes",
		"Bytes a stream or bucket of the space holds on this node.", []string{"space", "stream"}, nil)
	descBacklog = prometheus.NewDesc("cotal_delivery_backlog",
		"Durable channel posts the delivery daemon has not yet handed to their members' inboxes.", []string{"space"}, nil)
	descCredentials = prometheus.NewDesc("cotal_credentials",
		"Credentials the space's ledger issued, by profile and state (active, expired, revoked).", []string{"space", "profile", "state"}, nil)
	descScrapeErrors = prometheus.NewDesc("cotal_scrape_errors",
		"Parts of this scrape that could not be read, by part.", []string{"part"}, nil)
)

// Describe sends the descriptors of what Collect reports.
func (c *meshCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descOnline, descMessages, descBytes, descBacklog, descCredentials, descScrapeErrors} {
		ch <- d
	}
}

// Collect reads the mesh now. A part it cannot read is left out and counted in
// cotal_scrape_errors, so one slow part never fails the whole scrape.
func (c *meshCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeWait)
	defer cancel()
	failed := map[string]float64{"streams": 0, "credentials": 0}
	now := time.Now()
	for sp, r := range c.rosters {
		online := 0
		for _, p := range r.Peers() {
			if p.Online && p.Presence != nil && !p.Presence.Stale(now) {
				online++
			}
		}
		ch <- prometheus.MustNewConstMetric(descOnline, prometheus.GaugeValue, float64(online), string(sp))
	}
	of := map[string]wire.Space{}
	for _, sp := range c.spaces {
		for _, name := range space.Streams(sp) {
			of[name] = sp
		}
	}
	if streams, err := c.m.server.Streams(); err != nil {
		failed["streams"]++
	} else {
		for _, st := range streams {
			sp, ok := of[st.Name]
			if !ok {
				continue
			}
			ch <- prometheus.MustNewConstMetric(descMessages, prometheus.GaugeValue, float64(st.Messages), string(sp), st.Name)
			ch <- prometheus.MustNewConstMetric(descBytes, prometheus.GaugeValue, float64(st.Bytes), string(sp), st.Name)
			if st.Name == sp.ChatStream() {
				if pending, ok := st.Pending[meshwire.FanoutDurable]; ok {
					ch <- prometheus.MustNewConstMetric(descBacklog, prometheus.GaugeValue, float64(pending), string(sp))
				}
			}
		}
	}
	for _, sp := range c.spaces {
		l := c.m.Ledger(sp)
		if l == nil {
			continue
		}
		rows, err := l.Credentials(ctx)
		if err != nil && !errors.Is(err, authstore.ErrCorrupt) { // corrupt rows are `cotal doctor auth`'s
			failed["credentials"]++
			continue
		}
		type key struct{ profile, state string }
		counts := map[key]int{}
		for _, r := range rows {
			state := string(r.State)
			if r.State == authstore.CredActive && r.ExpiresAt != 0 && !now.Before(r.ExpiresAt.Time()) {
				state = "expired"
			}
			counts[key{string(r.Profile), state}]++
		}
		for k, n := range counts {
			ch <- prometheus.MustNewConstMetric(descCredentials, prometheus.GaugeValue, float64(n), string(sp), k.profile, k.state)
		}
	}
	for part, n := range failed {
		ch <- prometheus.MustNewConstMetric(descScrapeErrors, prometheus.GaugeValue, n, part)
	}
}
