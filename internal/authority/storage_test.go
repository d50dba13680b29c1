package authority_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/jwt/v2"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/wire"
)

// accountLimits returns the JetStream limits of the space's account JWT as kr mints it.
func accountLimits(t *testing.T, kr *authority.Keyring, sp wire.Space) jwt.JetStreamLimits {
	t.Helper()
	sk, err := kr.Space(sp)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := kr.StoreAccountJWT(sk)
	if err != nil {
		t.Fatal(err)
	}
	ac, err := jwt.DecodeAccountClaims(tok)
	if err != nil {
		t.Fatal(err)
	}
	return ac.Limits.JetStreamLimits
}

// TestStorageLimits: a space's store account carries the default limits until its keyring is told
// others; unlimited renders as the server's no-limit; a limit a space cannot run in is refused
// with nothing written; a file that does not hold limits stops minting rather than lifting them;
// and the limits travel with the seeds to a second authority.
func TestStorageLimits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	kr, err := authority.OpenKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := accountLimits(t, kr, "main"); got.DiskStorage != authority.DefaultStorageLimits.Disk || got.MemoryStorage != authority.DefaultStorageLimits.Memory {
		t.Errorf("default account limits %+v", got)
	}

	set := authority.StorageLimits{Disk: 3 << 30, Memory: authority.Unlimited}
	if err := kr.SetStorageLimits("main", set); err != nil {
		t.Fatal(err)
	}
	if got := accountLimits(t, kr, "main"); got.DiskStorage != 3<<30 || got.MemoryStorage != jwt.NoLimit {
		t.Errorf("account limits after set: %+v", got)
	}
	if got := accountLimits(t, kr, "other"); got.DiskStorage != authority.DefaultStorageLimits.Disk {
		t.Errorf("another space took main's limits: %+v", got)
	}

	for _, bad := range []authority.StorageLimits{
		{Disk: authority.MinDiskLimit - 1, Memory: authority.Unlimited},
		{Disk: authority.Unlimited, Memory: 0},
	} {
		if err := kr.SetStorageLimits("main", bad); err == nil {
			t.Errorf("limits %+v accepted", bad)
		}
	}
	if got, err := kr.StorageLimits("main"); err != nil || got != set {
		t.Errorf("a refused change altered the limits: %+v, %v", got, err)
	}
	if err := kr.SetStorageLimits("a b", set); err == nil {
		t.Error("limits for an invalid space accepted")
	}

	// A second authority from the seeds mints the same account limits.
	seeds, err := kr.Export([]wire.Space{"main"})
	if err != nil {
		t.Fatal(err)
	}
	second := filepath.Join(t.TempDir(), "auth")
	if err := authority.ImportSeeds(second, seeds); err != nil {
		t.Fatal(err)
	}
	kr2, err := authority.OpenKeyring(second)
	if err != nil {
		t.Fatal(err)
	}
	if got := accountLimits(t, kr2, "main"); got.DiskStorage != 3<<30 || got.MemoryStorage != jwt.NoLimit {
		t.Errorf("the second authority's account limits: %+v", got)
	}
	sk1, _ := kr.Space("main")
	sk2, _ := kr2.Space("main")
	if sk1.StorePublicKey() != sk2.StorePublicKey() || sk1.StorePublicKey() == sk1.AccountPublicKey() {
		t.Errorf("store accounts %s and %s from the same seeds (account %s)", sk1.StorePublicKey(), sk2.StorePublicKey(), sk1.AccountPublicKey())
	}
	tooSmall := authority.StorageLimits{Disk: 1, Memory: 1}
	seeds.Spaces["main"] = authority.SpaceSeeds{Account: seeds.Spaces["main"].Account, Signing: seeds.Spaces["main"].Signing, Storage: &tooSmall}
	if err := authority.ImportSeeds(filepath.Join(t.TempDir(), "auth"), seeds); err == nil {
		t.Error("seeds carrying limits a space cannot run in were imported")
	}

	// Damaged files stop minting with the file named.
	path := filepath.Join(dir, "space.main.storage.json")
	for _, body := range []string{"{", `{"disk": 1, "memory": -1}`, `{"disk": -1, "memory": -1, "cpu": 3}`} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		sk, _ := kr.Space("main")
		_, err := kr.StoreAccountJWT(sk)
		var kf *authority.KeyFileError
		if !errors.As(err, &kf) || kf.Path != path {
			t.Errorf("limits file %q: minting gave %v, want an error naming the file", body, err)
		}
	}
}
