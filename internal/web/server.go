// Package web is `cotal web`: a dashboard of one space on loopback. A read-only admin credential
// taps the space's channels, direct messages and anycasts (never the ep rails) and reads their
// history; the browser gets a JSON API under /api/, one live feed of server-sent events at /feed,
// and pages embedded in the binary. Every request passes the gate (gate.go); every message body
// reaches the page rendered as sanitised Markdown (render.go).
package web

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/coremsg"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/wire"
)

// assets are the pages and their scripts and styles.
//
//go:embed assets
var assets embed.FS

// Purge deletes a channel's history, and its registry row, returning how many messages went.
type Purge func(ctx context.Context, channel string) (uint64, error)

// Config is what a dashboard serves.
type Config struct {
	// Client is connected as the read-only admin credential (presence off): its roster and its
	// connection are the dashboard's view.
	Client *cotal.Client
	// Purge is the one write the dashboard allows, through the purger profile; nil refuses it.
	Purge Purge
	// Operator is the person's principal (the one `cotal send` speaks as): the direct messages
	// agents send it wait in NEEDS YOU until it answers. Zero: no question lane.
	Operator wire.Principal
	// Agents reads the managers' agent rows (ps), for the spawns NEEDS YOU shows as given up on;
	// nil: no such lane. AgentsEvery is how often (default DefaultAgentsEvery).
	Agents      func(ctx context.Context) ([]manager.Row, error)
	AgentsEvery time.Duration
	// Runs are the space's workflow runs, shown and answered; nil shows none.
	Runs Runs
	// Addr is where to listen: a loopback host and a port (0: any free one).
	Addr string
	Log  *slog.Logger
}

// Server is a running dashboard.
type Server struct {
	cfg    Config
	space  wire.Space
	js     jetstream.JetStream
	roster *cotal.Roster
	hub    *hub
	gate   *gate
	// questions are the open questions to the operator; escalated, the spawns given up on.
	questions *questions
	escalated escalations
	srv       *http.Server
	subs      []*nats.Subscription
	// done ends the server's goroutines, which wg waits for; stop cancels what they have in
	// flight.
	done chan struct{}
	stop context.CancelFunc
	wg   sync.WaitGroup
	// URL is the launch URL: open it once; its token is burnt for a session cookie.
	URL string
}

// Request limits.
const (
	// maxBody bounds a body a route reads (a channel delete, a run's answer).
	maxBody = 8 << 10
)

// Start serves the dashboard of cfg.Client's space on cfg.Addr, which must be a loopback address.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", cfg.Addr, err)
	}
	if !loopbackName(host) {
		return nil, fmt.Errorf("listen address %q: the dashboard serves loopback only", cfg.Addr)
	}
	js, err := jetstream.New(cfg.Client.Conn())
	if err != nil {
		return nil, err
	}
	roster, err := cfg.Client.Roster(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch the roster: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		roster.Stop()
		return nil, err
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	s := &Server{cfg: cfg, space: cfg.Client.Space(), js: js, roster: roster, hub: newHub(), gate: newGate(port),
		questions: newQuestions(cfg.Operator), done: make(chan struct{})}
	s.URL = fmt.Sprintf("http://127.0.0.1:%s/?k=%s", port, s.gate.launch)
	if err := s.tap(); err != nil {
		ln.Close()
		roster.Stop()
		return nil, err
	}
	s.srv = &http.Server{Handler: s.gate.wrap(s.routes()), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10}
	// The server's own work outlives the start's context, and ends at Close.
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = stop
	s.wg.Go(s.watchRoster)
	s.wg.Go(s.watchMembership)
	s.wg.Go(func() { s.loadQuestions(life) })
	s.wg.Go(func() { s.watchAgents(life) })
	s.wg.Go(func() { _ = s.srv.Serve(ln) })
	return s, nil
}

