package devidp

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// start runs a server for the test.
func start(t *testing.T, o Options) *Server {
	t.Helper()
	if o.Interval == 0 {
		o.Interval = time.Nanosecond
	}
	s, err := Start(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() }) // a close error after the test has no reader
	return s
}

// post sends a form to path and decodes the JSON answer.
func post(t *testing.T, s *Server, path string, form url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := http.PostForm(s.URL()+path, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("POST %s: decode: %v", path, err)
	}
	return resp.StatusCode, out
}

// deviceCode starts a device login and returns the device and user codes.
func deviceCode(t *testing.T, s *Server, scope string) (string, string) {
	t.Helper()
	status, out := post(t, s, "/device/code", url.Values{"client_id": {DefaultClientID}, "scope": {scope}})
	if status != http.StatusOK {
		t.Fatalf("device code: %d %v", status, out)
	}
	return out["device_code"].(string), out["user_code"].(string)
}

// poll redeems a device code once.
func poll(t *testing.T, s *Server, dc string) (int, map[string]any) {
	t.Helper()
	return post(t, s, "/token", url.Values{"grant_type": {deviceGrantType}, "device_code": {dc}, "client_id": {DefaultClientID}})
}

func TestStartRefusesNonLoopbackAddr(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "[::]:0", "example.com:0", "localhost.example.com:0", "127.0.0.1"} {
		t.Run(addr, func(t *testing.T) {
			if s, err := Start(t.Context(), Options{Addr: addr}); err == nil {
				_ = s.Close() // the test fails anyway
				t.Fatalf("Start(%q) succeeded", addr)
			}
		})
	}
}

func TestStartRefusesBadOptions(t *testing.T) {
	for _, o := range []Options{{TokenLifetime: -time.Minute}, {TokenLifetime: 48 * time.Hour}, {Interval: -time.Second}} {
		if s, err := Start(t.Context(), o); err == nil {
			_ = s.Close() // the test fails anyway
			t.Errorf("Start(%+v) succeeded", o)
		}
	}
}

func TestDiscoveryAndIDToken(t *testing.T) {
	s := start(t, Options{TokenLifetime: 2 * time.Minute})
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL = %s", s.URL())
	}
	var meta map[string]any
	getJSON(t, s.URL()+"/.well-known/openid-configuration", &meta)
	for k, want := range map[string]string{
		"issuer":                        s.URL(),
		"device_authorization_endpoint": s.URL() + "/device/code",
		"token_endpoint":                s.URL() + "/token",
		"jwks_uri":                      s.URL() + "/jwks",
	} {
		if meta[k] != want {
			t.Errorf("%s = %v, want %s", k, meta[k], want)
		}
	}
	var jwks struct {
		Keys []map[string]string `json:"keys"`
	}
	getJSON(t, s.URL()+"/jwks", &jwks)
	if len(jwks.Keys) != 1 {
		t.Fatalf("jwks = %+v", jwks)
	}
	k := jwks.Keys[0]
	if k["kty"] != "OKP" || k["crv"] != "Ed25519" || k["alg"] != "EdDSA" || k["use"] != "sig" || k["kid"] == "" {
		t.Errorf("key = %v", k)
	}

	dc, uc := deviceCode(t, s, "")
	if err := Approve(t.Context(), nil, s.URL(), uc, "alice"); err != nil {
		t.Fatal(err)
	}
	status, out := poll(t, s, dc)
	if status != http.StatusOK {
		t.Fatalf("poll: %d %v", status, out)
	}
	if out["refresh_token"] == nil || out["token_type"] != "Bearer" {
		t.Errorf("token response = %v", out)
	}
	parts := strings.Split(out["id_token"].(string), ".")
	var hdr map[string]string
	var claims map[string]any
	decodeSeg(t, parts[0], &hdr)
	decodeSeg(t, parts[1], &claims)
	if hdr["alg"] != "EdDSA" || hdr["kid"] != k["kid"] {
		t.Errorf("header = %v", hdr)
	}
	x, _ := base64.RawURLEncoding.DecodeString(k["x"])
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	if !ed25519.Verify(x, []byte(parts[0]+"."+parts[1]), sig) {
		t.Error("id token signature does not verify with the published key")
	}
	if claims["iss"] != s.URL() || claims["aud"] != DefaultClientID || claims["sub"] != "alice" || claims["preferred_username"] != "alice" {
		t.Errorf("claims = %v", claims)
	}
	iat, exp, nbf := claims["iat"].(float64), claims["exp"].(float64), claims["nbf"].(float64)
	if exp-iat != 120 || nbf != iat {
		t.Errorf("iat %v nbf %v exp %v, want a 2-minute token valid from iat", iat, nbf, exp)
	}
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", u, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func decodeSeg(t *testing.T, seg string, v any) {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func TestRefusesBadClientID(t *testing.T) {
	s := start(t, Options{ClientID: "my-cli"})
	tests := []struct {
		name string
		path string
		form url.Values
	}{
		{name: "device code, other client", path: "/device/code", form: url.Values{"client_id": {"cotal-cli"}}},
		{name: "device code, no client", path: "/device/code", form: url.Values{}},
		{name: "token, other client", path: "/token", form: url.Values{"client_id": {"evil"}, "grant_type": {deviceGrantType}, "device_code": {"x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, out := post(t, s, tt.path, tt.form)
			if status != http.StatusBadRequest || out["error"] != "invalid_client" {
				t.Errorf("answer = %d %v, want 400 invalid_client", status, out)
			}
		})
	}
}

