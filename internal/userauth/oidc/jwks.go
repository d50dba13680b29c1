package oidc

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"slices"
)

const (
	// maxKeys caps the keys read from one JWKS document.
	maxKeys = 100
	// minRSABits is the smallest RSA modulus accepted.
	minRSABits = 2048
	// maxRSABits bounds the work one signature check can cost.
	maxRSABits = 8192
)

// jwk is one JSON Web Key (RFC 7517) as published in a JWKS, with the members this package reads.
type jwk struct {
	Kty    string   `json:"kty"`
	Kid    string   `json:"kid"`
	Use    string   `json:"use"`
	Alg    string   `json:"alg"`
	KeyOps []string `json:"key_ops"`
	Crv    string   `json:"crv"`
	N      string   `json:"n"`
	E      string   `json:"e"`
	X      string   `json:"x"`
	Y      string   `json:"y"`
}

// keySet maps a kid to the keys published under it (normally one).
type keySet map[string][]jwk

// fetchKeys downloads and parses the JWKS at uri. Keys without a kid are dropped, since a token
// can only name a key by kid; entries that are not JSON objects of the expected shape are skipped
// so that a key type this package does not know cannot break the others.
func fetchKeys(ctx context.Context, hc *http.Client, uri string) (keySet, error) {
	status, body, err := send(ctx, hc, http.MethodGet, uri, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch jwks: %w", err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("fetch jwks %s: status %d", uri, status)
	}
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("fetch jwks %s: decode: %w", uri, err)
	}
	if doc.Keys == nil {
		return nil, fmt.Errorf("fetch jwks %s: no keys member", uri)
	}
	if len(doc.Keys) > maxKeys {
		return nil, fmt.Errorf("fetch jwks %s: %d keys, more than %d", uri, len(doc.Keys), maxKeys)
	}
	ks := keySet{}
	for _, raw := range doc.Keys {
		var k jwk
		if err := json.Unmarshal(raw, &k); err != nil || k.Kid == "" {
			continue
		}
		ks[k.Kid] = append(ks[k.Kid], k)
	}
	return ks, nil
}

// algFits reports whether key k may verify a token signed with alg: its kty and crv must be the
// alg's, and its alg, use and key_ops, when present, must agree.
func (k jwk) algFits(alg string) bool {
	switch alg {
	case "RS256":
		if k.Kty != "RSA" || (k.Alg != "" && k.Alg != alg) {
			return false
		}
	case "ES256":
		if k.Kty != "EC" || k.Crv != "P-256" || (k.Alg != "" && k.Alg != alg) {
			return false
		}
	case "EdDSA":
		// RFC 9864 names the same algorithm "Ed25519"; a key labelled either way agrees.
		if k.Kty != "OKP" || k.Crv != "Ed25519" || (k.Alg != "" && k.Alg != alg && k.Alg != "Ed25519") {
			return false
		}
	default:
		return false
	}
	if k.Use != "" && k.Use != "sig" {
		return false
	}
	if k.KeyOps != nil && !slices.Contains(k.KeyOps, "verify") {
		return false
	}
	return true
}

// publicKey converts k, already known to fit its algorithm, into a crypto public key, refusing
// weak or malformed keys.
func (k jwk) publicKey() (crypto.PublicKey, error) {
	switch k.Kty {
	case "RSA":
		n, err := b64(k.N)
		if err != nil || len(n) == 0 {
			return nil, fmt.Errorf("rsa key %q: bad n", k.Kid)
		}
		e, err := b64(k.E)
		if err != nil || len(e) == 0 || len(e) > 4 {
			return nil, fmt.Errorf("rsa key %q: bad e", k.Kid)
		}
		mod := new(big.Int).SetBytes(n)
		if bits := mod.BitLen(); bits < minRSABits || bits > maxRSABits {
			return nil, fmt.Errorf("rsa key %q: %d-bit modulus, want %d to %d", k.Kid, bits, minRSABits, maxRSABits)
		}
		exp := new(big.Int).SetBytes(e)
		if !exp.IsInt64() || exp.Int64() < 3 || exp.Int64() > 1<<31-1 || exp.Bit(0) == 0 {
			return nil, fmt.Errorf("rsa key %q: bad exponent", k.Kid)
		}
		return &rsa.PublicKey{N: mod, E: int(exp.Int64())}, nil
	case "EC":
		x, errX := b64(k.X)
		y, errY := b64(k.Y)
		if errX != nil || errY != nil || len(x) != 32 || len(y) != 32 {
			return nil, fmt.Errorf("ec key %q: coordinates are not 32 bytes each", k.Kid)
		}
		// ParseUncompressedPublicKey also checks that the point is on the curve.
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			return nil, fmt.Errorf("ec key %q: %w", k.Kid, err)
		}
		return pub, nil
	case "OKP":
		x, err := b64(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("okp key %q: x is not %d bytes", k.Kid, ed25519.PublicKeySize)
		}
		return ed25519.PublicKey(x), nil
	}
	return nil, fmt.Errorf("key %q: unsupported kty %q", k.Kid, k.Kty)
}
