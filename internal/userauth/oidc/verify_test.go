package oidc

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const testClient = "cotal-cli"

// baseClaims are valid claims for tp's issuer, issued at now.
func baseClaims(issuer string, now time.Time) map[string]any {
	return map[string]any{
		"iss": issuer,
		"aud": testClient,
		"sub": "alice",
		"iat": now.Unix(),
		"exp": now.Add(10 * time.Minute).Unix(),
	}
}

func TestVerifyAccepts(t *testing.T) {
	keys := newTestKeys(t)
	tp := newTestProvider(t, keys.jwks(t))
	v := NewVerifier(tp.provider(), testClient, nil)
	now := time.Now()

	tests := []struct {
		name     string
		header   map[string]any
		claims   func(c map[string]any)
		wantName string
	}{
		{name: "RS256 2048-bit", header: map[string]any{"alg": "RS256", "kid": "rsa", "typ": "JWT"}},
		{name: "ES256", header: map[string]any{"alg": "ES256", "kid": "ec"}},
		{name: "EdDSA", header: map[string]any{"alg": "EdDSA", "kid": "ed"}},
		{
			name:     "preferred_username wins",
			header:   map[string]any{"alg": "EdDSA", "kid": "ed"},
			claims:   func(c map[string]any) { c["preferred_username"] = "al"; c["name"] = "Alice"; c["email"] = "a@x" },
			wantName: "al",
		},
		{
			name:     "name when no preferred_username, non-string ignored",
			header:   map[string]any{"alg": "EdDSA", "kid": "ed"},
			claims:   func(c map[string]any) { c["preferred_username"] = 7; c["name"] = "Alice" },
			wantName: "Alice",
		},
		{
			name:     "email last",
			header:   map[string]any{"alg": "EdDSA", "kid": "ed"},
			claims:   func(c map[string]any) { c["email"] = "alice@example.com" },
			wantName: "alice@example.com",
		},
		{
			name:   "aud array with azp",
			header: map[string]any{"alg": "ES256", "kid": "ec"},
			claims: func(c map[string]any) { c["aud"] = []string{"other", testClient}; c["azp"] = testClient },
		},
		{
			name:   "single-entry aud array without azp",
			header: map[string]any{"alg": "RS256", "kid": "rsa"},
			claims: func(c map[string]any) { c["aud"] = []string{testClient} },
		},
		{
			name:   "expired within tolerance",
			header: map[string]any{"alg": "EdDSA", "kid": "ed"},
			claims: func(c map[string]any) {
				c["iat"] = now.Add(-time.Hour).Unix()
				c["exp"] = now.Add(-2 * time.Second).Unix()
			},
		},
		{
			name:   "nbf and iat slightly ahead",
			header: map[string]any{"alg": "EdDSA", "kid": "ed"},
			claims: func(c map[string]any) {
				c["nbf"] = now.Add(2 * time.Second).Unix()
				c["iat"] = now.Add(2 * time.Second).Unix()
			},
		},
		{
			name:   "fractional dates",
			header: map[string]any{"alg": "EdDSA", "kid": "ed"},
			claims: func(c map[string]any) { c["iat"] = float64(now.Unix()) + 0.5 },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := baseClaims(tp.srv.URL, now)
			if tt.claims != nil {
				tt.claims(c)
			}
			id, err := v.Verify(t.Context(), keys.forge(t, tt.header, c, false))
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if id.Subject != "alice" || id.Issuer != tp.srv.URL || id.Name != tt.wantName {
				t.Errorf("identity = %+v, want sub alice, name %q", id, tt.wantName)
			}
			if exp, _ := c["exp"].(int64); id.Expires.Unix() != exp {
				t.Errorf("Expires = %v, want unix %d", id.Expires, exp)
			}
		})
	}
	if n := tp.fetches.Load(); n != 1 {
		t.Errorf("jwks fetched %d times, want 1 (cached)", n)
	}
}