func TestDeviceCodeIsSingleUse(t *testing.T) {
	s := start(t, Options{})
	dc, uc := deviceCode(t, s, "openid")
	if status, out := poll(t, s, dc); out["error"] != "authorization_pending" {
		t.Fatalf("before approval: %d %v", status, out)
	}
	if err := Approve(t.Context(), nil, s.URL(), uc, "bob"); err != nil {
		t.Fatal(err)
	}
	status, out := poll(t, s, dc)
	if status != http.StatusOK || out["id_token"] == nil {
		t.Fatalf("after approval: %d %v", status, out)
	}
	if out["refresh_token"] != nil {
		t.Errorf("refresh token issued without offline_access")
	}
	if status, out := poll(t, s, dc); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Errorf("reused device code: %d %v, want invalid_grant", status, out)
	}
	if err := Approve(t.Context(), nil, s.URL(), uc, "bob"); !errors.Is(err, ErrUnknownUserCode) {
		t.Errorf("approving a spent code = %v, want ErrUnknownUserCode", err)
	}
}

func TestApproveRefusesBadUserName(t *testing.T) {
	s := start(t, Options{})
	_, uc := deviceCode(t, s, "")
	for _, user := range []string{"", "Alice", "1alice", "-a", "al ice", "alice!", "a" + strings.Repeat("b", 32), "ália"} {
		t.Run(user, func(t *testing.T) {
			if err := Approve(t.Context(), nil, s.URL(), uc, user); !errors.Is(err, ErrBadUser) {
				t.Errorf("Approve(%q) = %v, want ErrBadUser", user, err)
			}
			// The server checks too, whatever the client does.
			status, out := door(t, s, `{"userCode":"`+uc+`","user":"`+user+`"}`, nil)
			if status != http.StatusBadRequest || out["error"] != codeBadUser {
				t.Errorf("door with %q: %d %v", user, status, out)
			}
		})
	}
	for _, user := range []string{"a", "alice", "a" + strings.Repeat("b", 31), "x_y-z9"} {
		if err := ValidUser(user); err != nil {
			t.Errorf("ValidUser(%q) = %v", user, err)
		}
	}
}

