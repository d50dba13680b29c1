package oidc

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// testKeys are the signing keys of the in-test provider, one per algorithm plus a weak RSA key.
type testKeys struct {
	rsa     *rsa.PrivateKey // 2048-bit, kid "rsa"
	rsaWeak *rsa.PrivateKey // 1024-bit, kid "rsa-weak"
	ec      *ecdsa.PrivateKey
	ed      ed25519.PrivateKey
}

// newTestKeys generates the keys once per test.
func newTestKeys(t *testing.T) *testKeys {
	t.Helper()
	r, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &testKeys{rsa: r, rsaWeak: weak, ec: ec, ed: ed}
}

func enc(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jwks renders the public keys as a JWKS document, as a standard provider would publish them.
func (k *testKeys) jwks(t *testing.T) []map[string]any {
	t.Helper()
	rsaJWK := func(kid string, p *rsa.PublicKey) map[string]any {
		return map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
			"n": enc(p.N.Bytes()), "e": enc(big.NewInt(int64(p.E)).Bytes())}
	}
	ecPub, err := k.ec.PublicKey.Bytes() // 0x04 || X || Y
	if err != nil {
		t.Fatal(err)
	}
	return []map[string]any{
		rsaJWK("rsa", &k.rsa.PublicKey),
		rsaJWK("rsa-weak", &k.rsaWeak.PublicKey),
		{"kty": "EC", "kid": "ec", "crv": "P-256", "use": "sig", "alg": "ES256", "x": enc(ecPub[1:33]), "y": enc(ecPub[33:])},
		{"kty": "OKP", "kid": "ed", "crv": "Ed25519", "use": "sig", "alg": "EdDSA", "x": enc(k.ed.Public().(ed25519.PublicKey))},
		// A key this package does not know must not break the others.
		{"kty": "oct", "kid": "sym", "k": enc([]byte("not for verifying"))},
	}
}

// sign returns the signature of input by the key for alg ("RS256" uses weak if weak is set).
func (k *testKeys) sign(t *testing.T, alg string, weak bool, input []byte) []byte {
	t.Helper()
	h := sha256.Sum256(input)
	switch alg {
	case "RS256":
		key := k.rsa
		if weak {
			key = k.rsaWeak
		}
		sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, h[:])
		if err != nil {
			t.Fatal(err)
		}
		return sig
	case "ES256":
		r, s, err := ecdsa.Sign(rand.Reader, k.ec, h[:])
		if err != nil {
			t.Fatal(err)
		}
		sig := make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
		return sig
	case "EdDSA":
		return ed25519.Sign(k.ed, input)
	case "HS256":
		// The classic confusion attack: the public key used as an HMAC secret.
		m := hmac.New(sha256.New, k.ed.Public().(ed25519.PublicKey))
		m.Write(input)
		return m.Sum(nil)
	}
	return []byte("no-signature")
}

// forge builds a compact JWS from header and claims, signed for header["alg"].
func (k *testKeys) forge(t *testing.T, header, claims map[string]any, weak bool) string {
	t.Helper()
	hb, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	input := enc(hb) + "." + enc(cb)
	alg, _ := header["alg"].(string)
	return input + "." + enc(k.sign(t, alg, weak, []byte(input)))
}

// testProvider is a tiny standard provider: discovery and a JWKS, served by httptest.
type testProvider struct {
	srv     *httptest.Server
	fetches atomic.Int32 // JWKS downloads

	mu   sync.Mutex
	keys []map[string]any // guarded by mu
	meta map[string]any   // guarded by mu; nil means the default document
}

// newTestProvider starts a provider publishing keys; it closes with the test.
func newTestProvider(t *testing.T, keys []map[string]any) *testProvider {
	t.Helper()
	tp := &testProvider{keys: keys}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		tp.mu.Lock()
		meta := tp.meta
		tp.mu.Unlock()
		if meta == nil {
			meta = map[string]any{
				"issuer":                        tp.srv.URL,
				"token_endpoint":                tp.srv.URL + "/token",
				"device_authorization_endpoint": tp.srv.URL + "/device",
				"jwks_uri":                      tp.srv.URL + "/jwks",
			}
		}
		_ = json.NewEncoder(w).Encode(meta) // test server; the client reports failures
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		tp.fetches.Add(1)
		tp.mu.Lock()
		defer tp.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": tp.keys}) // test server
	})
	tp.srv = httptest.NewServer(mux)
	t.Cleanup(tp.srv.Close)
	return tp
}

// provider returns the Provider for tp without discovery.
func (tp *testProvider) provider() *Provider {
	return &Provider{Issuer: tp.srv.URL, TokenEndpoint: tp.srv.URL + "/token", JWKSURI: tp.srv.URL + "/jwks"}
}

// setKeys replaces the published keys.
func (tp *testProvider) setKeys(keys []map[string]any) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.keys = keys
}

// setMeta replaces the discovery document.
func (tp *testProvider) setMeta(m map[string]any) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.meta = m
}
