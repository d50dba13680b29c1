package userauth

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// echo answers 200 with the body's length.
func echo(_ context.Context, in *Incoming) (int, any) {
	return http.StatusOK, map[string]any{"n": len(in.Body), "face": in.Face, "peer": in.Peer}
}

// refuse answers 401 to everything.
func refuse(context.Context, *Incoming) (int, any) {
	return http.StatusUnauthorized, map[string]string{"error": "unauthorized"}
}

func newLoopback(t *testing.T, routes map[string]Handler, opts FaceOptions) (*httptest.Server, string) {
	t.Helper()
	cap := NewCap()
	f, err := NewLoopbackFace(cap, routes, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv, cap
}

func request(t *testing.T, srv *httptest.Server, method, path string, body []byte, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp, b.Bytes()
}

func TestLoopbackFaceLimits(t *testing.T) {
	iss := newTestIssuer(t)
	srv, cap := newLoopback(t, map[string]Handler{"/exchange": echo}, FaceOptions{Issuer: iss})
	auth := "Bearer " + cap
	json := "application/json"
	tests := []struct {
		name   string
		method string
		path   string
		body   []byte
		header map[string]string
		want   int
	}{
		{"no cap", "POST", "/exchange", []byte("{}"), map[string]string{"Content-Type": json}, 401},
		{"wrong cap", "POST", "/exchange", []byte("{}"), map[string]string{"Content-Type": json, "Authorization": "Bearer " + NewCap()}, 401},
		{"cap as basic", "POST", "/exchange", []byte("{}"), map[string]string{"Content-Type": json, "Authorization": "Basic " + cap}, 401},
		{"origin", "POST", "/exchange", []byte("{}"), map[string]string{"Content-Type": json, "Authorization": auth, "Origin": "https://evil.example"}, 403},
		{"empty origin", "POST", "/exchange", []byte("{}"), map[string]string{"Content-Type": json, "Authorization": auth, "Origin": ""}, 403},
		{"text/plain", "POST", "/exchange", []byte("{}"), map[string]string{"Content-Type": "text/plain", "Authorization": auth}, 415},
		{"no content type", "POST", "/exchange", []byte("{}"), map[string]string{"Authorization": auth}, 415},
		{"65537-byte body", "POST", "/exchange", bytes.Repeat([]byte(" "), MaxBodySize+1), map[string]string{"Content-Type": json, "Authorization": auth}, 413},
		{"65536-byte body", "POST", "/exchange", bytes.Repeat([]byte(" "), MaxBodySize), map[string]string{"Content-Type": json, "Authorization": auth}, 200},
		{"json with charset", "POST", "/exchange", []byte("{}"), map[string]string{"Content-Type": "application/json; charset=utf-8", "Authorization": auth}, 200},
		{"GET /exchange", "GET", "/exchange", nil, map[string]string{"Authorization": auth}, 405},
		{"POST /jwks", "POST", "/jwks", nil, map[string]string{"Authorization": auth, "Content-Type": json}, 405},
		{"unknown path", "POST", "/nope", []byte("{}"), map[string]string{"Content-Type": json, "Authorization": auth}, 404},
		{"health", "GET", "/health", nil, map[string]string{"Authorization": auth}, 200},
		{"health without cap", "GET", "/health", nil, nil, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := request(t, srv, tt.method, tt.path, tt.body, tt.header)
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tt.want)
			}
			checkHeaders(t, resp, "no-store")
			if tt.want == 405 && resp.Header.Get("Allow") == "" {
				t.Fatal("405 without an Allow header")
			}
		})
	}
}

func checkHeaders(t *testing.T, resp *http.Response, cache string) {
	t.Helper()
	if got := resp.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type %q", got)
	}
	if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options %q", got)
	}
	if got := resp.Header.Get("Cache-Control"); got != cache {
		t.Errorf("Cache-Control %q, want %q", got, cache)
	}
	for k := range resp.Header {
		if strings.HasPrefix(k, "Access-Control-") {
			t.Errorf("CORS header %s", k)
		}
	}
}

