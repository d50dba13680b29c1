package userauth

import (
	"errors"
	"strings"
	"testing"
)

// FuzzVerify feeds arbitrary bearers to the validator: it must never panic, and whatever it
// accepts must satisfy the claim rules on its own.
func FuzzVerify(f *testing.F) {
	iss, err := LoadOrCreateIssuer(f.TempDir()+"/issuer.json", testSpace)
	if err != nil {
		f.Fatal(err)
	}
	good, err := iss.Sign(validClaims())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)                              // a valid bearer: mutations start from the accepted shape
	f.Add(good[:len(good)-1])                // a truncated signature
	f.Add(strings.Replace(good, ".", "", 1)) // two segments
	f.Add("e30.e30.")                        // {} header and payload, empty signature
	f.Add("..")                              // three empty segments
	f.Add(strings.Repeat("a", MaxBearerSize+1))
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := iss.Verify(tok, testNow)
		if err != nil {
			if !errors.Is(err, ErrDenied) {
				t.Fatalf("a refusal that is not ErrDenied: %v", err)
			}
			return
		}
		if c.Act.Owner != c.Subject || c.Lifetime() > MaxBearerLifetime || c.Version != BearerVersion {
			t.Fatalf("accepted a bearer that breaks the rules: %+v", c)
		}
	})
}

// FuzzParseExchangeRequest feeds arbitrary bodies to the exchange's parser: it must never panic,
// and a parsed request is exactly one form with a valid actor.
func FuzzParseExchangeRequest(f *testing.F) {
	f.Add([]byte(`{"idpToken":"t","actor":"cli"}`))                                                 // the human form
	f.Add([]byte(`{"owner":"u_aaaaaaaaaaaaaaaaaaaaaaaaaa","actor":"bot","actorToken":"s"}`))        // the agent form
	f.Add([]byte(`{"idpToken":"t","owner":"u_aaaaaaaaaaaaaaaaaaaaaaaaaa","actor":"a"}`))            // both forms
	f.Add([]byte(`{"idpToken":"t","actor":"cli","ttlSec":9223372036854775807}`))                    // ttl at the int64 edge
	f.Add([]byte(`{"idpToken":"t","actor":"cli","view":"manager-caller","managerInstanceId":"x"}`)) // a bad instance
	f.Add([]byte(`{"idpToken":"t","actor":"cli"}{}`))                                               // trailing data
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := parseExchangeRequest(body)
		if err != nil {
			return
		}
		if p.human == (p.owner != "") || p.actor == "" || p.ttl < 0 || p.ttl > MaxBearerLifetime {
			t.Fatalf("parsed an invalid request: %+v", p)
		}
	})
}
