package userauth

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal/wire"
)

const testOwner = "u_aaaaaaaaaaaaaaaaaaaaaaaaaa"

func validClaims() Claims {
	return Claims{
		Subject:   testOwner,
		IssuedAt:  testNow.Unix(),
		NotBefore: testNow.Unix(),
		Expires:   testNow.Unix() + 900,
		Act: Act{
			Owner: testOwner, Actor: "cli", Scope: []string{"spawn", "role:dev"},
			Parent:       "u_bbbbbbbbbbbbbbbbbbbbbbbbbb.boss",
			LifecycleUID: "abcdefghijklmnopqrstuvwxyz234567", CredentialID: "root1",
		},
	}
}

func TestBearerRoundTrip(t *testing.T) {
	iss := newTestIssuer(t)
	in := validClaims()
	tok, err := iss.Sign(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := iss.Verify(tok, testNow)
	if err != nil {
		t.Fatal(err)
	}
	in.Issuer, in.Audience, in.Version = "urn:cotal:auth:main", "main", 1
	if !reflect.DeepEqual(*got, in) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", *got, in)
	}
	hdr, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
	if want := `{"alg":"EdDSA","typ":"JWT","kid":"` + iss.ActiveKid() + `"}`; string(hdr) != want {
		t.Fatalf("header %s, want %s", hdr, want)
	}
}

func TestBearerManagerCallerRoundTrip(t *testing.T) {
	iss := newTestIssuer(t)
	c := validClaims()
	c.Act.View, c.Act.ManagerInstanceID = ViewManagerCaller, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	tok, err := iss.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := iss.Verify(tok, testNow); err != nil || got.Act.ManagerInstanceID != c.Act.ManagerInstanceID {
		t.Fatalf("Verify = %+v, %v", got, err)
	}
}

