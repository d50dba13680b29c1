package authority_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/wire"
)

// TestSeedsMoveAnAuthority: a keyring's seeds, imported into another directory, open the same
// authority; a directory that holds another authority's keys, or a seed of the wrong kind, is
// refused before anything is written.
func TestSeedsMoveAnAuthority(t *testing.T) {
	first, err := authority.OpenKeyring(filepath.Join(t.TempDir(), "auth"))
	if err != nil {
		t.Fatal(err)
	}
	seeds, err := first.Export([]wire.Space{"main"})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "auth")
	if err := authority.ImportSeeds(dir, seeds); err != nil {
		t.Fatal(err)
	}
	if err := authority.ImportSeeds(dir, seeds); err != nil {
		t.Fatalf("importing the same seeds again: %v", err)
	}
	second, err := authority.OpenKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := first.Space("main")
	b, err := second.Space("main")
	if err != nil {
		t.Fatal(err)
	}
	if second.OperatorPublicKey() != first.OperatorPublicKey() || b.AccountPublicKey() != a.AccountPublicKey() || b.SigningPublicKey() != a.SigningPublicKey() {
		t.Fatal("the imported keyring is another authority")
	}
	op, sys, accounts, err := seeds.PublicKeys()
	if err != nil || op != first.OperatorPublicKey() || sys != first.SystemAccountPublicKey() || accounts["main"] != a.AccountPublicKey() {
		t.Fatalf("public keys %s %s %v: %v", op, sys, accounts, err)
	}

	other, err := authority.OpenKeyring(filepath.Join(t.TempDir(), "auth"))
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Export([]wire.Space{"main"})
	if err != nil {
		t.Fatal(err)
	}
	var kfe *authority.KeyFileError
	if err := authority.ImportSeeds(dir, foreign); !errors.As(err, &kfe) {
		t.Fatalf("another authority's seeds over these: %v", err)
	}
	swapped := *seeds
	swapped.Operator = seeds.System
	empty := filepath.Join(t.TempDir(), "auth")
	if err := authority.ImportSeeds(empty, &swapped); err == nil || !strings.Contains(err.Error(), "operator.nk") {
		t.Fatalf("an account seed as the operator: %v", err)
	}
	if k, err := authority.OpenKeyring(empty); err != nil || k.OperatorPublicKey() == first.OperatorPublicKey() {
		t.Fatalf("a refused import wrote a key: %v", err)
	}
}
