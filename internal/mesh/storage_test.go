package mesh_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// accountResourcesExceeded is the JetStream API's error code for a write past an account's limits.
const accountResourcesExceeded jetstream.ErrorCode = 10002

// TestAccountStorageIsBounded: the space's store account JWT carries the disk limit `up` was given, and
// the broker holds the account to it: an agent storing DMs for nobody is refused once the space's
// streams and buckets together reach it, and what is stored stays within it.
func TestAccountStorageIsBounded(t *testing.T) {
	t.Parallel()
	limit := authority.MinDiskLimit
	m := meshtest.Start(t, func(o *mesh.Options) { o.Storage = &mesh.StorageChange{Disk: &limit} })
	ctx := t.Context()

	sk, err := m.Keyring().Space(m.Space)
	if err != nil {
		t.Fatal(err)
	}
	token, err := m.Keyring().StoreAccountJWT(sk)
	if err != nil {
		t.Fatal(err)
	}
	ac, err := jwt.DecodeAccountClaims(token)
	if err != nil {
		t.Fatal(err)
	}
	if got := ac.Limits.JetStreamLimits; got.DiskStorage != limit || got.MemoryStorage != authority.DefaultStorageLimits.Memory {
		t.Fatalf("account JetStream limits %+v, want disk %d and the default memory", got, limit)
	}

	cred, agent := m.Agent(t, ledger.Request{Name: "hoarder", Subscribe: []string{"general"}})
	js, err := jetstream.New(agent.Conn)
	if err != nil {
		t.Fatal(err)
	}
	ghost, _ := wire.NewPrincipal("local", "ghost")
	big := []byte(strings.Repeat("x", 900<<10))
	stored, refused := 0, error(nil)
	for range 2 * limit / int64(len(big)) {
		if _, err := js.Publish(ctx, m.Space.DMSubject(ghost, cred.Principal), big); err != nil {
			refused = err
			break
		}
		stored++
	}
	var apiErr *jetstream.APIError
	if refused == nil || !errors.As(refused, &apiErr) || apiErr.ErrorCode != accountResourcesExceeded {
		t.Fatalf("after %d DMs of 900 KiB the broker still stores them (last error %v)", stored, refused)
	}
	if stored == 0 {
		t.Fatal("the first DM was refused: the space has no room to work in")
	}

	prov := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileProvisioner, Name: "prov"}))
	pjs, err := jetstream.New(prov.Conn)
	if err != nil {
		t.Fatal(err)
	}
	info, err := pjs.AccountInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Store > uint64(limit) {
		t.Errorf("the account stores %d bytes, over its %d-byte limit", info.Store, limit)
	}
	if info.Limits.MaxStore != limit {
		t.Errorf("the broker holds the account to %d bytes of disk, want %d", info.Limits.MaxStore, limit)
	}
	t.Logf("%d DMs stored, then: %v; account store %d bytes", stored, refused, info.Store)
}
