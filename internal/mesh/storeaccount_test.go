package mesh_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// TestStoreFromBeforeTheStoreAccountIsMoved: a single node whose streams are stored under the
// space's account, as releases before the store account kept them, finds them again in the store
// account at its next start, with the messages they held; the same store on a cluster node is
// refused by name and left in place.
func TestStoreFromBeforeTheStoreAccountIsMoved(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := mesh.Dir{Path: filepath.Join(t.TempDir(), mesh.DirName)}
	m, err := mesh.Up(ctx, dir, mesh.Options{Port: -1, NoDaemons: true})
	if err != nil {
		t.Fatal(err)
	}
	sp := m.State().Spaces[0]
	row := sp.ChannelsBucket().Subject("general")
	if _, err := inspect(t, m, sp).Publish(ctx, row, []byte(`{"deliveryClass":"durable","description":"kept"}`)); err != nil {
		t.Fatal(err)
	}
	sk, err := m.Keyring().Space(sp)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir.StoreDir(), "jetstream")
	old := filepath.Join(root, sk.AccountPublicKey())
	if err := os.Rename(filepath.Join(root, sk.StorePublicKey()), old); err != nil {
		t.Fatal(err)
	}

	// A cluster node refuses, naming the directory, and moves nothing.
	cluster := mesh.Options{Port: -1, NoDaemons: true, Cluster: &mesh.ClusterOptions{Name: "c", Port: -1}}
	if _, err := mesh.Up(ctx, dir, cluster); err == nil || !strings.Contains(err.Error(), old) {
		t.Fatalf("cluster start on a store from before the store account: %v", err)
	}
	if _, err := os.Stat(old); err != nil {
		t.Fatalf("the refused start moved the store: %v", err)
	}

	m, err = mesh.Up(ctx, dir, mesh.Options{Port: -1, NoDaemons: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(t.Context()) })
	got, err := kvget.ReadLast(ctx, inspect(t, m, sp).Conn(), sp.ChannelsBucket().Stream(), row)
	if err != nil || !strings.Contains(string(got.Data), "kept") {
		t.Fatalf("the row stored before the move: %v", err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Fatalf("the space's account still holds a store: %v", err)
	}
}

// inspect is JetStream on a warden credential of m's space, which reads and writes its buckets.
func inspect(t *testing.T, m *mesh.Mesh, sp wire.Space) jetstream.JetStream {
	t.Helper()
	mm := &meshtest.Mesh{Mesh: m, Space: sp}
	js, err := jetstream.New(mm.Connect(t, mm.Mint(t, ledger.Request{Profile: authority.ProfileWarden, Name: "inspector"})).Conn)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
