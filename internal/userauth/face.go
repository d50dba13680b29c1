package userauth

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"
)

// The faces, as Incoming.Face names them.
const (
	// FaceLoopback is the operator face on 127.0.0.1: every request carries the per-start cap.
	FaceLoopback = "loopback"
	// FacePublic is the optional face behind a TLS proxy: no cap, the credential is the proof.
	FacePublic = "public"
)

// Face limits (SPEC §10; the reference auth service's values).
const (
	// MaxBodySize bounds a request body; a larger one gets 413.
	MaxBodySize = 64 << 10
	// RefusalBudget is how many refusals a face (the public face: a peer) gets per minute before
	// further refusals turn into 429. Successful requests are never throttled.
	RefusalBudget = 30
	// RefusalWindow is the sliding window of RefusalBudget.
	RefusalWindow = time.Minute
	// MaxPeers bounds the public face's per-peer refusal budgets (an LRU).
	MaxPeers = 1024
	// DefaultMaxInFlight is the public face's default cap on requests in flight; more get 503.
	DefaultMaxInFlight = 64
	// DefaultDeadline is the public face's default deadline per request; a later answer is 503.
	DefaultDeadline = 10 * time.Second
)

// The built-in GET routes.
const (
	pathHealth = "/health"
	pathJWKS   = "/jwks"
	// PathMesh serves the mesh discovery document on both faces.
	PathMesh = "/.well-known/cotal-mesh"
	// PathExchange is the exchange's route on both faces.
	PathExchange = "/exchange"
)

// Incoming is one admitted POST request as a Handler sees it.
type Incoming struct {
	// Face is FaceLoopback or FacePublic.
	Face string
	// Peer is the caller's address: the socket's host, or on a public face with TrustedProxy the
	// last X-Forwarded-For hop.
	Peer string
	// Body is the request body, a JSON document of at most MaxBodySize bytes.
	Body []byte
}

// Handler serves one POST route. It returns the HTTP status and a value encoded as the JSON reply.
// A status of 400 to 499 counts against the face's refusal budget; once the budget is spent such
// a reply is replaced by 429, while a success is always delivered. On the public face ctx ends at
// the request deadline.
type Handler func(ctx context.Context, req *Incoming) (status int, reply any)

// FaceOptions configure both faces.
type FaceOptions struct {
	// Issuer serves GET /health ({ok, issuer}) and GET /jwks. Without one both are 404.
	Issuer *Issuer
	// MeshDocument, when non-nil, is served as JSON at GET /.well-known/cotal-mesh.
	MeshDocument any
	// Log receives one record per refusal. Default: discard.
	Log *slog.Logger
	// Now is the refusal budgets' clock. Default: time.Now.
	Now func() time.Time
}

// PublicOptions configure the public face.
type PublicOptions struct {
	FaceOptions
	// TrustedProxy takes the peer from the last X-Forwarded-For hop instead of the socket. Set it
	// only behind a proxy that appends that header, or peers can pick their own budget.
	TrustedProxy bool
	// MaxInFlight caps requests in flight. Default: DefaultMaxInFlight.
	MaxInFlight int
	// Deadline bounds each request, body read and handler. Default: DefaultDeadline.
	Deadline time.Duration
}

// Face is one HTTP face of the auth service, an http.Handler. It serves the built-in GET routes
// and the caller's POST routes, and enforces the request limits: no Origin header (403), a JSON
// content type (415), a bounded body (413), the right method (405), a known path (404), and never
// a CORS header. A Face is safe for concurrent use; the zero value is not usable.
//
// A Face bounds the body read and the handler only on the public face; the http.Server that
// serves either face should still set its own header and idle timeouts.
type Face struct {
	name         string
	cap          []byte // the loopback cap; nil on the public face
	posts        map[string]Handler
	opts         FaceOptions
	trustedProxy bool
	slots        chan struct{} // in-flight tokens; nil when unbounded
	deadline     time.Duration // 0 when unbounded

	refusals *budget // refused requests, per face (loopback) or per peer (public)
	badCaps  *budget // loopback requests without the right cap, kept apart so they cannot starve holders
}

// NewCap returns a fresh loopback capability: 32 random bytes in hex.
func NewCap() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error since Go 1.24
	return hex.EncodeToString(b[:])
}

// NewLoopbackFace returns the loopback face: every request must carry "Authorization: Bearer
// <cap>". routes maps a path to its POST handler. It returns an error for a cap that is not 64
// hex digits or a route that shadows a built-in one.
func NewLoopbackFace(cap string, routes map[string]Handler, opts FaceOptions) (*Face, error) {
	if !isLowerHex(strings.ToLower(cap), 64) {
		return nil, errors.New("loopback face: the cap must be 32 bytes in hex")
	}
	f, err := newFace(FaceLoopback, routes, opts)
	if err != nil {
		return nil, err
	}
	f.cap = []byte(cap)
	f.refusals = newBudget(RefusalBudget, RefusalWindow, 1)
	f.badCaps = newBudget(RefusalBudget, RefusalWindow, 1)
	return f, nil
}

