package oidc

import (
	"encoding/json"
	"testing"
)

func FuzzJWK(f *testing.F) {
	// Seeds: each supported key type, an RSA key with a 1-byte modulus, and an EC point off the
	// curve.
	f.Add(`{"kty":"OKP","crv":"Ed25519","kid":"a","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`)
	f.Add(`{"kty":"RSA","kid":"b","n":"AQ","e":"AQAB"}`)
	f.Add(`{"kty":"EC","crv":"P-256","kid":"c","x":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","y":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`)
	f.Add(`{"kty":"oct","k":"c2VjcmV0"}`)
	f.Fuzz(func(t *testing.T, raw string) {
		var k jwk
		if json.Unmarshal([]byte(raw), &k) != nil {
			return
		}
		for _, alg := range []string{"RS256", "ES256", "EdDSA", "HS256", "none"} {
			if k.algFits(alg) {
				_, _ = k.publicKey() // must not panic; refusals are errors
			}
		}
	})
}