func TestVerifyRefuses(t *testing.T) {
	keys := newTestKeys(t)
	tp := newTestProvider(t, keys.jwks(t))
	v := NewVerifier(tp.provider(), testClient, nil)
	now := time.Now()
	ed := func() map[string]any { return map[string]any{"alg": "EdDSA", "kid": "ed"} }
	with := func(k string, val any) map[string]any { h := ed(); h[k] = val; return h }

	tests := []struct {
		name       string
		header     map[string]any
		claims     func(c map[string]any)
		weak       bool
		token      func(good string) string // replaces the forged token when set
		wantReason string
	}{
		{name: "alg none", header: map[string]any{"alg": "none", "kid": "ed"}, wantReason: `alg "none"`},
		{name: "HS256 with the public key as secret", header: map[string]any{"alg": "HS256", "kid": "ed"}, wantReason: `alg "HS256"`},
		{name: "RS384 not allowed", header: map[string]any{"alg": "RS384", "kid": "rsa"}, wantReason: `alg "RS384"`},
		{name: "alg missing", header: map[string]any{"kid": "ed"}, wantReason: `alg ""`},
		{name: "RS256 1024-bit key", header: map[string]any{"alg": "RS256", "kid": "rsa-weak"}, weak: true, wantReason: "unusable key"},
		{name: "jku header", header: with("jku", "https://evil.example/jwks"), wantReason: `"jku"`},
		{name: "jwk header", header: with("jwk", map[string]any{"kty": "OKP"}), wantReason: `"jwk"`},
		{name: "x5u header", header: with("x5u", "https://evil.example/cert"), wantReason: `"x5u"`},
		{name: "x5c header", header: with("x5c", []string{"MIIB"}), wantReason: `"x5c"`},
		{name: "crit header", header: with("crit", []string{"b64"}), wantReason: `"crit"`},
		{name: "access token typ", header: with("typ", "at+jwt"), wantReason: "typ"},
		{name: "no kid", header: map[string]any{"alg": "EdDSA"}, wantReason: "no kid"},
		{name: "wrong iss", claims: func(c map[string]any) { c["iss"] = "https://other.example" }, wantReason: "iss"},
		{name: "iss missing", claims: func(c map[string]any) { delete(c, "iss") }, wantReason: "iss"},
		{name: "wrong aud", claims: func(c map[string]any) { c["aud"] = "other-client" }, wantReason: "aud"},
		{name: "aud missing", claims: func(c map[string]any) { delete(c, "aud") }, wantReason: "aud"},
		{name: "aud not a string", claims: func(c map[string]any) { c["aud"] = 42 }, wantReason: "claims"},
		{name: "multi-aud without azp", claims: func(c map[string]any) { c["aud"] = []string{testClient, "other"} }, wantReason: "no azp"},
		{name: "azp of another client", claims: func(c map[string]any) { c["azp"] = "other" }, wantReason: "azp"},
		{name: "expired", claims: func(c map[string]any) { c["iat"] = now.Add(-time.Hour).Unix(); c["exp"] = now.Add(-time.Minute).Unix() }, wantReason: "expired"},
		{name: "exp missing", claims: func(c map[string]any) { delete(c, "exp") }, wantReason: "no exp"},
		{name: "exp as string", claims: func(c map[string]any) { c["exp"] = "9999999999" }, wantReason: "claims"},
		{name: "iat missing", claims: func(c map[string]any) { delete(c, "iat") }, wantReason: "no iat"},
		{name: "iat in the future", claims: func(c map[string]any) { c["iat"] = now.Add(time.Minute).Unix() }, wantReason: "future"},
		{name: "exp before iat", claims: func(c map[string]any) { c["iat"] = now.Unix(); c["exp"] = now.Add(-time.Second).Unix() }, wantReason: "after iat"},
		{name: "nbf in the future", claims: func(c map[string]any) { c["nbf"] = now.Add(time.Minute).Unix() }, wantReason: "not valid before"},
		{name: "empty sub", claims: func(c map[string]any) { c["sub"] = "" }, wantReason: "empty sub"},
		{name: "sub missing", claims: func(c map[string]any) { delete(c, "sub") }, wantReason: "empty sub"},
		{name: "sub over 255 bytes", claims: func(c map[string]any) { c["sub"] = strings.Repeat("a", 256) }, wantReason: "over 255"},
		{name: "unknown kid", header: map[string]any{"alg": "EdDSA", "kid": "nope"}, wantReason: "unknown kid"},
		{name: "kid of another alg", header: map[string]any{"alg": "ES256", "kid": "ed"}, wantReason: "does not fit"},
		{name: "RS256 naming the EC key", header: map[string]any{"alg": "RS256", "kid": "ec"}, wantReason: "does not fit"},
		{name: "kid of a symmetric key", header: map[string]any{"alg": "EdDSA", "kid": "sym"}, wantReason: "does not fit"},
		{
			name:       "tampered signature",
			token:      func(good string) string { return flipLast(good) },
			wantReason: "bad EdDSA signature",
		},
		{
			name: "tampered payload",
			token: func(good string) string {
				p := strings.Split(good, ".")
				p[1] = enc([]byte(`{"iss":"x","sub":"mallory"}`))
				return strings.Join(p, ".")
			},
			wantReason: "signature",
		},
		{name: "two segments", token: func(string) string { return "eyJhbGciOiJFZERTQSJ9.e30" }, wantReason: "segments"},
		{name: "four segments", token: func(good string) string { return good + ".x" }, wantReason: "segments"},
		{name: "empty signature", token: func(good string) string { return good[:strings.LastIndex(good, ".")+1] }, wantReason: "empty signature"},
		{name: "header not base64url", token: func(good string) string { return "*" + good[1:] }, wantReason: "base64url"},
		{name: "padded base64", token: func(good string) string { p := strings.Split(good, "."); return p[0] + "=." + p[1] + "." + p[2] }, wantReason: "base64url"},
		{name: "header not JSON", token: func(good string) string {
			p := strings.Split(good, ".")
			return enc([]byte("nope")) + "." + p[1] + "." + p[2]
		}, wantReason: "JSON object"},
		{name: "header an array", token: func(good string) string {
			p := strings.Split(good, ".")
			return enc([]byte("[]")) + "." + p[1] + "." + p[2]
		}, wantReason: "JSON object"},
		{name: "oversized", token: func(good string) string { return good + strings.Repeat("A", maxTokenLen) }, wantReason: "bytes, over"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.header
			if h == nil {
				h = ed()
			}
			c := baseClaims(tp.srv.URL, now)
			if tt.claims != nil {
				tt.claims(c)
			}
			tok := keys.forge(t, h, c, tt.weak)
			if tt.token != nil {
				tok = tt.token(keys.forge(t, ed(), baseClaims(tp.srv.URL, now), false))
			}
			_, err := v.Verify(t.Context(), tok)
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("Verify error = %v, want ErrInvalidToken", err)
			}
			te, ok := errors.AsType[*TokenError](err)
			if !ok || !strings.Contains(te.Error(), tt.wantReason) {
				t.Errorf("Verify error = %v, want a reason containing %q", err, tt.wantReason)
			}
		})
	}
}

