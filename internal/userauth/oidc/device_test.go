package oidc

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// scriptedIdP answers the device and token endpoints from a script, recording the forms it got.
type scriptedIdP struct {
	srv *httptest.Server

	mu     sync.Mutex
	device map[string]any   // the device authorization answer
	token  []map[string]any // token answers in order; an "error" member means a 400
	forms  []map[string]string
}

func newScriptedIdP(t *testing.T, device map[string]any, token ...map[string]any) *scriptedIdP {
	t.Helper()
	s := &scriptedIdP{device: device, token: token}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /device", func(w http.ResponseWriter, r *http.Request) {
		s.record(t, r)
		s.mu.Lock()
		defer s.mu.Unlock()
		_ = json.NewEncoder(w).Encode(s.device) // test server
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		s.record(t, r)
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.token) == 0 {
			http.Error(w, "script exhausted", http.StatusInternalServerError)
			return
		}
		ans := s.token[0]
		s.token = s.token[1:]
		if _, isErr := ans["error"]; isErr {
			w.WriteHeader(http.StatusBadRequest)
		}
		_ = json.NewEncoder(w).Encode(ans) // test server
	})
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

// record keeps the request's form; the endpoints take form-encoded bodies only.
func (s *scriptedIdP) record(t *testing.T, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
		t.Errorf("Content-Type = %q, want a form", ct)
	}
	if err := r.ParseForm(); err != nil {
		t.Errorf("ParseForm: %v", err)
	}
	f := map[string]string{}
	for k := range r.PostForm {
		f[k] = r.PostForm.Get(k)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forms = append(s.forms, f)
}

// got returns the forms received so far.
func (s *scriptedIdP) got() []map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.forms)
}

func (s *scriptedIdP) provider() *Provider {
	return &Provider{
		Issuer:                      s.srv.URL,
		DeviceAuthorizationEndpoint: s.srv.URL + "/device",
		TokenEndpoint:               s.srv.URL + "/token",
		JWKSURI:                     s.srv.URL + "/jwks",
	}
}

// fakeTime makes p's waits instant, advancing a fake clock and recording each wait.
func fakeTime(p *Provider) *[]time.Duration {
	var waits []time.Duration
	clock := time.Unix(1_700_000_000, 0)
	p.now = func() time.Time { return clock }
	p.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		clock = clock.Add(d)
		return ctx.Err()
	}
	return &waits
}

var goodDevice = map[string]any{
	"device_code": "dc-secret", "user_code": "ABCD-EFGH",
	"verification_uri": "https://idp.example/device", "expires_in": 600, "interval": 1,
}

func TestStartDevice(t *testing.T) {
	s := newScriptedIdP(t, goodDevice)
	dc, err := s.provider().StartDevice(t.Context(), nil, testClient, nil)
	if err != nil {
		t.Fatal(err)
	}
	if dc.DeviceCode != "dc-secret" || dc.UserCode != "ABCD-EFGH" || dc.Interval != time.Second || dc.ExpiresIn != 10*time.Minute {
		t.Errorf("device code = %#v", dc)
	}
	if got := s.got()[0]; got["client_id"] != testClient || got["scope"] != "openid profile offline_access" {
		t.Errorf("form = %v, want client_id and the default scopes", got)
	}
	if str := dc.String(); str == "" || strings.Contains(str, "dc-secret") {
		t.Errorf("String() = %q leaks the device code", str)
	}
}

func TestStartDeviceRefuses(t *testing.T) {
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for kk, vv := range goodDevice {
			m[kk] = vv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name    string
		device  map[string]any
		wantErr error
	}{
		{name: "http non-loopback verification uri", device: with("verification_uri", "http://idp.example/device"), wantErr: ErrInsecureURL},
		{name: "http non-loopback complete uri", device: with("verification_uri_complete", "http://idp.example/d?c=1"), wantErr: ErrInsecureURL},
		{name: "no device_code", device: with("device_code", nil)},
		{name: "no user_code", device: with("user_code", nil)},
		{name: "no expires_in", device: with("expires_in", nil)},
		{name: "interval too long", device: with("interval", 3600)},
		{name: "negative interval", device: with("interval", -1)},
		{name: "provider error", device: map[string]any{"error": "invalid_client"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newScriptedIdP(t, tt.device)
			_, err := s.provider().StartDevice(t.Context(), nil, testClient, nil)
			if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Errorf("StartDevice = %v, want error %v", err, tt.wantErr)
			}
		})
	}
	t.Run("no device endpoint", func(t *testing.T) {
		p := &Provider{Issuer: "https://idp.example"}
		if _, err := p.StartDevice(t.Context(), nil, testClient, nil); !errors.Is(err, ErrNoDeviceFlow) {
			t.Errorf("StartDevice = %v, want ErrNoDeviceFlow", err)
		}
	})
}