// door posts body to the scripted approval door with extra headers.
func door(t *testing.T, s *Server, body string, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL()+"/device/approve", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out) // some refusals have no JSON; the status is checked
	return resp.StatusCode, out
}

func TestDoorRefuses(t *testing.T) {
	s := start(t, Options{})
	_, uc := deviceCode(t, s, "")
	tests := []struct {
		name   string
		body   string
		hdr    map[string]string
		status int
	}{
		{name: "browser origin", body: `{"userCode":"` + uc + `","user":"alice"}`, hdr: map[string]string{"Origin": s.URL()}, status: http.StatusForbidden},
		{name: "form content type", body: `{"userCode":"` + uc + `","user":"alice"}`, hdr: map[string]string{"Content-Type": "text/plain"}, status: http.StatusUnsupportedMediaType},
		{name: "unknown field", body: `{"userCode":"` + uc + `","user":"alice","admin":true}`, status: http.StatusBadRequest},
		{name: "unknown user code", body: `{"userCode":"BCDF-GHJK","user":"alice"}`, status: http.StatusBadRequest},
		{name: "malformed user code", body: `{"userCode":"AEIO-U123","user":"alice"}`, status: http.StatusBadRequest},
		{name: "over 64 KiB", body: `{"userCode":"` + strings.Repeat("B", maxBody) + `","user":"alice"}`, status: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if status, out := door(t, s, tt.body, tt.hdr); status != tt.status {
				t.Errorf("status = %d %v, want %d", status, out, tt.status)
			}
		})
	}
	if err := Approve(t.Context(), nil, s.URL(), "bcdf-ghjk", "alice"); !errors.Is(err, ErrUnknownUserCode) {
		t.Errorf("Approve unknown code = %v, want ErrUnknownUserCode", err)
	}
	if err := Approve(t.Context(), nil, "http://192.0.2.1:4780", uc, "alice"); err == nil {
		t.Error("Approve sent to a non-loopback url")
	}
	// A code typed loosely still matches, and a second decision is refused.
	if err := Approve(t.Context(), nil, s.URL(), " "+strings.ToLower(strings.ReplaceAll(uc, "-", ""))+" ", "alice"); err != nil {
		t.Fatalf("Approve loosely typed code: %v", err)
	}
	if err := Approve(t.Context(), nil, s.URL(), uc, "mallory"); !errors.Is(err, ErrUnknownUserCode) {
		t.Errorf("second approval = %v, want ErrUnknownUserCode", err)
	}
}

// fakeClock is a settable clock for the server.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestExpiredDeviceCode(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	s := start(t, Options{now: clock.now})
	dc, uc := deviceCode(t, s, "")
	clock.add(deviceCodeLifetime)
	if err := Approve(t.Context(), nil, s.URL(), uc, "alice"); !errors.Is(err, ErrUnknownUserCode) {
		t.Errorf("approving an expired code = %v, want ErrUnknownUserCode", err)
	}
	if status, out := poll(t, s, dc); status != http.StatusBadRequest || out["error"] != "expired_token" {
		t.Errorf("expired code: %d %v, want expired_token", status, out)
	}
	if _, out := poll(t, s, dc); out["error"] != "invalid_grant" {
		t.Errorf("expired code polled again: %v, want invalid_grant", out)
	}
}

func TestSlowDown(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	s := start(t, Options{Interval: 2 * time.Second, now: clock.now})
	status, out := post(t, s, "/device/code", url.Values{"client_id": {DefaultClientID}})
	if status != http.StatusOK || out["interval"] != float64(2) || out["expires_in"] != float64(600) {
		t.Fatalf("device code: %d %v", status, out)
	}
	dc := out["device_code"].(string)
	wants := []struct {
		after time.Duration
		err   string
	}{
		{0, "authorization_pending"},
		{time.Second, "slow_down"},     // faster than 2 s; the interval becomes 7 s
		{3 * time.Second, "slow_down"}, // 3 s < 7 s; now 12 s
		{12 * time.Second, "authorization_pending"},
	}
	for i, w := range wants {
		clock.add(w.after)
		if _, out := poll(t, s, dc); out["error"] != w.err {
			t.Errorf("poll %d: %v, want %s", i, out, w.err)
		}
	}
}

