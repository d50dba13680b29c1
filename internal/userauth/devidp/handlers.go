package devidp

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"
)

// deviceGrantType is the grant_type of a device code redemption (RFC 8628 §3.4).
const deviceGrantType = "urn:ietf:params:oauth:grant-type:device_code"

// knownScopes are the scopes a client may ask for; openid is required.
var knownScopes = []string{"openid", "profile", "email", "offline_access"}

// routes returns the server's handler, with the loopback Host check in front of every route.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", s.handleDiscovery)
	mux.HandleFunc("GET /jwks", s.handleJWKS)
	mux.HandleFunc("POST /device/code", s.handleDeviceCode)
	mux.HandleFunc("POST /token", s.handleToken)
	mux.HandleFunc("POST /revoke", s.handleRevoke)
	mux.HandleFunc("GET /device", s.handlePage)
	mux.HandleFunc("POST /device", s.handlePageSubmit)
	mux.HandleFunc("POST /device/approve", s.handleApprove)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A page on another origin could point a DNS name at 127.0.0.1 (DNS rebinding); its
		// requests carry that name as Host, so only loopback names are served.
		if !isLoopbackHost(hostFromHeader(r.Host)) {
			http.Error(w, "host not allowed", http.StatusMisdirectedRequest)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		mux.ServeHTTP(w, r)
	})
}

// writeJSON writes v as a JSON response with status, never cached.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away; nothing to do
}

// oauthError writes an OAuth error response (RFC 6749 §5.2).
func oauthError(w http.ResponseWriter, code, desc string) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": code, "error_description": desc})
}

// parseForm parses a form body, answering invalid_request itself when it cannot.
func parseForm(w http.ResponseWriter, r *http.Request) bool {
	if err := r.ParseForm(); err != nil {
		if _, tooBig := errors.AsType[*http.MaxBytesError](err); tooBig {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "invalid_request", "error_description": "body too large"})
			return false
		}
		oauthError(w, "invalid_request", "body is not a form")
		return false
	}
	return true
}

func (s *Server) handleDiscovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                s.base,
		"device_authorization_endpoint":         s.base + "/device/code",
		"token_endpoint":                        s.base + "/token",
		"jwks_uri":                              s.base + "/jwks",
		"revocation_endpoint":                   s.base + "/revoke",
		"id_token_signing_alg_values_supported": []string{"EdDSA"},
		"grant_types_supported":                 []string{deviceGrantType, "refresh_token"},
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"scopes_supported":                      knownScopes,
		"token_endpoint_auth_methods_supported": []string{"none"},
		"claims_supported":                      []string{"iss", "aud", "sub", "preferred_username", "iat", "nbf", "exp"},
	})
}

func (s *Server) handleJWKS(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.jwks())
}

// handleDeviceCode starts a device login (RFC 8628 §3.1–3.2).
func (s *Server) handleDeviceCode(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	if r.PostForm.Get("client_id") != s.clientID {
		oauthError(w, "invalid_client", "unknown client_id")
		return
	}
	scope, ok := parseScope(r.PostForm.Get("scope"))
	if !ok {
		oauthError(w, "invalid_scope", "scope must include openid and only "+strings.Join(knownScopes, ", "))
		return
	}
	dc, uc, err := s.newDevice(scope)
	if err != nil {
		s.log.Warn("device login refused", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "temporarily_unavailable"})
		return
	}
	code := formatUserCode(uc)
	writeJSON(w, http.StatusOK, map[string]any{
		"device_code":               dc,
		"user_code":                 code,
		"verification_uri":          s.base + "/device",
		"verification_uri_complete": s.base + "/device?user_code=" + code,
		"expires_in":                int(deviceCodeLifetime / time.Second),
		"interval":                  int((s.interval + time.Second - 1) / time.Second),
	})
}

// parseScope splits a scope string; empty means openid, profile and offline_access.
func parseScope(in string) ([]string, bool) {
	scope := strings.Fields(in)
	if len(scope) == 0 {
		scope = []string{"openid", "profile", "offline_access"}
	}
	for _, sc := range scope {
		if !slices.Contains(knownScopes, sc) {
			return nil, false
		}
	}
	return scope, slices.Contains(scope, "openid")
}