func TestPollDevice(t *testing.T) {
	pending := map[string]any{"error": "authorization_pending"}
	tokens := map[string]any{"id_token": "h.p.s", "access_token": "at", "refresh_token": "rt", "expires_in": "300", "token_type": "Bearer"}
	tests := []struct {
		name      string
		script    []map[string]any
		wantWaits []time.Duration
		wantErr   error // nil means success
		wantCode  string
	}{
		{
			name:      "slow_down adds 5 s",
			script:    []map[string]any{{"error": "slow_down"}, pending, tokens},
			wantWaits: []time.Duration{time.Second, 6 * time.Second, 6 * time.Second},
		},
		{
			name:      "pending then tokens",
			script:    []map[string]any{pending, pending, tokens},
			wantWaits: []time.Duration{time.Second, time.Second, time.Second},
		},
		{name: "access_denied", script: []map[string]any{pending, {"error": "access_denied"}}, wantErr: ErrAccessDenied},
		{name: "expired_token", script: []map[string]any{{"error": "expired_token"}}, wantErr: ErrExpiredToken},
		{name: "other provider error", script: []map[string]any{{"error": "invalid_grant"}}, wantCode: "invalid_grant"},
		{name: "no id_token", script: []map[string]any{{"access_token": "opaque"}}, wantCode: "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newScriptedIdP(t, goodDevice, tt.script...)
			p := s.provider()
			waits := fakeTime(p)
			dc, err := p.StartDevice(t.Context(), nil, testClient, []string{"openid"})
			if err != nil {
				t.Fatal(err)
			}
			toks, err := p.PollDevice(t.Context(), nil, testClient, dc)
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("PollDevice = %v, want %v", err, tt.wantErr)
				}
				return
			case tt.wantCode == "-":
				if err == nil {
					t.Fatal("PollDevice accepted a response without id_token")
				}
				return
			case tt.wantCode != "":
				if oe, ok := errors.AsType[*OAuthError](err); !ok || oe.Code != tt.wantCode {
					t.Fatalf("PollDevice = %v, want OAuthError %s", err, tt.wantCode)
				}
				return
			case err != nil:
				t.Fatalf("PollDevice: %v", err)
			}
			if toks.IDToken != "h.p.s" || toks.RefreshToken != "rt" || toks.AccessToken != "at" || toks.Expiry.IsZero() {
				t.Errorf("tokens = %#v", toks)
			}
			if !slices.Equal(*waits, tt.wantWaits) {
				t.Errorf("waits = %v, want %v", *waits, tt.wantWaits)
			}
			forms := s.got()
			last := forms[len(forms)-1]
			if last["grant_type"] != DeviceGrantType || last["device_code"] != "dc-secret" || last["client_id"] != testClient {
				t.Errorf("poll form = %v", last)
			}
		})
	}
}

func TestPollDeviceExpiresOnTheClientClock(t *testing.T) {
	pending := map[string]any{"error": "authorization_pending"}
	script := make([]map[string]any, 0, 20)
	for range 20 {
		script = append(script, pending)
	}
	s := newScriptedIdP(t, map[string]any{
		"device_code": "dc", "user_code": "U", "verification_uri": "https://idp.example/d", "expires_in": 10, "interval": 3,
	}, script...)
	p := s.provider()
	waits := fakeTime(p)
	dc, err := p.StartDevice(t.Context(), nil, testClient, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollDevice(t.Context(), nil, testClient, dc); !errors.Is(err, ErrExpiredToken) {
		t.Fatalf("PollDevice = %v, want ErrExpiredToken", err)
	}
	if len(*waits) != 3 {
		t.Errorf("waits = %v, want three 3 s waits inside 10 s", *waits)
	}
}

func TestRefreshKeepsOldRefreshToken(t *testing.T) {
	tests := []struct {
		name   string
		answer map[string]any
		wantRT string
	}{
		{name: "none returned", answer: map[string]any{"id_token": "a.b.c"}, wantRT: "old-rt"},
		{name: "rotated", answer: map[string]any{"id_token": "a.b.c", "refresh_token": "new-rt"}, wantRT: "new-rt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newScriptedIdP(t, nil, tt.answer)
			toks, err := s.provider().Refresh(t.Context(), nil, testClient, "old-rt")
			if err != nil {
				t.Fatal(err)
			}
			if toks.RefreshToken != tt.wantRT {
				t.Errorf("refresh token = %q, want %q", toks.RefreshToken, tt.wantRT)
			}
			if f := s.got()[0]; f["grant_type"] != "refresh_token" || f["refresh_token"] != "old-rt" || f["client_id"] != testClient {
				t.Errorf("form = %v", f)
			}
		})
	}
	t.Run("invalid_grant", func(t *testing.T) {
		s := newScriptedIdP(t, nil, map[string]any{"error": "invalid_grant"})
		if _, err := s.provider().Refresh(t.Context(), nil, testClient, "old-rt"); !errors.Is(err, ErrInvalidGrant) {
			t.Errorf("Refresh = %v, want ErrInvalidGrant", err)
		}
	})
}