func TestSignRefusesWhatVerifyWould(t *testing.T) {
	iss := newTestIssuer(t)
	for name, mutate := range map[string]func(*Claims){
		"lifetime 901":          func(c *Claims) { c.Expires = c.IssuedAt + 901 },
		"foreign audience":      func(c *Claims) { c.Audience = "other" },
		"sub not an owner":      func(c *Claims) { c.Subject, c.Act.Owner = "alice", "alice" },
		"no lifecycle":          func(c *Claims) { c.Act.LifecycleUID = "" },
		"instance without view": func(c *Claims) { c.Act.ManagerInstanceID = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" },
	} {
		t.Run(name, func(t *testing.T) {
			c := validClaims()
			mutate(&c)
			if _, err := iss.Sign(c); !errors.Is(err, ErrDenied) {
				t.Fatalf("Sign err = %v, want a refusal", err)
			}
		})
	}
}

func TestVerifyRefuses(t *testing.T) {
	iss := newTestIssuer(t)
	priv, kid := iss.active.priv, iss.active.kid
	header := func() map[string]any { return map[string]any{"alg": "EdDSA", "typ": "JWT", "kid": kid} }
	payload := func() map[string]any {
		raw, _ := json.Marshal(Claims{
			Issuer: "urn:cotal:auth:main", Audience: "main", Subject: testOwner, Version: 1,
			IssuedAt: testNow.Unix(), NotBefore: testNow.Unix(), Expires: testNow.Unix() + 600,
			Act: Act{Owner: testOwner, Actor: "cli", Scope: []string{"spawn"}, LifecycleUID: "abcdefghijklmnopqrstuvwxyz234567", CredentialID: "root1"},
		})
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		return m
	}
	act := func(p map[string]any) map[string]any { return p["act"].(map[string]any) }
	_, otherKey, _ := ed25519.GenerateKey(rand.Reader)

	tests := []struct {
		name  string
		token func() string
	}{
		{"alg none", func() string {
			h := header()
			h["alg"] = "none"
			return signRaw(t, priv, h, payload())
		}},
		{"alg none unsigned", func() string {
			tok := signRaw(t, priv, map[string]any{"alg": "none", "kid": kid}, payload())
			return tok[:strings.LastIndexByte(tok, '.')+1]
		}},
		{"alg HS256", func() string {
			h := header()
			h["alg"] = "HS256"
			return signRaw(t, priv, h, payload())
		}},
		{"alg RS256", func() string {
			h := header()
			h["alg"] = "RS256"
			return signRaw(t, priv, h, payload())
		}},
		{"no alg", func() string {
			h := header()
			delete(h, "alg")
			return signRaw(t, priv, h, payload())
		}},
		{"jwk header", func() string {
			h := header()
			h["jwk"] = map[string]string{"kty": "OKP", "crv": "Ed25519", "x": base64.RawURLEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))}
			return signRaw(t, priv, h, payload())
		}},
		{"jku header", func() string {
			h := header()
			h["jku"] = "https://evil.example/jwks"
			return signRaw(t, priv, h, payload())
		}},
		{"x5u header", func() string {
			h := header()
			h["x5u"] = "https://evil.example/cert"
			return signRaw(t, priv, h, payload())
		}},
		{"x5c header", func() string {
			h := header()
			h["x5c"] = []string{"MIIB"}
			return signRaw(t, priv, h, payload())
		}},
		{"crit header", func() string {
			h := header()
			h["crit"] = []string{"exp"}
			return signRaw(t, priv, h, payload())
		}},
		{"unknown kid", func() string {
			h := header()
			h["kid"] = "nope"
			return signRaw(t, priv, h, payload())
		}},
		{"no kid", func() string {
			h := header()
			delete(h, "kid")
			return signRaw(t, priv, h, payload())
		}},
		{"signed by another key under our kid", func() string { return signRaw(t, otherKey, header(), payload()) }},
		{"tampered payload", func() string {
			tok := signRaw(t, priv, header(), payload())
			parts := strings.Split(tok, ".")
			p := payload()
			act(p)["scope"] = []string{"spawn", "admin"}
			raw, _ := json.Marshal(p)
			return parts[0] + "." + base64.RawURLEncoding.EncodeToString(raw) + "." + parts[2]
		}},
		{"wrong aud", func() string {
			p := payload()
			p["aud"] = "other"
			return signRaw(t, priv, header(), p)
		}},
		{"aud array", func() string {
			p := payload()
			p["aud"] = []string{"main"}
			return signRaw(t, priv, header(), p)
		}},
		{"wrong iss", func() string {
			p := payload()
			p["iss"] = "urn:cotal:auth:other"
			return signRaw(t, priv, header(), p)
		}},
		{"lifetime 901s", func() string {
			p := payload()
			p["exp"] = testNow.Unix() + 901
			return signRaw(t, priv, header(), p)
		}},
		{"exp before iat", func() string {
			p := payload()
			p["exp"], p["iat"] = testNow.Unix(), testNow.Unix()+1
			return signRaw(t, priv, header(), p)
		}},
		{"ver 2", func() string {
			p := payload()
			p["ver"] = 2
			return signRaw(t, priv, header(), p)
		}},
		{"ver missing", func() string {
			p := payload()
			delete(p, "ver")
			return signRaw(t, priv, header(), p)
		}},
		{"exp missing", func() string {
			p := payload()
			delete(p, "exp")
			return signRaw(t, priv, header(), p)
		}},
		{"iat missing", func() string {
			p := payload()
			delete(p, "iat")
			return signRaw(t, priv, header(), p)
		}},
		{"nbf missing", func() string {
			p := payload()
			delete(p, "nbf")
			return signRaw(t, priv, header(), p)
		}},
		{"exp fractional", func() string {
			p := payload()
			p["exp"] = float64(testNow.Unix()) + 600.5
			return signRaw(t, priv, header(), p)
		}},
		{"iat in the future", func() string {
			p := payload()
			p["iat"], p["nbf"], p["exp"] = testNow.Unix()+60, testNow.Unix()+60, testNow.Unix()+600
			return signRaw(t, priv, header(), p)
		}},
		{"nbf in the future", func() string {
			p := payload()
			p["nbf"] = testNow.Unix() + 60
			return signRaw(t, priv, header(), p)
		}},
		{"expired", func() string {
			p := payload()
			p["iat"], p["nbf"], p["exp"] = testNow.Unix()-700, testNow.Unix()-700, testNow.Unix()-100
			return signRaw(t, priv, header(), p)
		}},
		{"sub not a derived owner", func() string {
			p := payload()
			p["sub"], act(p)["owner"] = "UAQGWOEVJKMIO4WXSYOTLARXYOZTCXFK67JASEH6AFFFYK6FOPSKQCAD", "UAQGWOEVJKMIO4WXSYOTLARXYOZTCXFK67JASEH6AFFFYK6FOPSKQCAD"
			return signRaw(t, priv, header(), p)
		}},
		{"act.owner differs from sub", func() string {
			p := payload()
			act(p)["owner"] = "u_bbbbbbbbbbbbbbbbbbbbbbbbbb"
			return signRaw(t, priv, header(), p)
		}},
		{"act missing", func() string {
			p := payload()
			delete(p, "act")
			return signRaw(t, priv, header(), p)
		}},
		{"actor with a dot", func() string {
			p := payload()
			act(p)["actor"] = "a.b"
			return signRaw(t, priv, header(), p)
		}},
		{"unknown scope", func() string {
			p := payload()
			act(p)["scope"] = []string{"root"}
			return signRaw(t, priv, header(), p)
		}},
		{"parent not a principal", func() string {
			p := payload()
			act(p)["parent"] = "u_bbbbbbbbbbbbbbbbbbbbbbbbbb"
			return signRaw(t, priv, header(), p)
		}},
		{"lifecycleUid missing", func() string {
			p := payload()
			delete(act(p), "lifecycleUid")
			return signRaw(t, priv, header(), p)
		}},
		{"lifecycleUid upper case", func() string {
			p := payload()
			act(p)["lifecycleUid"] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
			return signRaw(t, priv, header(), p)
		}},
		{"credentialId missing", func() string {
			p := payload()
			delete(act(p), "credentialId")
			return signRaw(t, priv, header(), p)
		}},
		{"credentialId with a wildcard", func() string {
			p := payload()
			act(p)["credentialId"] = "root.*"
			return signRaw(t, priv, header(), p)
		}},
		{"unknown view", func() string {
			p := payload()
			act(p)["view"] = "observer"
			return signRaw(t, priv, header(), p)
		}},
		{"manager-caller without instance", func() string {
			p := payload()
			act(p)["view"] = "manager-caller"
			return signRaw(t, priv, header(), p)
		}},
		{"instance without manager-caller", func() string {
			p := payload()
			act(p)["managerInstanceId"] = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
			return signRaw(t, priv, header(), p)
		}},
		{"oversized", func() string {
			p := payload()
			p["pad"] = strings.Repeat("x", MaxBearerSize)
			return signRaw(t, priv, header(), p)
		}},
		{"two segments", func() string {
			tok := signRaw(t, priv, header(), payload())
			return tok[:strings.LastIndexByte(tok, '.')]
		}},
		{"padded base64", func() string {
			tok := signRaw(t, priv, header(), payload())
			parts := strings.Split(tok, ".")
			return parts[0] + "=." + parts[1] + "." + parts[2]
		}},
		{"empty", func() string { return "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := tt.token()
			c, err := iss.Verify(tok, testNow)
			if err == nil {
				t.Fatalf("Verify accepted %+v", c)
			}
			be, ok := errors.AsType[*BearerError](err)
			if !ok || be.Reason == "" || !errors.Is(err, ErrDenied) {
				t.Fatalf("err = %v (%T), want a *BearerError with a reason", err, err)
			}
		})
	}

	// The baseline itself verifies, so each row above fails for its own reason.
	if _, err := iss.Verify(signRaw(t, priv, header(), payload()), testNow); err != nil {
		t.Fatalf("baseline refused: %v", err)
	}
}