// NewPublicFace returns the public face: no cap, refusals budgeted per peer, at most MaxInFlight
// requests at once and a Deadline on each. It returns an error for a route that shadows a
// built-in one or a negative limit.
func NewPublicFace(routes map[string]Handler, opts PublicOptions) (*Face, error) {
	if opts.MaxInFlight < 0 || opts.Deadline < 0 {
		return nil, errors.New("public face: negative in-flight cap or deadline")
	}
	f, err := newFace(FacePublic, routes, opts.FaceOptions)
	if err != nil {
		return nil, err
	}
	f.trustedProxy = opts.TrustedProxy
	f.slots = make(chan struct{}, cmpOr(opts.MaxInFlight, DefaultMaxInFlight))
	f.deadline = cmpOr(opts.Deadline, DefaultDeadline)
	f.refusals = newBudget(RefusalBudget, RefusalWindow, MaxPeers)
	return f, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func newFace(name string, routes map[string]Handler, opts FaceOptions) (*Face, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	posts := make(map[string]Handler, len(routes))
	for path, h := range routes {
		switch {
		case !strings.HasPrefix(path, "/"):
			return nil, fmt.Errorf("%s face: route %q must start with '/'", name, path)
		case path == pathHealth || path == pathJWKS || path == PathMesh:
			return nil, fmt.Errorf("%s face: route %q shadows a built-in route", name, path)
		case h == nil:
			return nil, fmt.Errorf("%s face: route %q has no handler", name, path)
		}
		posts[path] = h
	}
	return &Face{name: name, posts: posts, opts: opts}, nil
}

// Which budget a response counts against.
type bucket int

const (
	bucketRefusals bucket = iota
	bucketBadCap
)

// response is a reply ready to write.
type response struct {
	status int
	body   []byte
	cache  string // Cache-Control; "" means no-store
	allow  string // Allow, on a 405
	bucket bucket
	reason string // for the log
}

func errorResponse(status int, msg string) response {
	body, _ := jsonReply(map[string]string{"error": msg}) // a string map always encodes
	return response{status: status, body: body, reason: msg}
}

// ServeHTTP implements http.Handler.
func (f *Face) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	peer := f.peer(r)
	if f.slots != nil {
		select {
		case f.slots <- struct{}{}:
		default:
			f.finish(w, r, peer, errorResponse(http.StatusServiceUnavailable, "busy"))
			return
		}
	}
	release := func() {
		if f.slots != nil {
			<-f.slots
		}
	}
	deadline := time.Now().Add(f.deadline)
	if f.deadline > 0 {
		// One deadline bounds the body read and the handler together. A ResponseWriter that
		// cannot set deadlines (a test recorder) has no socket to hold open, so the error is moot.
		_ = http.NewResponseController(w).SetReadDeadline(deadline)
	}
	h, in, resp := f.admit(w, r, peer)
	if h == nil {
		release()
		f.finish(w, r, peer, resp)
		return
	}
	if f.deadline == 0 {
		defer release()
		f.finish(w, r, peer, f.call(r.Context(), h, in))
		return
	}
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()
	done := make(chan response, 1)
	// The handler runs beside the request so that the deadline answers 503 even if it ignores
	// ctx. It owns its in-flight slot until it returns, so a stuck handler keeps counting
	// against MaxInFlight; it touches neither w nor r.
	go func() {
		defer release()
		done <- f.call(ctx, h, in)
	}()
	select {
	case resp = <-done:
	case <-ctx.Done():
		resp = errorResponse(http.StatusServiceUnavailable, "deadline exceeded")
	}
	f.finish(w, r, peer, resp)
}

// call runs h and encodes its reply; a panic becomes a 500 rather than the end of the process.
func (f *Face) call(ctx context.Context, h Handler, in *Incoming) (resp response) {
	defer func() {
		if p := recover(); p != nil {
			f.opts.Log.Error("handler panicked", "face", f.name, "panic", fmt.Sprint(p))
			resp = errorResponse(http.StatusInternalServerError, "internal error")
		}
	}()
	status, reply := h(ctx, in)
	if status < 100 || status > 599 {
		f.opts.Log.Error("handler returned an invalid status", "face", f.name, "status", status)
		return errorResponse(http.StatusInternalServerError, "internal error")
	}
	body, err := jsonReply(reply)
	if err != nil {
		f.opts.Log.Error("encode reply", "face", f.name, "err", err)
		return errorResponse(http.StatusInternalServerError, "internal error")
	}
	return response{status: status, body: body}
}

