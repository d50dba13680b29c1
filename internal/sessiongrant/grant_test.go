package sessiongrant_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/internal/anchor"
	"github.com/gocotal/cotal/internal/sessiongrant"
	"github.com/gocotal/cotal/wire"
)

// vector is a grant signed by an implementation other than this one: its seed, its public key,
// the grant's bytes as issued, their canonical form and the signature.
type vector struct {
	SeedHex      string `json:"seedHex"`
	PublicKeyHex string `json:"publicKeyHex"`
	Canonical    string `json:"canonical"`
	Sig          string `json:"sig"`
	Grant        string `json:"grant"`
}

func loadVector(t *testing.T) (vector, nkeys.KeyPair, *anchor.Anchor) {
	t.Helper()
	raw, err := os.ReadFile("testdata/grant_vector.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vector
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	seed, _ := hex.DecodeString(v.SeedHex)
	kp, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, seed)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	raw32, err := nkeys.Decode(nkeys.PrefixByteUser, []byte(pub))
	if err != nil || hex.EncodeToString(raw32) != v.PublicKeyHex {
		t.Fatalf("the seed's public key is %x, the vector's %s (%v)", raw32, v.PublicKeyHex, err)
	}
	a := &anchor.Anchor{KeyID: "sessions-vector", PublicKey: pub, Owner: "ai.cotal.auth", Roles: []anchor.Role{anchor.RoleSessions},
		Scope: map[anchor.Role][]string{anchor.RoleSessions: {"manager"}}, ValidFrom: 1767225000000, ValidTo: 1767312000000}
	return v, kp, a
}

// at is a moment inside the vector grant's window.
var at = time.UnixMilli(1767225600000 + 60_000)

func resolverOf(as ...*anchor.Anchor) anchor.Resolver {
	return func(id string) (*anchor.Anchor, error) {
		for _, a := range as {
			if a.KeyID == id {
				return a, nil
			}
		}
		return nil, nil
	}
}

// TestTheReferenceVector: the grant another implementation signed canonicalizes to the same
// bytes here, signs to the same signature (Ed25519 is deterministic), verifies, and is written
// back member for member in the order it was issued.
func TestTheReferenceVector(t *testing.T) {
	v, kp, a := loadVector(t)
	input, err := anchor.SignatureInput([]byte(v.Grant))
	if err != nil || string(input) != v.Canonical {
		t.Fatalf("canonical form:\n got %s\nwant %s (%v)", input, v.Canonical, err)
	}
	if sig, err := anchor.Sign(kp, input); err != nil || sig != v.Sig {
		t.Fatalf("signature %s, want %s (%v)", sig, v.Sig, err)
	}
	g, err := sessiongrant.Verify([]byte(v.Grant), "main", resolverOf(a), at)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(g)
	if string(again) != v.Grant {
		t.Fatalf("the grant encodes as\n%s\nnot as issued\n%s", again, v.Grant)
	}
}