// flipLast changes the token's last signature character.
func flipLast(tok string) string {
	b := []byte(tok)
	i := len(b) - 2 // not the very last, whose low bits may be unused padding bits
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func TestVerifyRefetchesUnknownKidAtMostEvery30s(t *testing.T) {
	keys := newTestKeys(t)
	all := keys.jwks(t)
	tp := newTestProvider(t, all[:1]) // only the RSA key at first
	v := NewVerifier(tp.provider(), testClient, nil)
	clock := time.Now()
	v.now = func() time.Time { return clock }
	edTok := func() string {
		return keys.forge(t, map[string]any{"alg": "EdDSA", "kid": "ed"}, baseClaims(tp.srv.URL, clock), false)
	}

	// First use fetches; the kid is unknown and a refetch so soon is not allowed.
	if _, err := v.Verify(t.Context(), edTok()); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("Verify = %v, want unknown kid", err)
	}
	tp.setKeys(all) // the provider rotates the Ed25519 key in
	clock = clock.Add(10 * time.Second)
	if _, err := v.Verify(t.Context(), edTok()); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("Verify 10 s later = %v, want still unknown", err)
	}
	if n := tp.fetches.Load(); n != 1 {
		t.Fatalf("fetches = %d, want 1 within 30 s", n)
	}
	clock = clock.Add(25 * time.Second)
	if _, err := v.Verify(t.Context(), edTok()); err != nil {
		t.Fatalf("Verify 35 s later = %v, want the new key found", err)
	}
	if n := tp.fetches.Load(); n != 2 {
		t.Fatalf("fetches = %d, want 2", n)
	}
	// A withdrawn key stops verifying once the cached set is old.
	tp.setKeys(all[:1])
	clock = clock.Add(keySetMaxAge)
	if _, err := v.Verify(t.Context(), edTok()); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("Verify after withdrawal = %v, want unknown kid", err)
	}
}

func TestVerifyJWKSUnavailableIsNotATokenError(t *testing.T) {
	keys := newTestKeys(t)
	tp := newTestProvider(t, keys.jwks(t))
	p := tp.provider()
	p.JWKSURI = tp.srv.URL + "/missing"
	tok := keys.forge(t, map[string]any{"alg": "EdDSA", "kid": "ed"}, baseClaims(tp.srv.URL, time.Now()), false)
	_, err := NewVerifier(p, testClient, nil).Verify(t.Context(), tok)
	if err == nil || errors.Is(err, ErrInvalidToken) {
		t.Fatalf("Verify = %v, want a fetch error that is not ErrInvalidToken", err)
	}
}

func FuzzVerify(f *testing.F) {
	// Seeds: a well-formed header, an empty token, separators only, and a forbidden header.
	f.Add("eyJhbGciOiJFZERTQSIsImtpZCI6ImVkIn0.e30.AAAA")
	f.Add("")
	f.Add("..")
	f.Add("eyJhbGciOiJFZERTQSIsImp3ayI6e319.e30.AAAA")
	v := NewVerifier(&Provider{Issuer: "https://idp.example", JWKSURI: "http://127.0.0.1:1/jwks"}, testClient, nil)
	v.keys, v.fetchedAt, v.triedAt = keySet{}, time.Now(), time.Now()
	f.Fuzz(func(t *testing.T, tok string) {
		if _, err := v.Verify(t.Context(), tok); err == nil {
			t.Fatal("a token verified against an empty key set")
		}
	})
}
