package devidp

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
)

// thumbprint returns the RFC 7638 JWK thumbprint of an Ed25519 public key, used as its kid.
func thumbprint(pub ed25519.PublicKey) string {
	// RFC 7638 §3.2: the required members in lexicographic order, no whitespace.
	canon := `{"crv":"Ed25519","kty":"OKP","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}`
	sum := sha256.Sum256([]byte(canon))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// jwks returns the server's key set document.
func (s *Server) jwks() map[string]any {
	pub := s.key.Public().(ed25519.PublicKey)
	return map[string]any{"keys": []map[string]string{{
		"kty": "OKP",
		"crv": "Ed25519",
		"x":   base64.RawURLEncoding.EncodeToString(pub),
		"kid": s.kid,
		"alg": "EdDSA",
		"use": "sig",
	}}}
}

// idToken signs an ID token for user, issued now.
func (s *Server) idToken(user string, now time.Time) (string, error) {
	hdr, err := json.Marshal(map[string]string{"alg": "EdDSA", "typ": "JWT", "kid": s.kid})
	if err != nil {
		return "", fmt.Errorf("encode id token header: %w", err)
	}
	iat := now.Unix()
	body, err := json.Marshal(map[string]any{
		"iss":                s.base,
		"aud":                s.clientID,
		"sub":                user,
		"preferred_username": user,
		"iat":                iat,
		"nbf":                iat,
		"exp":                now.Add(s.lifetime).Unix(),
	})
	if err != nil {
		return "", fmt.Errorf("encode id token claims: %w", err)
	}
	input := base64.RawURLEncoding.EncodeToString(hdr) + "." + base64.RawURLEncoding.EncodeToString(body)
	sig := ed25519.Sign(s.key, []byte(input))
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}
