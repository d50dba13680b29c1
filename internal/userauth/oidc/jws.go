package oidc

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"strings"
)

// maxTokenLen caps the size of an ID token accepted for parsing.
const maxTokenLen = 64 << 10

// forbiddenHeaders are JOSE header members that would let a token choose its own key or carry
// extensions this verifier does not understand; a token with any of them is refused outright.
var forbiddenHeaders = []string{"jku", "jwk", "x5u", "x5c", "crit"}

// jws is a compact JWS split into its parts, signature not yet checked.
type jws struct {
	alg, kid     string
	signingInput string // base64url(header) "." base64url(payload)
	payload      []byte
	sig          []byte
}

// b64 decodes unpadded base64url strictly.
func b64(s string) ([]byte, error) {
	return base64.RawURLEncoding.Strict().DecodeString(s)
}

// parseJWS splits a compact JWS and checks its header: an allowed alg, a kid, and none of the
// forbidden members.
func parseJWS(token string) (*jws, error) {
	if len(token) > maxTokenLen {
		return nil, invalid("token is %d bytes, over %d", len(token), maxTokenLen)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, invalid("token has %d segments, want 3", len(parts))
	}
	for i, name := range []string{"header", "payload", "signature"} {
		if parts[i] == "" {
			return nil, invalid("empty %s segment", name)
		}
	}
	hb, err := b64(parts[0])
	if err != nil {
		return nil, invalidCause("header is not base64url", err)
	}
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(hb, &hdr); err != nil || hdr == nil {
		return nil, invalidCause("header is not a JSON object", err)
	}
	for _, name := range forbiddenHeaders {
		if _, ok := hdr[name]; ok {
			return nil, invalid("header member %q is not allowed", name)
		}
	}
	var h struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
		Typ string `json:"typ"`
	}
	if err := json.Unmarshal(hb, &h); err != nil {
		return nil, invalidCause("header members have the wrong types", err)
	}
	switch h.Alg {
	case "RS256", "ES256", "EdDSA":
	default:
		return nil, invalid("alg %q is not allowed", h.Alg)
	}
	if h.Typ != "" && !strings.EqualFold(h.Typ, "JWT") && !strings.EqualFold(h.Typ, "application/jwt") {
		return nil, invalid("typ %q is not an ID token type", h.Typ)
	}
	if h.Kid == "" {
		return nil, invalid("header has no kid")
	}
	payload, err := b64(parts[1])
	if err != nil {
		return nil, invalidCause("payload is not base64url", err)
	}
	sig, err := b64(parts[2])
	if err != nil {
		return nil, invalidCause("signature is not base64url", err)
	}
	return &jws{
		alg:          h.Alg,
		kid:          h.Kid,
		signingInput: parts[0] + "." + parts[1],
		payload:      payload,
		sig:          sig,
	}, nil
}

// verifySignature checks the JWS signature with pub, whose type must match the alg.
func (t *jws) verifySignature(pub crypto.PublicKey) error {
	switch t.alg {
	case "RS256":
		k, ok := pub.(*rsa.PublicKey)
		if !ok {
			return invalid("key %q is not an RSA key", t.kid)
		}
		h := sha256.Sum256([]byte(t.signingInput))
		if err := rsa.VerifyPKCS1v15(k, crypto.SHA256, h[:], t.sig); err != nil {
			return invalid("bad RS256 signature")
		}
		return nil
	case "ES256":
		k, ok := pub.(*ecdsa.PublicKey)
		if !ok {
			return invalid("key %q is not an EC key", t.kid)
		}
		// JWS carries r and s as two fixed 32-byte big-endian halves (RFC 7518 §3.4), not ASN.1.
		if len(t.sig) != 64 {
			return invalid("ES256 signature is %d bytes, want 64", len(t.sig))
		}
		r := new(big.Int).SetBytes(t.sig[:32])
		s := new(big.Int).SetBytes(t.sig[32:])
		h := sha256.Sum256([]byte(t.signingInput))
		if !ecdsa.Verify(k, h[:], r, s) {
			return invalid("bad ES256 signature")
		}
		return nil
	case "EdDSA":
		k, ok := pub.(ed25519.PublicKey)
		if !ok {
			return invalid("key %q is not an Ed25519 key", t.kid)
		}
		if len(t.sig) != ed25519.SignatureSize || !ed25519.Verify(k, []byte(t.signingInput), t.sig) {
			return invalid("bad EdDSA signature")
		}
		return nil
	}
	return invalid("alg %q is not allowed", t.alg)
}
