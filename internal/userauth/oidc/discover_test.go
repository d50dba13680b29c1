package oidc

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCheckURL(t *testing.T) {
	tests := []struct {
		url      string
		ok       bool
		insecure bool // the refusal is ErrInsecureURL
	}{
		{url: "https://idp.example.com", ok: true},
		{url: "https://idp.example.com/tenant/x", ok: true},
		{url: "http://127.0.0.1:4780", ok: true},
		{url: "http://127.8.0.1", ok: true},
		{url: "http://[::1]:80/x", ok: true},
		{url: "http://localhost:8080", ok: true},
		{url: "http://LOCALHOST", ok: true},
		{url: "http://idp.example.com", insecure: true},
		{url: "http://10.0.0.1", insecure: true},
		{url: "http://localhost.evil.example", insecure: true},
		{url: "http://127.0.0.1.nip.io", insecure: true},
		{url: "ftp://127.0.0.1", insecure: true},
		{url: "file:///etc/passwd"},
		{url: "https://user:pw@idp.example.com"},
		{url: "https://idp.example.com/#frag"},
		{url: "/relative"},
		{url: "://bad"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := CheckURL(tt.url)
			if (err == nil) != tt.ok {
				t.Fatalf("CheckURL = %v, want ok=%v", err, tt.ok)
			}
			if tt.insecure != errors.Is(err, ErrInsecureURL) {
				t.Errorf("CheckURL = %v, want ErrInsecureURL=%v", err, tt.insecure)
			}
		})
	}
}

func TestDiscover(t *testing.T) {
	tp := newTestProvider(t, nil)
	p, err := Discover(t.Context(), nil, tp.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if p.Issuer != tp.srv.URL || p.TokenEndpoint != tp.srv.URL+"/token" || p.JWKSURI != tp.srv.URL+"/jwks" ||
		p.DeviceAuthorizationEndpoint != tp.srv.URL+"/device" {
		t.Errorf("provider = %+v", p)
	}
}

func TestDiscoverRefuses(t *testing.T) {
	tests := []struct {
		name    string
		meta    func(base string) map[string]any
		wantErr error // nil means any error
	}{
		{
			name:    "mismatched issuer",
			meta:    func(base string) map[string]any { return meta(base, map[string]any{"issuer": "https://other.example"}) },
			wantErr: ErrIssuerMismatch,
		},
		{
			name:    "issuer with a trailing slash",
			meta:    func(base string) map[string]any { return meta(base, map[string]any{"issuer": base + "/"}) },
			wantErr: ErrIssuerMismatch,
		},
		{
			name: "http non-loopback token endpoint",
			meta: func(base string) map[string]any {
				return meta(base, map[string]any{"token_endpoint": "http://idp.example.com/token"})
			},
			wantErr: ErrInsecureURL,
		},
		{
			name: "http non-loopback jwks",
			meta: func(base string) map[string]any {
				return meta(base, map[string]any{"jwks_uri": "http://192.0.2.7/jwks"})
			},
			wantErr: ErrInsecureURL,
		},
		{
			name: "http non-loopback device endpoint",
			meta: func(base string) map[string]any {
				return meta(base, map[string]any{"device_authorization_endpoint": "http://idp.example.com/d"})
			},
			wantErr: ErrInsecureURL,
		},
		{name: "no jwks_uri", meta: func(base string) map[string]any { return meta(base, map[string]any{"jwks_uri": ""}) }},
		{name: "no token endpoint", meta: func(base string) map[string]any { return meta(base, map[string]any{"token_endpoint": ""}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := newTestProvider(t, nil)
			tp.setMeta(tt.meta(tp.srv.URL))
			p, err := Discover(t.Context(), nil, tp.srv.URL)
			if err == nil {
				t.Fatalf("Discover = %+v, want an error", p)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Discover error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// meta is a discovery document for base with some members replaced.
func meta(base string, over map[string]any) map[string]any {
	m := map[string]any{
		"issuer":         base,
		"token_endpoint": base + "/token",
		"jwks_uri":       base + "/jwks",
	}
	for k, v := range over {
		m[k] = v
	}
	return m
}

func TestDiscoverTransport(t *testing.T) {
	big := strings.Repeat(" ", maxBody+1)
	mux := http.NewServeMux()
	mux.HandleFunc("/redirect/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ok/.well-known/openid-configuration", http.StatusFound)
	})
	mux.HandleFunc("/big/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(big)) // the client stops reading; its error is what the test checks
	})
	mux.HandleFunc("/slow/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // answer only when the client gives up
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	t.Run("redirect refused", func(t *testing.T) {
		if _, err := Discover(t.Context(), nil, srv.URL+"/redirect"); !errors.Is(err, ErrRedirect) {
			t.Errorf("Discover = %v, want ErrRedirect", err)
		}
	})
	t.Run("redirect refused with a caller client", func(t *testing.T) {
		if _, err := Discover(t.Context(), srv.Client(), srv.URL+"/redirect"); !errors.Is(err, ErrRedirect) {
			t.Errorf("Discover = %v, want ErrRedirect", err)
		}
	})
	t.Run("body over 1 MiB", func(t *testing.T) {
		if _, err := Discover(t.Context(), nil, srv.URL+"/big"); !errors.Is(err, ErrResponseTooLarge) {
			t.Errorf("Discover = %v, want ErrResponseTooLarge", err)
		}
	})
	t.Run("timeout from the environment", func(t *testing.T) {
		t.Setenv(TimeoutEnv, "50")
		if _, err := Discover(t.Context(), nil, srv.URL+"/slow"); !isTimeout(t.Context(), err) {
			t.Errorf("Discover = %v, want a timeout", err)
		}
	})
	t.Run("bad timeout variable", func(t *testing.T) {
		t.Setenv(TimeoutEnv, "soon")
		if _, err := Discover(t.Context(), nil, srv.URL+"/slow"); err == nil || !strings.Contains(err.Error(), TimeoutEnv) {
			t.Errorf("Discover = %v, want an error naming %s", err, TimeoutEnv)
		}
	})
	t.Run("insecure issuer refused before any request", func(t *testing.T) {
		if _, err := Discover(t.Context(), nil, "http://idp.example.com"); !errors.Is(err, ErrInsecureURL) {
			t.Errorf("Discover = %v, want ErrInsecureURL", err)
		}
	})
}