func TestVerifyClockTolerance(t *testing.T) {
	iss := newTestIssuer(t)
	c := validClaims()
	c.Expires = c.IssuedAt + 60
	tok, err := iss.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		at   time.Time
		ok   bool
	}{
		{"iat 5s ahead of the validator", testNow.Add(-5 * time.Second), true},
		{"iat 6s ahead of the validator", testNow.Add(-6 * time.Second), false},
		{"4s past exp", testNow.Add(64 * time.Second), true},
		{"5s past exp", testNow.Add(65 * time.Second), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := iss.Verify(tok, tt.at); (err == nil) != tt.ok {
				t.Fatalf("Verify at %v: err = %v, want ok=%v", tt.at, err, tt.ok)
			}
		})
	}
}

func TestIssuerFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "issuer.json")
	a, err := LoadOrCreateIssuer(path, testSpace)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("issuer.json: %v mode %v, want 0600", err, fi.Mode())
	}
	b, err := LoadOrCreateIssuer(path, testSpace)
	if err != nil {
		t.Fatal(err)
	}
	if a.ActiveKid() != b.ActiveKid() {
		t.Fatal("a reload changed the signing key")
	}
	tok, err := a.Sign(validClaims())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Verify(tok, testNow); err != nil {
		t.Fatalf("a reloaded issuer refuses its own bearer: %v", err)
	}
	// A bearer of another space's issuer never verifies here.
	other, err := LoadOrCreateIssuer(filepath.Join(dir, "other.json"), "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Verify(tok, testNow); err == nil {
		t.Fatal("another space's issuer accepted the bearer")
	}
}

