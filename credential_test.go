package cotal_test

import (
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

func TestReadGrantFromCreds(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	cred := m.AgentCred(t, ledger.Request{Name: "alice", AllowPublish: []string{"general"}, Subscribe: []string{"team.>"}, Role: "reviewer"})
	g, err := cotal.ParseCreds(cred.Creds)
	if err != nil {
		t.Fatal(err)
	}
	if g.Principal != cred.Principal || g.Space != "main" || g.Lifecycle != cred.LifecycleUID || g.Role != "reviewer" ||
		g.Profile != "agent" || g.UserKey != cred.PublicKey || !g.Expires.IsZero() {
		t.Errorf("grant %+v", g)
	}
	if !g.CanPost("general") || g.CanPost("team.x") || !g.CanRead("team.backend") || g.CanRead("general") {
		t.Errorf("ACLs read as publish %q subscribe %q", g.AllowPublish, g.AllowSubscribe)
	}
}

// TestReadEndpointFactsFromCreds: an agent's capabilities come back from their tags, and a
// control instrument's caller lifecycle from its reply rail.
func TestReadEndpointFactsFromCreds(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	cred := m.AgentCred(t, ledger.Request{Name: "carol", Capabilities: []string{"spawn"}})
	g, err := cotal.ParseCreds(cred.Creds)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.Capabilities, []string{"spawn"}) || g.Lifecycle != cred.LifecycleUID {
		t.Errorf("capabilities %q, lifecycle %s", g.Capabilities, g.Lifecycle)
	}
	plain, err := cotal.ParseCreds(m.AgentCred(t, ledger.Request{Name: "alice"}).Creds)
	if err != nil || len(plain.Capabilities) != 0 {
		t.Errorf("an agent without capabilities reads %q, %v", plain.Capabilities, err)
	}
	ctl := m.Mint(t, ledger.Request{Profile: "control-caller-admin", Name: "operator"})
	cg, err := cotal.ParseCreds(ctl.Creds)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wire.ParseLifecycleUID(string(cg.Lifecycle)); err != nil || cg.Profile != "control-caller-admin" || cg.Space != "main" {
		t.Errorf("control grant %+v: %v", cg, err)
	}
}

func TestExpiredCredsAreRefused(t *testing.T) {
	acct, _ := nkeys.CreateAccount()
	user, _ := nkeys.CreateUser()
	pub, _ := user.PublicKey()
	uc := jwt.NewUserClaims(pub)
	uc.Tags = jwt.TagList{"principal:local.old"}
	uc.Permissions.Pub.Allow.Add("cotal.main.inst.*.*.local.old")
	uc.Expires = time.Now().Add(-time.Hour).Unix()
	tok, err := uc.Encode(acct)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	creds, err := jwt.FormatUserConfig(tok, seed)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cotal.Connect(t.Context(), "nats://127.0.0.1:1", cotal.WithCredsData(creds))
	if !errors.Is(err, cotal.ErrCredentialExpired) || !strings.Contains(err.Error(), "mint a new one") {
		t.Errorf("Connect with expired creds = %v", err)
	}
}

// TestParseCredsRefuses covers what reading a creds file refuses, with the message that names
// it, and that a file written with CRLF line ends or a byte-order mark reads as the same
// credential.
func TestParseCredsRefuses(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	cred := m.AgentCred(t, ledger.Request{Name: "alice"})
	tok, _ := jwt.ParseDecoratedJWT(cred.Creds)
	for name, raw := range map[string]string{
		"CRLF line ends":    strings.ReplaceAll(string(cred.Creds), "\n", "\r\n"),
		"a byte-order mark": "\ufeff" + string(cred.Creds),
	} {
		g, err := cotal.ParseCreds([]byte(raw))
		if err != nil || g.Principal != cred.Principal || g.UserKey != cred.PublicKey {
			t.Fatalf("creds with %s: %+v %v", name, g, err)
		}
	}
	acct, _ := nkeys.CreateAccount()
	acctSeed, _ := acct.Seed()
	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()
	acctJWT, err := jwt.NewAccountClaims(must(acct.PublicKey())).Encode(acct)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, creds, want string
	}{
		{"nothing framed", "hello", "not a creds file"},
		{"a bare JWT", tok, "not a creds file"},
		{"a JWT and no seed", "-----BEGIN NATS USER JWT-----\n" + tok + "\n------END NATS USER JWT------\n", "no user seed"},
		{"a value with a space", string(frameCreds("a b", otherSeed)), "not a creds file"},
		{"an account's seed", string(frameCreds(tok, acctSeed)), "not a user's"},
		{"another user's seed", string(frameCreds(tok, otherSeed)), "does not belong to the jwt's user"},
		{"no JWT in the frame", string(frameCreds("abc", otherSeed)), "not a JWT"},
		{"an account JWT", string(frameCreds(acctJWT, otherSeed)), "not a version-2 user JWT"},
	} {
		if _, err := cotal.ParseCreds([]byte(tc.creds)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ParseCreds = %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}

// TestForgedGrantIsRefusedByTheBroker: ParseCreds reads a JWT without verifying its signature
// (the broker's job), so a holder who rewrites their JWT's claims (another principal, wider
// rows) reads a grant that names them, and the broker refuses the connection.
func TestForgedGrantIsRefusedByTheBroker(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	cred := m.AgentCred(t, ledger.Request{Name: "mallory"})
	tok, _ := jwt.ParseDecoratedJWT(cred.Creds)
	parts := strings.Split(tok, ".")
	body, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	forged := strings.ReplaceAll(string(body), cred.Principal.String(), "local.alice")
	forged = strings.Replace(forged, `"pub":{"allow":[`, `"pub":{"allow":[">",`, 1)
	if forged == string(body) {
		t.Fatal("nothing to forge in the claims")
	}
	seed, _ := jwt.ParseDecoratedUserNKey(cred.Creds)
	raw, _ := seed.Seed()
	creds := frameCreds(parts[0]+"."+base64.RawURLEncoding.EncodeToString([]byte(forged))+"."+parts[2], raw)
	g, err := cotal.ParseCreds(creds)
	if err != nil || g.Principal.String() != "local.alice" {
		t.Fatalf("the forged grant reads %+v, %v", g, err)
	}
	c, err := cotal.Connect(t.Context(), m.URL(), cotal.WithCredsData(creds))
	if err == nil {
		_ = c.Close(t.Context()) // the test fails anyway
		t.Fatal("the broker let a forged JWT connect")
	}
	if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Errorf("Connect with a forged JWT = %v, want the broker's authorization refusal", err)
	}
}

// frameCreds writes a creds file as jwt.FormatUserConfig does, of whatever it is given.
func frameCreds(jwt string, seed []byte) []byte {
	return []byte("-----BEGIN NATS USER JWT-----\n" + jwt + "\n------END NATS USER JWT------\n\n" +
		"-----BEGIN USER NKEY SEED-----\n" + string(seed) + "\n------END USER NKEY SEED------\n")
}

// must returns v, failing on err where a test cannot go on.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// BenchmarkParseCreds is what the SDK spends reading a credential at every Connect, on top of
// the broker's own verification of it.
func BenchmarkParseCreds(b *testing.B) {
	m := meshtest.Start(b)
	cred := m.AgentCred(b, ledger.Request{Name: "alice", AllowPublish: []string{"general"}, Subscribe: []string{"team.>"}})
	for b.Loop() {
		if _, err := cotal.ParseCreds(cred.Creds); err != nil {
			b.Fatal(err)
		}
	}
}