// handleToken redeems a device code or a refresh token (RFC 8628 §3.4, RFC 6749 §6).
func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	if r.PostForm.Get("client_id") != s.clientID {
		oauthError(w, "invalid_client", "unknown client_id")
		return
	}
	switch r.PostForm.Get("grant_type") {
	case deviceGrantType:
		s.redeemDevice(w, r.PostForm.Get("device_code"))
	case "refresh_token":
		s.redeemRefresh(w, r.PostForm.Get("refresh_token"))
	default:
		oauthError(w, "unsupported_grant_type", "grant_type must be device_code or refresh_token")
	}
}

// handleRevoke revokes a refresh token (RFC 7009): it redeems nothing afterwards. An unknown or
// spent token, or one of another kind, is answered 200 alike (§2.2); an unknown client is not.
func (s *Server) handleRevoke(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	if r.PostForm.Get("client_id") != s.clientID {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client", "error_description": "unknown client_id"})
		return
	}
	tok := r.PostForm.Get("token")
	if tok == "" {
		oauthError(w, "invalid_request", "token is required")
		return
	}
	s.mu.Lock()
	delete(s.refresh, tok)
	s.mu.Unlock()
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

// redeemDevice answers one device poll. A code is spent by the response that carries tokens, or
// by a denial; later polls with it get invalid_grant.
func (s *Server) redeemDevice(w http.ResponseWriter, dc string) {
	s.mu.Lock()
	now := s.now()
	g := s.devices[dc]
	switch {
	case dc == "" || g == nil:
		s.mu.Unlock()
		oauthError(w, "invalid_grant", "unknown or spent device code")
		return
	case !now.Before(g.expires):
		s.dropDeviceLocked(dc, g)
		s.mu.Unlock()
		oauthError(w, "expired_token", "device code expired")
		return
	case !g.lastPoll.IsZero() && now.Sub(g.lastPoll) < g.interval:
		g.interval += 5 * time.Second
		g.lastPoll = now
		s.mu.Unlock()
		oauthError(w, "slow_down", "polling too fast")
		return
	}
	g.lastPoll = now
	switch {
	case g.denied:
		s.dropDeviceLocked(dc, g)
		s.mu.Unlock()
		oauthError(w, "access_denied", "the login was denied")
		return
	case g.user == "":
		s.mu.Unlock()
		oauthError(w, "authorization_pending", "waiting for approval")
		return
	}
	s.dropDeviceLocked(dc, g)
	s.mu.Unlock()
	s.issue(w, g.user, g.scope, now)
}

// redeemRefresh redeems a refresh token, rotating it: the old one is spent.
func (s *Server) redeemRefresh(w http.ResponseWriter, rt string) {
	s.mu.Lock()
	now := s.now()
	g := s.refresh[rt]
	if rt == "" || g == nil || !now.Before(g.expires) {
		delete(s.refresh, rt)
		s.mu.Unlock()
		oauthError(w, "invalid_grant", "unknown, spent or expired refresh token")
		return
	}
	delete(s.refresh, rt)
	s.mu.Unlock()
	s.issue(w, g.user, g.scope, now)
}

// issue writes a token response for user: an ID token, an opaque access token, and a refresh
// token when offline_access was granted.
func (s *Server) issue(w http.ResponseWriter, user string, scope []string, now time.Time) {
	idt, err := s.idToken(user, now)
	if err != nil {
		s.log.Error("id token not signed", "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "server_error"})
		return
	}
	resp := map[string]any{
		"id_token":     idt,
		"access_token": rand.Text(),
		"token_type":   "Bearer",
		"expires_in":   int(s.lifetime / time.Second),
		"scope":        strings.Join(scope, " "),
	}
	if slices.Contains(scope, "offline_access") {
		rt := rand.Text()
		s.mu.Lock()
		if len(s.refresh) >= maxRefresh {
			s.sweepLocked(now)
		}
		if len(s.refresh) < maxRefresh {
			s.refresh[rt] = &refreshGrant{user: user, scope: scope, expires: now.Add(refreshLifetime)}
			resp["refresh_token"] = rt
		}
		s.mu.Unlock()
	}
	s.log.Info("tokens issued", "user", user)
	writeJSON(w, http.StatusOK, resp)
}