func TestIssuerFileCorrupt(t *testing.T) {
	seed := base64.RawURLEncoding.EncodeToString(make([]byte, 32))
	kid := thumbprint(ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey))
	for name, content := range map[string]string{
		"not json":     "{",
		"wrong ver":    `{"ver":2,"keys":[{"kid":"` + kid + `","seed":"` + seed + `","createdAt":1}]}`,
		"no keys":      `{"ver":1,"keys":[]}`,
		"kid mismatch": `{"ver":1,"keys":[{"kid":"x","seed":"` + seed + `","createdAt":1}]}`,
		"short seed":   `{"ver":1,"keys":[{"kid":"` + kid + `","seed":"AAAA","createdAt":1}]}`,
		"all retired":  `{"ver":1,"keys":[{"kid":"` + kid + `","seed":"` + seed + `","createdAt":1,"retiredAt":2}]}`,
		"duplicate":    `{"ver":1,"keys":[{"kid":"` + kid + `","seed":"` + seed + `","createdAt":1},{"kid":"` + kid + `","seed":"` + seed + `","createdAt":1}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "issuer.json")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadOrCreateIssuer(path, testSpace); err == nil {
				t.Fatal("a corrupt issuer.json loaded")
			} else if _, ok := errors.AsType[*FileError](err); !ok {
				t.Fatalf("err = %v, want a *FileError", err)
			}
			if raw, _ := os.ReadFile(path); string(raw) != content {
				t.Fatal("the corrupt file was rewritten")
			}
		})
	}
}

func TestIssuerRetiredKey(t *testing.T) {
	seedOf := func(b byte) ([]byte, string) {
		s := make([]byte, 32)
		s[0] = b
		return s, thumbprint(ed25519.NewKeyFromSeed(s).Public().(ed25519.PublicKey))
	}
	oldSeed, oldKid := seedOf(1)
	goneSeed, goneKid := seedOf(2)
	newSeed, newKid := seedOf(3)
	retired := testNow.Unix() - 100                             // inside the 1200 s grace
	gone := testNow.Unix() - int64(retiredKeyGrace/time.Second) // past it
	doc := fmt.Sprintf(`{"ver":1,"keys":[
		{"kid":%q,"seed":%q,"createdAt":1,"retiredAt":%d},
		{"kid":%q,"seed":%q,"createdAt":2,"retiredAt":%d},
		{"kid":%q,"seed":%q,"createdAt":3}]}`,
		oldKid, base64.RawURLEncoding.EncodeToString(oldSeed), retired,
		goneKid, base64.RawURLEncoding.EncodeToString(goneSeed), gone,
		newKid, base64.RawURLEncoding.EncodeToString(newSeed))
	path := filepath.Join(t.TempDir(), "issuer.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	iss, err := LoadOrCreateIssuer(path, testSpace)
	if err != nil {
		t.Fatal(err)
	}
	iss.now = func() time.Time { return testNow }
	if iss.ActiveKid() != newKid {
		t.Fatalf("active kid %s, want the unretired %s", iss.ActiveKid(), newKid)
	}
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(iss.JWKS(), &set); err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, k := range set.Keys {
		kids = append(kids, k["kid"])
		if k["kty"] != "OKP" || k["crv"] != "Ed25519" || k["alg"] != "EdDSA" || k["use"] != "sig" || k["d"] != "" {
			t.Fatalf("jwk %v", k)
		}
	}
	if !reflect.DeepEqual(kids, []string{oldKid, newKid}) {
		t.Fatalf("JWKS kids %v, want the recently retired and the active key", kids)
	}
	c := validClaims()
	for kid, seed := range map[string][]byte{oldKid: oldSeed, goneKid: goneSeed} {
		tok := signRaw(t, ed25519.NewKeyFromSeed(seed), map[string]any{"alg": "EdDSA", "kid": kid}, claimsPayload(c))
		_, err := iss.Verify(tok, testNow)
		if want := kid == oldKid; (err == nil) != want {
			t.Errorf("kid %s: err = %v, want verified=%v", kid, err, want)
		}
	}
}

func claimsPayload(c Claims) Claims {
	c.Issuer, c.Audience, c.Version = IssuerName(testSpace), string(testSpace), BearerVersion
	return c
}

func TestThumbprintRFC8037(t *testing.T) {
	// RFC 8037 appendix A.3: the thumbprint of its Ed25519 example key.
	x, _ := base64.RawURLEncoding.DecodeString("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
	if got := thumbprint(ed25519.PublicKey(x)); got != "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k" {
		t.Fatalf("thumbprint = %s", got)
	}
}

func TestIssuerName(t *testing.T) {
	if got := IssuerName(wire.Space("main")); got != "urn:cotal:auth:main" {
		t.Fatal(got)
	}
}