// admit applies the face's request checks in order and returns the POST handler to run with its
// input, or the response to send instead.
func (f *Face) admit(w http.ResponseWriter, r *http.Request, peer string) (Handler, *Incoming, response) {
	if f.cap != nil && !f.hasCap(r) {
		resp := errorResponse(http.StatusUnauthorized, "unauthorized")
		resp.bucket = bucketBadCap
		return nil, nil, resp
	}
	// A browser page can reach loopback and any public origin; it must not drive either face.
	if _, ok := r.Header["Origin"]; ok {
		return nil, nil, errorResponse(http.StatusForbidden, "cross-origin requests are refused")
	}
	path := r.URL.Path
	if get := f.get(path); get != nil {
		if r.Method != http.MethodGet {
			resp := errorResponse(http.StatusMethodNotAllowed, "method not allowed")
			resp.allow = http.MethodGet
			return nil, nil, resp
		}
		return nil, nil, get()
	}
	h, ok := f.posts[path]
	if !ok {
		return nil, nil, errorResponse(http.StatusNotFound, "not found")
	}
	if r.Method != http.MethodPost {
		resp := errorResponse(http.StatusMethodNotAllowed, "method not allowed")
		resp.allow = http.MethodPost
		return nil, nil, resp
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, nil, errorResponse(http.StatusUnsupportedMediaType, "the body must be application/json")
	}
	if r.ContentLength > MaxBodySize {
		return nil, nil, errorResponse(http.StatusRequestEntityTooLarge, "body too large")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodySize))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, nil, errorResponse(http.StatusRequestEntityTooLarge, "body too large")
		}
		return nil, nil, errorResponse(http.StatusBadRequest, "unreadable body")
	}
	return h, &Incoming{Face: f.name, Peer: peer, Body: body}, response{}
}

// get returns the built-in GET route at path, or nil.
func (f *Face) get(path string) func() response {
	switch {
	case path == pathHealth && f.opts.Issuer != nil:
		return func() response {
			body, _ := jsonReply(struct {
				OK     bool   `json:"ok"`
				Issuer string `json:"issuer"`
			}{true, f.opts.Issuer.Name()}) // a bool and a string always encode
			return response{status: http.StatusOK, body: body}
		}
	case path == pathJWKS && f.opts.Issuer != nil:
		return func() response {
			return response{status: http.StatusOK, body: append(f.opts.Issuer.JWKS(), '\n'), cache: fmt.Sprintf("max-age=%d", int(JWKSMaxAge/time.Second))}
		}
	case path == PathMesh && f.opts.MeshDocument != nil:
		return func() response {
			body, err := jsonReply(f.opts.MeshDocument)
			if err != nil {
				f.opts.Log.Error("encode mesh document", "err", err)
				return errorResponse(http.StatusInternalServerError, "internal error")
			}
			return response{status: http.StatusOK, body: body}
		}
	}
	return nil
}

// hasCap reports whether r carries the loopback cap, compared in constant time.
func (f *Face) hasCap(r *http.Request) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), f.cap) == 1
}

// peer returns the budget key of r's caller.
func (f *Face) peer(r *http.Request) string {
	if f.trustedProxy {
		if hops := r.Header.Values("X-Forwarded-For"); len(hops) > 0 {
			last := hops[len(hops)-1]
			if i := strings.LastIndexByte(last, ','); i >= 0 {
				last = last[i+1:]
			}
			if last = strings.TrimSpace(last); last != "" {
				return last
			}
		}
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// finish charges a refusal to its budget, turning it into 429 once the budget is spent, and
// writes the response.
func (f *Face) finish(w http.ResponseWriter, r *http.Request, peer string, resp response) {
	if resp.status >= 400 && resp.status < 500 {
		b, key := f.refusals, peer
		if f.name == FaceLoopback {
			key = "" // the loopback face has one budget for everyone
		}
		if resp.bucket == bucketBadCap {
			b = f.badCaps
		}
		if b.refuse(key, f.opts.Now()) {
			f.opts.Log.Warn("refusal budget spent", "face", f.name, "peer", peer, "path", r.URL.Path, "status", resp.status)
			resp = errorResponse(http.StatusTooManyRequests, "too many refused requests")
		} else {
			f.opts.Log.Info("request refused", "face", f.name, "peer", peer, "path", r.URL.Path, "status", resp.status, "reason", resp.reason)
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", cmpOr(resp.cache, "no-store"))
	if resp.allow != "" {
		h.Set("Allow", resp.allow)
	}
	w.WriteHeader(resp.status)
	_, _ = w.Write(resp.body) // the peer may be gone; there is no one left to tell
}

// jsonReply encodes v for an HTTP reply.
func jsonReply(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