// Close stops serving, the tap and the roster, and waits (within ctx) for every goroutine the
// server started.
func (s *Server) Close(ctx context.Context) error {
	close(s.done)
	s.stop()
	for _, sub := range s.subs {
		_ = sub.Unsubscribe() // the connection may be gone already
	}
	s.roster.Stop()
	err := s.srv.Shutdown(ctx)
	stopped := make(chan struct{})
	go func() { s.wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		return errors.Join(err, fmt.Errorf("the dashboard's goroutines did not end: %w", ctx.Err()))
	}
	return err
}

// tap subscribes the messaging plane of the space (chat, inst, svc: never the ep rails) and
// publishes each guarded message to the feed.
func (s *Server) tap() error {
	for _, k := range []wire.SubjectKind{wire.KindChat, wire.KindInst, wire.KindSvc} {
		sub, err := s.cfg.Client.Conn().Subscribe(s.space.KindAll(k), func(m *nats.Msg) {
			if !coremsg.Published(m) { // a stored message JetStream delivered onto the feed
				return
			}
			if ev, ok := eventOf(m.Subject, m.Data); ok {
				s.hub.publish("message", ev)
				if s.questions.fold(ev, wire.EpochMillis(time.Now().UnixMilli())) {
					s.hub.publish("questions", s.questions.list())
				}
			}
		})
		if err != nil {
			return fmt.Errorf("tap %s: %w", k, err)
		}
		s.subs = append(s.subs, sub)
	}
	return s.cfg.Client.Conn().Flush()
}

// routes maps the API, the feed and the pages.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/meta", s.meta)
	mux.HandleFunc("GET /api/roster", s.rosterRoute)
	mux.HandleFunc("GET /api/channels", s.channels)
	mux.HandleFunc("GET /api/channels/{name}/history", s.channelHistory)
	mux.HandleFunc("GET /api/dms", s.dms)
	mux.HandleFunc("GET /api/membership", s.membership)
	mux.HandleFunc("GET /api/activity", s.activity)
	mux.HandleFunc("GET /api/needs-you", s.needsYou)
	mux.HandleFunc("POST /api/channel/delete", s.deleteChannel)
	mux.HandleFunc("GET /api/runs", s.runs)
	mux.HandleFunc("GET /api/runs/{id}", s.run)
	mux.HandleFunc("POST /api/runs/{id}/answer", s.answerRun)
	mux.HandleFunc("GET /feed", s.feed)
	pages, _ := fs.Sub(assets, "assets") // the directory is embedded
	files := http.FileServerFS(pages)
	mux.Handle("GET /", files)
	mux.HandleFunc("GET /graph", func(w http.ResponseWriter, r *http.Request) { http.ServeFileFS(w, r, pages, "graph.html") })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Only the two write routes read a body: a channel's delete and a run's answer.
		if r.ContentLength > 0 && !(r.Method == http.MethodPost && (r.URL.Path == "/api/channel/delete" || answerPath(r.URL.Path))) {
			writeError(w, http.StatusRequestEntityTooLarge, "unexpected-body")
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		mux.ServeHTTP(w, r)
	})
}

// writeJSON writes v with status, never cached.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the browser went away; nothing to do
}

// readJSON decodes a request's JSON body into v, refusing another content type, a body over
// maxBody and an unknown field; false when it wrote the refusal.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, "json-only")
		return false
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		if _, big := errors.AsType[*http.MaxBytesError](err); big {
			writeError(w, http.StatusRequestEntityTooLarge, "body-too-large")
			return false
		}
		writeError(w, http.StatusBadRequest, "bad-body", err.Error())
		return false
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "bad-body", err.Error())
		return false
	}
	return true
}

// writeError writes {"error": code} with status, and a reason when one helps.
func writeError(w http.ResponseWriter, status int, code string, reason ...string) {
	body := map[string]string{"error": code}
	if len(reason) > 0 {
		body["reason"] = reason[0]
	}
	writeJSON(w, status, body)
}

// Meta is GET /api/meta.
type Meta struct {
	Space string `json:"space"`
	PID   int    `json:"pid"`
}

func (s *Server) meta(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, Meta{Space: string(s.space), PID: os.Getpid()})
}

func (s *Server) rosterRoute(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, peers(s.roster))
}

