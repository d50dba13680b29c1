package authority

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
)

func TestKeyringCreatesAndReloads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	kr, err := OpenKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	sk, err := kr.Space("main")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("key dir mode %v, %v; want 0700", fi.Mode(), err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 4 {
		t.Errorf("want 4 key files (operator, system, space account, signing), got %v", entries)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, %v; want 0600", e.Name(), info.Mode(), err)
		}
	}
	again, err := OpenKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	sk2, err := again.Space("main")
	if err != nil {
		t.Fatal(err)
	}
	if again.OperatorPublicKey() != kr.OperatorPublicKey() || sk2.AccountPublicKey() != sk.AccountPublicKey() {
		t.Error("reopening the keyring produced different keys")
	}
	if _, err := kr.Space("a.b"); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("a bad space name must be refused: %v", err)
	}
}

func TestKeyringRefusesCorruptFiles(t *testing.T) {
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
		content string
		want    string
	}{
		{"garbage", "not a seed\n", "not an nkey seed"},
		{"truncated seed", string(userSeed[:20]), "not an nkey seed"},
		{"wrong kind", string(userSeed), "holds a user seed, want an operator seed"},
		{"empty", "", "not an nkey seed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, operatorFile)
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := OpenKeyring(dir)
			var kf *KeyFileError
			if !errors.As(err, &kf) || kf.Path != path || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("OpenKeyring = %v, want a KeyFileError on %s saying %q", err, path, tt.want)
			}
			got, _ := os.ReadFile(path)
			if string(got) != tt.content {
				t.Error("the corrupt key file was overwritten")
			}
		})
	}
}

func TestAccountJWTs(t *testing.T) {
	kr, sk := testKeys(t)
	tok, err := kr.AccountJWT(sk)
	if err != nil {
		t.Fatal(err)
	}
	ac, err := jwt.DecodeAccountClaims(tok)
	if err != nil {
		t.Fatal(err)
	}
	if ac.Issuer != kr.OperatorPublicKey() || ac.Subject != sk.AccountPublicKey() || ac.Name != "main" {
		t.Errorf("account claims %+v", ac.ClaimsData)
	}
	if ac.Limits.IsJSEnabled() {
		t.Errorf("the space account holds JetStream of its own: %+v", ac.Limits.JetStreamLimits)
	}
	if !ac.SigningKeys.Contains(PublicKey(sk.signing)) {
		t.Error("the signing key is not listed")
	}

	stok, err := kr.StoreAccountJWT(sk)
	if err != nil {
		t.Fatal(err)
	}
	store, err := jwt.DecodeAccountClaims(stok)
	if err != nil {
		t.Fatal(err)
	}
	if store.Issuer != kr.OperatorPublicKey() || store.Subject != sk.StorePublicKey() || store.Subject == ac.Subject {
		t.Errorf("store account claims %+v", store.ClaimsData)
	}
	if js := store.Limits.JetStreamLimits; js.DiskStorage != DefaultStorageLimits.Disk || js.MemoryStorage != DefaultStorageLimits.Memory {
		t.Errorf("the store account must grant JetStream within the default limits: %+v", js)
	}
	if len(store.SigningKeys) != 0 {
		t.Error("the store account lists a signing key: nobody connects to it")
	}
	// The space's account imports exactly what the store exports, from the store; no two
	// services overlap, or a request would reach the store twice.
	if len(ac.Imports) != len(store.Exports) {
		t.Fatalf("%d imports of %d exports", len(ac.Imports), len(store.Exports))
	}
	for i, e := range store.Exports {
		im := ac.Imports[i]
		if im.Account != store.Subject || im.Subject != e.Subject || im.Type != e.Type {
			t.Errorf("import %+v for export %+v", im, e)
		}
		for _, o := range store.Exports[:i] {
			if e.Type == jwt.Service && o.Type == jwt.Service && (e.Subject.IsContainedIn(o.Subject) || o.Subject.IsContainedIn(e.Subject)) {
				t.Errorf("services %s and %s overlap", e.Subject, o.Subject)
			}
		}
	}
	for _, want := range append([]string{"$JS.API.INFO", "$JS.ACK.>", "$JS.API.CONSUMER.MSG.NEXT.>"}, space.StoredSubjects("main")...) {
		if !slices.ContainsFunc(store.Exports, func(e *jwt.Export) bool { return string(e.Subject) == want && e.Type == jwt.Service }) {
			t.Errorf("the store does not serve %s", want)
		}
	}
	var vr jwt.ValidationResults
	store.Validate(&vr)
	ac.Validate(&vr)
	if vr.IsBlocking(true) {
		t.Errorf("the account JWTs do not validate: %v", vr.Errors())
	}
	op, err := kr.OperatorJWT()
	if err != nil {
		t.Fatal(err)
	}
	oc, err := jwt.DecodeOperatorClaims(op)
	if err != nil || oc.SystemAccount != kr.SystemAccountPublicKey() {
		t.Errorf("operator claims %+v, %v", oc, err)
	}
}

