package authority

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// calloutFiles are the files Callout keeps for space "main", with the kind of seed each holds.
var calloutFiles = []struct {
	name string
	kind nkeys.PrefixByte
}{
	{"space.main.auth.nk", nkeys.PrefixByteAccount},
	{"space.main.auth.callout.nk", nkeys.PrefixByteUser},
	{"space.main.auth.sentinel.nk", nkeys.PrefixByteUser},
	{"space.main.auth.xkey.nk", nkeys.PrefixByteCurve},
}

func TestCalloutKeysCreateAndReload(t *testing.T) {
	dir := t.TempDir()
	kr, err := OpenKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := kr.Callout("main")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range calloutFiles {
		path := filepath.Join(dir, f.name)
		info, err := os.Stat(path)
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", f.name, info.Mode().Perm())
		}
		if _, err := loadKey(path, f.kind); err != nil {
			t.Errorf("%s does not hold a %s seed: %v", f.name, kindName(f.kind), err)
		}
	}
	pubs := func(c *CalloutKeys) [4]string {
		return [4]string{c.AccountPublicKey(), c.CalloutPublicKey(), c.SentinelPublicKey(), c.XKeyPublicKey()}
	}
	first := pubs(ck)
	for i, p := range first {
		for _, q := range first[i+1:] {
			if p == q {
				t.Errorf("two callout keys are the same: %s", p)
			}
		}
	}
	if !nkeys.IsValidPublicAccountKey(first[0]) || !nkeys.IsValidPublicUserKey(first[1]) ||
		!nkeys.IsValidPublicUserKey(first[2]) || !nkeys.IsValidPublicCurveKey(first[3]) {
		t.Errorf("callout keys of the wrong kinds: %v", first)
	}
	again, err := OpenKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	ck2, err := again.Callout("main")
	if err != nil {
		t.Fatal(err)
	}
	if pubs(ck2) != first {
		t.Errorf("reloading gave other keys: %v, want %v", pubs(ck2), first)
	}
	sk, err := kr.Space("main")
	if err != nil {
		t.Fatal(err)
	}
	if sk.AccountPublicKey() == ck.AccountPublicKey() {
		t.Error("the auth account is the data account")
	}
	if _, err := kr.Callout("a.b"); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("a bad space name must be refused: %v", err)
	}
}

func TestCalloutKeysRefuseCorruptFiles(t *testing.T) {
	account, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	accountSeed, err := account.Seed()
	if err != nil {
		t.Fatal(err)
	}
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	userSeed, err := user.Seed()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		file    string
		content string
		want    string
	}{
		{"garbage account", "space.main.auth.nk", "not a seed\n", "not an nkey seed"},
		{"user seed as the account", "space.main.auth.nk", string(userSeed), "holds a user seed, want an account seed"},
		{"account seed as the callout user", "space.main.auth.callout.nk", string(accountSeed), "holds a account seed, want an user seed"},
		{"empty sentinel", "space.main.auth.sentinel.nk", "", "not an nkey seed"},
		{"user seed as the curve key", "space.main.auth.xkey.nk", string(userSeed), "want an x25519 seed"},
		{"truncated curve key", "space.main.auth.xkey.nk", "SXAAB", "not an nkey seed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			kr, err := OpenKeyring(dir)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, tt.file)
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = kr.Callout("main")
			var kf *KeyFileError
			if !errors.As(err, &kf) || kf.Path != path || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Callout = %v, want a KeyFileError on %s saying %q", err, path, tt.want)
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != tt.content {
				t.Errorf("the corrupt key file was overwritten: %q, %v", got, err)
			}
		})
	}
}