func TestRefreshRotates(t *testing.T) {
	s := start(t, Options{})
	dc, uc := deviceCode(t, s, "openid offline_access")
	if err := Approve(t.Context(), nil, s.URL(), uc, "carol"); err != nil {
		t.Fatal(err)
	}
	_, out := poll(t, s, dc)
	rt := out["refresh_token"].(string)
	refresh := func(client, token string) (int, map[string]any) {
		return post(t, s, "/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}, "client_id": {client}})
	}
	if status, out := refresh("evil", rt); out["error"] != "invalid_client" {
		t.Errorf("refresh by another client: %d %v", status, out)
	}
	status, out := refresh(DefaultClientID, rt)
	if status != http.StatusOK || out["id_token"] == nil || out["refresh_token"] == rt {
		t.Fatalf("refresh: %d %v", status, out)
	}
	if _, out := refresh(DefaultClientID, rt); out["error"] != "invalid_grant" {
		t.Errorf("old refresh token: %v, want invalid_grant", out)
	}
	if _, out := post(t, s, "/token", url.Values{"grant_type": {"password"}, "client_id": {DefaultClientID}}); out["error"] != "unsupported_grant_type" {
		t.Errorf("password grant: %v", out)
	}
	if _, out := post(t, s, "/device/code", url.Values{"client_id": {DefaultClientID}, "scope": {"profile"}}); out["error"] != "invalid_scope" {
		t.Errorf("scope without openid: %v", out)
	}
	if _, out := post(t, s, "/device/code", url.Values{"client_id": {DefaultClientID}, "scope": {"openid admin"}}); out["error"] != "invalid_scope" {
		t.Errorf("unknown scope: %v", out)
	}
}

func TestRefusesForeignHostAndLargeBodies(t *testing.T) {
	s := start(t, Options{})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL()+"/jwks", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "rebound.example.com"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("foreign Host: status %d, want 421", resp.StatusCode)
	}
	big := url.Values{"client_id": {DefaultClientID}, "pad": {strings.Repeat("x", maxBody)}}
	if status, _ := post(t, s, "/token", big); status != http.StatusRequestEntityTooLarge {
		t.Errorf("large body: status %d, want 413", status)
	}
	resp, err = http.Get(s.URL() + "/token")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /token: status %d, want 405", resp.StatusCode)
	}
}

func TestApprovalPage(t *testing.T) {
	s := start(t, Options{})
	dc, uc := deviceCode(t, s, "")
	resp, err := http.Get(s.URL() + "/device?user_code=" + url.QueryEscape(uc))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `value="`+uc+`"`) || strings.Contains(string(page), "<script") {
		t.Errorf("page does not prefill the code or has script:\n%s", page)
	}

	form := url.Values{"user_code": {uc}, "user": {"dave"}, "action": {"approve"}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL()+"/device", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin form: status %d, want 403", resp.StatusCode)
	}

	bad := url.Values{"user_code": {uc}, "user": {"Dave<script>"}, "action": {"approve"}}
	resp, err = http.PostForm(s.URL()+"/device", bad)
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(page), "<script>") {
		t.Errorf("bad user on the page: status %d, escaped page expected:\n%s", resp.StatusCode, page)
	}

	resp, err = http.PostForm(s.URL()+"/device", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("approve on the page: status %d", resp.StatusCode)
	}
	if status, out := poll(t, s, dc); status != http.StatusOK {
		t.Errorf("poll after page approval: %d %v", status, out)
	}
}

func TestStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	s, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get(s.URL() + "/jwks")
		if err != nil {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("server still answering after its context ended")
		}
		runtime.Gosched()
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close after the context ended = %v", err)
	}
}