// TestVerifyRefuses: one changed byte, an unknown member, a wrong key, a revoked or out-of-window
// one, another space, an expired grant: each refused with the reference's code.
func TestVerifyRefuses(t *testing.T) {
	v, _, a := loadVector(t)
	other, _ := nkeys.CreateUser()
	otherPub, _ := other.PublicKey()
	wrongKey := *a
	wrongKey.PublicKey = otherPub
	revoked := *a
	revoked.Revoked = true
	late := *a
	late.ValidFrom = 1767225600000 + 1
	noScope := *a
	noScope.Scope = map[anchor.Role][]string{anchor.RoleSessions: {"other"}}
	closed := *a
	closed.ValidTo = 1767225600000 - 1
	wrongRole := *a
	wrongRole.Roles = []anchor.Role{anchor.RoleHandles}
	edit := func(old, new string) string { return strings.Replace(v.Grant, old, new, 1) }
	for _, tc := range []struct {
		name  string
		grant string
		a     *anchor.Anchor
		space wire.Space
		now   time.Time
		code  wire.ErrorCode
	}{
		{"a changed window", edit(`"window":64`, `"window":65`), a, "main", at, wire.CodePermissionDenied},
		{"a changed holder", edit(`"processEpoch":2`, `"processEpoch":3`), a, "main", at, wire.CodePermissionDenied},
		{"a changed signature", edit(`"sig":"sq`, `"sig":"tq`), a, "main", at, wire.CodePermissionDenied},
		{"a padded signature", edit(`-AQ"}`, `-AQ=="}`), a, "main", at, wire.CodePermissionDenied},
		{"no signature", edit(`,"sig":"`+v.Sig+`"`, ``), a, "main", at, wire.CodePermissionDenied},
		{"an unknown member", edit(`"v":1,`, `"v":1,"target":{},`), a, "main", at, wire.CodeContractInvalid},
		{"an unknown holder member", edit(`"processEpoch":2}`, `"processEpoch":2,"x":1}`), a, "main", at, wire.CodeContractInvalid},
		{"a substituted rail", edit(`.7.out"`, `.8.out"`), a, "main", at, wire.CodePermissionDenied},
		{"a wrong key", v.Grant, &wrongKey, "main", at, wire.CodePermissionDenied},
		{"a revoked key", v.Grant, &revoked, "main", at, wire.CodePermissionDenied},
		{"a key not yet valid", v.Grant, &late, "main", at, wire.CodePermissionDenied},
		{"a key scoped elsewhere", v.Grant, &noScope, "main", at, wire.CodePermissionDenied},
		{"a key whose window closed before it signed", v.Grant, &closed, "main", at, wire.CodePermissionDenied},
		{"a key of another role", v.Grant, &wrongRole, "main", at, wire.CodePermissionDenied},
		{"another space", v.Grant, a, "other", at, wire.CodePermissionDenied},
		{"an expired grant", v.Grant, a, "main", time.UnixMilli(1767268800000 + 1), wire.CodeExpired},
		{"a grant from the future", v.Grant, a, "main", time.UnixMilli(1767225600000 - 1), wire.CodePermissionDenied},
		{"not an object", `[1]`, a, "main", at, wire.CodeContractInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sessiongrant.Verify([]byte(tc.grant), tc.space, resolverOf(tc.a), tc.now)
			e, ok := errors.AsType[*wire.EndpointError](err)
			if !ok || e.Code != tc.code {
				t.Fatalf("Verify = %v, want %s", err, tc.code)
			}
		})
	}
	if _, err := sessiongrant.Verify([]byte(v.Grant), "main", resolverOf(), at); err == nil {
		t.Fatal("a grant whose key is not registered verified")
	}
}

// TestSignRoundTrips: a grant signed here verifies, and a one-byte change anywhere in its signed
// members is refused.
func TestSignRoundTrips(t *testing.T) {
	now := time.Now()
	s, err := anchor.NewSigner(anchor.RoleSessions, []string{"manager"}, "ai.cotal.auth", now.Add(-time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	subj, err := sessiongrant.Rails("main", "manager", "q3x9QmWlYlUJ2u1cJGv4qkVv1sE4cEhQn1o0aJ8Yt0w", 3)
	if err != nil {
		t.Fatal(err)
	}
	g := &sessiongrant.Grant{V: 1, SessionID: "q3x9QmWlYlUJ2u1cJGv4qkVv1sE4cEhQn1o0aJ8Yt0w", Space: "main", Endpoint: "manager", Subjects: subj,
		Holder:  sessiongrant.Holder{ID: "local.cotal_control", LifecycleUID: "01jh0v6kq9m7f2b8c3d4e5f6g7", ProcessEpoch: 1},
		Serving: sessiongrant.Serving{InstanceID: "01jh0v6kq9m7f2b8c3d4e5f6g8", Epoch: 3}, Window: 64,
		Iat: wire.MillisOf(now), Exp: wire.MillisOf(now.Add(time.Hour)), Nonce: "abcdefghijklmnopqrstuvwx"}
	if err := g.Sign(s); err != nil {
		t.Fatal(err)
	}
	resolve := resolverOf(&s.Anchor)
	if _, err := sessiongrant.Verify(g.Raw, "main", resolve, now); err != nil {
		t.Fatal(err)
	}
	sigAt := bytes.Index(g.Raw, []byte(`"sig"`))
	for i := range sigAt {
		if !isDigitOrLetter(g.Raw[i]) {
			continue
		}
		changed := bytes.Clone(g.Raw)
		changed[i] ^= 1
		if !isDigitOrLetter(changed[i]) {
			continue
		}
		if _, err := sessiongrant.Verify(changed, "main", resolve, now); err == nil {
			t.Fatalf("byte %d changed (%q), and the grant still verified: %s", i, changed[i], changed)
		}
	}
}

func isDigitOrLetter(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