func TestAuthAccountJWT(t *testing.T) {
	kr, sk := testKeys(t)
	ck, err := kr.Callout("main")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := kr.AuthAccountJWT(ck, sk)
	if err != nil {
		t.Fatal(err)
	}
	ac, err := jwt.DecodeAccountClaims(tok)
	if err != nil {
		t.Fatal(err)
	}
	if ac.Issuer != kr.OperatorPublicKey() || ac.Subject != ck.AccountPublicKey() || ac.Name != "AUTH_main" {
		t.Errorf("auth account claims %+v", ac.ClaimsData)
	}
	az := ac.Authorization
	if len(az.AuthUsers) != 1 || az.AuthUsers[0] != ck.CalloutPublicKey() {
		t.Errorf("auth_users = %v, want only the callout user %s", az.AuthUsers, ck.CalloutPublicKey())
	}
	if len(az.AllowedAccounts) != 1 || az.AllowedAccounts[0] != sk.AccountPublicKey() {
		t.Errorf("allowed_accounts = %v, want only the data account %s", az.AllowedAccounts, sk.AccountPublicKey())
	}
	if az.XKey != ck.XKeyPublicKey() {
		t.Errorf("xkey = %q, want %s", az.XKey, ck.XKeyPublicKey())
	}
	if ac.Limits.IsJSEnabled() {
		t.Errorf("the auth account must have no JetStream: %+v", ac.Limits.JetStreamLimits)
	}
	vr := jwt.CreateValidationResults()
	ac.Validate(vr)
	if vr.IsBlocking(true) {
		t.Errorf("auth account jwt does not validate: %v", vr.Errors())
	}

	other, err := kr.Space("other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kr.AuthAccountJWT(ck, other); err == nil {
		t.Error("an auth account naming another space's data account was signed")
	}
}

func TestCalloutUsers(t *testing.T) {
	kr, _ := testKeys(t)
	ck, err := kr.Callout("main")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		creds func() ([]byte, error)
		user  string
		pub   jwt.Permission
		sub   jwt.Permission
		resp  *jwt.ResponsePermission
	}{
		{
			name: "callout", creds: ck.CalloutCreds, user: ck.CalloutPublicKey(),
			pub:  jwt.Permission{Deny: jwt.StringList{">"}},
			sub:  jwt.Permission{Allow: jwt.StringList{meshwire.AuthCalloutSubject + " " + meshwire.AuthCalloutQueue}},
			resp: &jwt.ResponsePermission{MaxMsgs: 1, Expires: time.Minute},
		},
		{
			name: "sentinel", creds: ck.SentinelCreds, user: ck.SentinelPublicKey(),
			pub: jwt.Permission{Deny: jwt.StringList{">"}},
			sub: jwt.Permission{Deny: jwt.StringList{">"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			creds, err := tt.creds()
			if err != nil {
				t.Fatal(err)
			}
			tok, err := jwt.ParseDecoratedJWT(creds)
			if err != nil {
				t.Fatal(err)
			}
			kp, err := jwt.ParseDecoratedNKey(creds)
			if err != nil {
				t.Fatal(err)
			}
			if pub, _ := kp.PublicKey(); pub != tt.user {
				t.Errorf("creds seed is of %s, want %s", pub, tt.user)
			}
			uc, err := jwt.DecodeUserClaims(tok)
			if err != nil {
				t.Fatal(err)
			}
			if uc.Subject != tt.user || uc.Issuer != ck.AccountPublicKey() || uc.IssuerAccount != "" {
				t.Errorf("user %s issued by %s (issuer account %q), want %s by the auth account", uc.Subject, uc.Issuer, uc.IssuerAccount, tt.user)
			}
			if uc.Expires != 0 {
				t.Errorf("expires at %d, want never", uc.Expires)
			}
			if !equalPermission(uc.Pub, tt.pub) || !equalPermission(uc.Sub, tt.sub) {
				t.Errorf("pub %+v sub %+v, want pub %+v sub %+v", uc.Pub, uc.Sub, tt.pub, tt.sub)
			}
			if (uc.Resp == nil) != (tt.resp == nil) || (uc.Resp != nil && *uc.Resp != *tt.resp) {
				t.Errorf("resp %+v, want %+v", uc.Resp, tt.resp)
			}
			vr := jwt.CreateValidationResults()
			uc.Validate(vr)
			if vr.IsBlocking(true) {
				t.Errorf("user jwt does not validate: %v", vr.Errors())
			}
		})
	}
}

func equalPermission(a, b jwt.Permission) bool {
	return slices.Equal(a.Allow, b.Allow) && slices.Equal(a.Deny, b.Deny)
}