func TestBuiltinRoutes(t *testing.T) {
	iss := newTestIssuer(t)
	doc := map[string]any{"space": "main", "tlsRequired": true}
	pf, err := NewPublicFace(nil, PublicOptions{FaceOptions: FaceOptions{Issuer: iss, MeshDocument: doc}})
	if err != nil {
		t.Fatal(err)
	}
	pub := httptest.NewServer(pf)
	t.Cleanup(pub.Close)
	loop, cap := newLoopback(t, nil, FaceOptions{Issuer: iss, MeshDocument: doc})

	resp, body := request(t, pub, "GET", "/jwks", nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("/jwks %d", resp.StatusCode)
	}
	checkHeaders(t, resp, "max-age=300")
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil || len(set.Keys) != 1 || set.Keys[0]["kid"] != iss.ActiveKid() {
		t.Fatalf("/jwks = %s", body)
	}

	resp, body = request(t, pub, "GET", "/health", nil, nil)
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != `{"ok":true,"issuer":"urn:cotal:auth:main"}` {
		t.Fatalf("/health = %d %s", resp.StatusCode, body)
	}
	for _, srv := range []*httptest.Server{pub, loop} {
		resp, body = request(t, srv, "GET", PathMesh, nil, map[string]string{"Authorization": "Bearer " + cap})
		if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != `{"space":"main","tlsRequired":true}` {
			t.Fatalf("%s = %d %s", PathMesh, resp.StatusCode, body)
		}
	}
	resp, _ = request(t, pub, "GET", "/nope", nil, nil)
	if resp.StatusCode != 404 {
		t.Fatalf("/nope on the public face: %d, want 404", resp.StatusCode)
	}
}

func TestFaceRoutesMayNotShadowBuiltins(t *testing.T) {
	if _, err := NewPublicFace(map[string]Handler{"/jwks": echo}, PublicOptions{}); err == nil {
		t.Fatal("a route shadowed /jwks")
	}
	if _, err := NewLoopbackFace("short", nil, FaceOptions{}); err == nil {
		t.Fatal("a short cap was accepted")
	}
}

// fakeClock is a settable clock for the refusal window.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestRefusalBudgetLoopback(t *testing.T) {
	clock := &fakeClock{t: testNow}
	srv, cap := newLoopback(t, map[string]Handler{"/refuse": refuse, "/ok": echo}, FaceOptions{Now: clock.Now})
	hdr := map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + cap}
	send := func(path string, h map[string]string) int {
		resp, _ := request(t, srv, "POST", path, []byte("{}"), h)
		return resp.StatusCode
	}
	for i := range RefusalBudget {
		if got := send("/refuse", hdr); got != 401 {
			t.Fatalf("refusal %d: %d, want 401", i+1, got)
		}
	}
	if got := send("/refuse", hdr); got != 429 {
		t.Fatalf("refusal %d: %d, want 429", RefusalBudget+1, got)
	}
	if got := send("/ok", hdr); got != 200 {
		t.Fatalf("a success over budget: %d, want 200", got)
	}
	if got := send("/nope", hdr); got != 429 {
		t.Fatalf("a 404 over budget: %d, want 429", got)
	}
	// Bad caps have their own budget, which the refusals above did not touch.
	bad := map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + NewCap()}
	for i := range RefusalBudget {
		if got := send("/ok", bad); got != 401 {
			t.Fatalf("bad cap %d: %d, want 401", i+1, got)
		}
	}
	if got := send("/ok", bad); got != 429 {
		t.Fatalf("bad cap %d: %d, want 429", RefusalBudget+1, got)
	}
	if got := send("/ok", hdr); got != 200 {
		t.Fatalf("a cap holder after a bad-cap flood: %d, want 200", got)
	}
	clock.Advance(RefusalWindow + time.Second)
	if got := send("/refuse", hdr); got != 401 {
		t.Fatalf("after the window drained: %d, want 401", got)
	}
}