func TestMint(t *testing.T) {
	_, sk := testKeys(t)
	p, err := wire.NewPrincipal("local", "Alice")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	tests := []struct {
		profile Profile
		expires time.Duration
		life    time.Duration
	}{
		{ProfileAgent, 0, 0},
		{ProfileAgent, time.Hour, time.Hour},
		{ProfileDelivery, 0, 24 * time.Hour},
		{ProfileProvisioner, 0, 5 * time.Minute},
		{ProfileObserver, -1, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s", tt.profile, tt.expires), func(t *testing.T) {
			cred, err := sk.mintAt(MintRequest{Profile: tt.profile, Grant: Grant{Principal: p, LifecycleUID: wire.NewLifecycleUID()}, Expires: tt.expires}, now)
			if err != nil {
				t.Fatal(err)
			}
			uc, err := jwt.DecodeUserClaims(cred.JWT)
			if err != nil {
				t.Fatal(err)
			}
			if uc.Name != string(tt.profile) || uc.IssuerAccount != sk.AccountPublicKey() || uc.Subject != cred.PublicKey {
				t.Errorf("claims name=%q issuer_account=%q sub=%q", uc.Name, uc.IssuerAccount, uc.Subject)
			}
			wantTags := []string{"owner:local", "actor:Alice", "principal:local.Alice"}
			if fmt.Sprint(uc.Tags) != fmt.Sprint(wantTags) {
				t.Errorf("tags %v, want %v (case kept)", uc.Tags, wantTags)
			}
			var wantExp int64
			if tt.life > 0 {
				wantExp = now.Add(tt.life).Unix()
			}
			if uc.Expires != wantExp {
				t.Errorf("exp %d, want %d", uc.Expires, wantExp)
			}
			kp, err := jwt.ParseDecoratedUserNKey(cred.Creds)
			if err != nil {
				t.Fatalf("creds do not parse as a standard creds file: %v", err)
			}
			seed, err := kp.Seed()
			if err != nil {
				t.Fatal(err)
			}
			if pub, _ := kp.PublicKey(); pub != cred.PublicKey || !strings.Contains(string(cred.Creds), cred.JWT) {
				t.Error("creds file does not hold this credential's JWT and key")
			}
			if strings.Contains(fmt.Sprint(cred.LogValue()), string(seed)) {
				t.Error("a credential logs its seed")
			}
		})
	}
}

func TestMintRefusesOversizedJWT(t *testing.T) {
	_, sk := testKeys(t)
	p, err := wire.NewPrincipal("local", "alice")
	if err != nil {
		t.Fatal(err)
	}
	var channels []string
	for i := range 200 {
		channels = append(channels, fmt.Sprintf("project-%03d.backend", i))
	}
	_, err = sk.Mint(MintRequest{Profile: ProfileAgent, Grant: Grant{Principal: p, LifecycleUID: wire.NewLifecycleUID(), AllowPublish: channels, AllowSubscribe: channels}})
	if !errors.Is(err, ErrJWTTooLarge) || !strings.Contains(err.Error(), "bytes") || !strings.Contains(err.Error(), "fewer or broader channels") {
		t.Fatalf("Mint = %v, want ErrJWTTooLarge with the size and the channels to blame", err)
	}
	// The warden's rows name no stream, so it fits in a space of the longest name.
	kr, _ := testKeys(t)
	long, err := kr.Space(wire.Space(strings.Repeat("s", 64)))
	if err != nil {
		t.Fatal(err)
	}
	warden, _ := wire.NewPrincipal("local", "cotal_warden")
	if _, err := long.Mint(MintRequest{Profile: ProfileWarden, Grant: Grant{Principal: warden, LifecycleUID: wire.NewLifecycleUID()}}); err != nil {
		t.Errorf("Mint of a warden in a space of 64 characters: %v", err)
	}
	// A serving credential names each command's rails in the space: fewer commands, or a
	// shorter space name, is what to change.
	var commands []string
	for i := range 40 {
		commands = append(commands, fmt.Sprintf("command-%02d", i))
	}
	serve := &ServeRows{Endpoint: wire.ManagerEndpoint, Instance: wire.NewLifecycleUID(), Commands: commands}
	mgr, _ := wire.NewPrincipal("local", "cotal_manager")
	_, err = long.Mint(MintRequest{Profile: ProfileSupervisor, Grant: Grant{Principal: mgr, LifecycleUID: wire.NewLifecycleUID(), Serve: serve}})
	if !errors.Is(err, ErrJWTTooLarge) || !strings.Contains(err.Error(), "41 served commands") || !strings.Contains(err.Error(), "shorter space name") {
		t.Fatalf("Mint of a 40-command serving credential in a space of 64 characters = %v, want ErrJWTTooLarge naming the commands and the space", err)
	}
}

// testKeys opens a keyring in a temporary directory with the space "main".
func testKeys(t *testing.T) (*Keyring, *SpaceKeys) {
	t.Helper()
	kr, err := OpenKeyring(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sk, err := kr.Space("main")
	if err != nil {
		t.Fatal(err)
	}
	return kr, sk
}