// Channel is one row of GET /api/channels: a channel that has messages or a registry row.
type Channel struct {
	Channel  string              `json:"channel"`
	Messages uint64              `json:"messages"`
	Config   *wire.ChannelConfig `json:"config,omitempty"`
}

func (s *Server) channels(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	byName := map[string]*Channel{}
	row := func(name string) *Channel {
		if byName[name] == nil {
			byName[name] = &Channel{Channel: name}
		}
		return byName[name]
	}
	st, err := s.js.Stream(ctx, s.space.ChatStream())
	if err == nil {
		var info *jetstream.StreamInfo
		if info, err = st.Info(ctx, jetstream.WithSubjectFilter(s.space.KindAll(wire.KindChat))); err == nil {
			for subject, n := range info.State.Subjects {
				if ps, perr := wire.ParseSubject(subject); perr == nil {
					row(ps.Rest).Messages += n
				}
			}
		}
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "channels-read-failed", err.Error())
		return
	}
	if kv, kerr := s.js.KeyValue(ctx, string(s.space.ChannelsBucket())); kerr == nil {
		if keys, lerr := kv.ListKeys(ctx); lerr == nil {
			for k := range keys.Keys() {
				if wire.ValidateChannel(k) != nil {
					continue // the space defaults, or a row no channel names
				}
				if e, gerr := kv.Get(ctx, k); gerr == nil {
					if cfg, derr := wire.DecodeChannelConfig(e.Value()); derr == nil {
						row(k).Config = cfg
					}
				}
			}
		}
	}
	out := []Channel{}
	for _, c := range byName {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Channel) int { return strings.Compare(a.Channel, b.Channel) })
	writeJSON(w, http.StatusOK, out)
}

// limitOf reads ?limit=: digits, 1 to MaxLimit; DefaultLimit when absent.
func limitOf(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return DefaultLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxLimit || strings.TrimLeft(v, "0123456789") != "" {
		return 0, fmt.Errorf("limit %q: must be a whole number from 1 to %d", v, MaxLimit)
	}
	return n, nil
}

func (s *Server) channelHistory(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := wire.ValidateChannel(name); err != nil {
		writeError(w, http.StatusBadRequest, "bad-channel", err.Error())
		return
	}
	limit, err := limitOf(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad-limit", err.Error())
		return
	}
	filter, err := s.space.ChatFilter(name)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad-channel", err.Error())
		return
	}
	s.history(w, r, s.space.ChatStream(), filter, limit)
}

func (s *Server) dms(w http.ResponseWriter, r *http.Request) {
	limit, err := limitOf(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad-limit", err.Error())
		return
	}
	s.history(w, r, s.space.DMStream(), s.space.KindAll(wire.KindInst), limit)
}

// history answers the last limit messages of stream under filter.
func (s *Server) history(w http.ResponseWriter, r *http.Request, stream, filter string, limit int) {
	evs, err := lastEvents(r.Context(), s.js, stream, filter, limit)
	if err != nil && len(evs) == 0 {
		writeError(w, http.StatusServiceUnavailable, "history-read-failed", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, evs)
}

// Deleted is POST /api/channel/delete's answer.
type Deleted struct {
	OK      bool   `json:"ok"`
	Channel string `json:"channel"`
	Purged  uint64 `json:"purged"`
}

func (s *Server) deleteChannel(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Purge == nil {
		writeError(w, http.StatusForbidden, "read-only", "this dashboard deletes nothing")
		return
	}
	var req struct {
		Channel string `json:"channel"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	if err := wire.ValidateChannel(req.Channel); err != nil {
		writeError(w, http.StatusBadRequest, "bad-channel", err.Error())
		return
	}
	n, err := s.cfg.Purge(r.Context(), req.Channel)
	if err != nil {
		s.cfg.Log.Warn("delete a channel's history", "channel", req.Channel, "err", err)
		writeError(w, http.StatusInternalServerError, "delete-failed", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, Deleted{OK: true, Channel: req.Channel, Purged: n})
}