func TestRefusalBudgetPerPeer(t *testing.T) {
	f, err := NewPublicFace(map[string]Handler{"/refuse": refuse, "/ok": echo}, PublicOptions{TrustedProxy: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	send := func(path, xff string) (int, []byte) {
		resp, body := request(t, srv, "POST", path, []byte("{}"), map[string]string{"Content-Type": "application/json", "X-Forwarded-For": xff})
		return resp.StatusCode, body
	}
	for range RefusalBudget {
		send("/refuse", "6.6.6.6, 10.0.0.1")
	}
	if got, _ := send("/refuse", "7.7.7.7, 10.0.0.1"); got != 429 {
		t.Fatalf("the last hop is the peer: %d, want 429", got)
	}
	if got, _ := send("/refuse", "10.0.0.2"); got != 401 {
		t.Fatalf("another peer: %d, want 401", got)
	}
	if got, body := send("/ok", "10.0.0.1"); got != 200 || !strings.Contains(string(body), `"peer":"10.0.0.1"`) {
		t.Fatalf("a success from the spent peer: %d %s", got, body)
	}
}

func TestBudgetLRU(t *testing.T) {
	b := newBudget(1, time.Minute, 2)
	if b.refuse("a", testNow) || !b.refuse("a", testNow) {
		t.Fatal("a budget of one")
	}
	b.refuse("b", testNow)
	b.refuse("c", testNow) // evicts a, the least recently refused
	if b.refuse("a", testNow) {
		t.Fatal("an evicted peer kept its spent budget")
	}
	if len(b.byKey) != 2 || b.lru.Len() != 2 {
		t.Fatalf("%d keys, want 2", len(b.byKey))
	}
}

func TestPublicInFlightCap(t *testing.T) {
	const max = DefaultMaxInFlight
	entered := make(chan struct{}, max)
	release := make(chan struct{})
	block := func(ctx context.Context, in *Incoming) (int, any) {
		entered <- struct{}{}
		<-release
		return http.StatusOK, map[string]bool{"ok": true}
	}
	f, err := NewPublicFace(map[string]Handler{"/block": block}, PublicOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)

	var wg sync.WaitGroup
	statuses := make(chan int, max)
	for range max {
		wg.Go(func() {
			resp, _ := request(t, srv, "POST", "/block", []byte("{}"), map[string]string{"Content-Type": "application/json"})
			statuses <- resp.StatusCode
		})
	}
	for range max {
		<-entered
	}
	resp, _ := request(t, srv, "POST", "/block", []byte("{}"), map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != 503 {
		t.Fatalf("request %d in flight: %d, want 503", max+1, resp.StatusCode)
	}
	close(release)
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != 200 {
			t.Fatalf("an admitted request got %d", s)
		}
	}
}

func TestPublicDeadline(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	stuck := func(ctx context.Context, in *Incoming) (int, any) {
		<-release // ignores ctx on purpose: the face must answer anyway
		return http.StatusOK, nil
	}
	f, err := NewPublicFace(map[string]Handler{"/stuck": stuck}, PublicOptions{Deadline: 20 * time.Millisecond, MaxInFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	resp, _ := request(t, srv, "POST", "/stuck", []byte("{}"), map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != 503 {
		t.Fatalf("a handler past the deadline: %d, want 503", resp.StatusCode)
	}
	// The stuck handler still holds the only slot.
	resp, _ = request(t, srv, "POST", "/stuck", []byte("{}"), map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != 503 {
		t.Fatalf("while the stuck handler holds the slot: %d, want 503", resp.StatusCode)
	}
}

func TestHandlerPanicIs500(t *testing.T) {
	srv, cap := newLoopback(t, map[string]Handler{"/panic": func(context.Context, *Incoming) (int, any) { panic("boom") }}, FaceOptions{})
	resp, _ := request(t, srv, "POST", "/panic", []byte("{}"), map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + cap})
	if resp.StatusCode != 500 {
		t.Fatalf("a panicking handler: %d, want 500", resp.StatusCode)
	}
}
