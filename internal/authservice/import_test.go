package authservice_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/broker/brokertest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/remotemgr"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/wire"
)

const (
	importSpace = wire.Space("main")
	ownerA      = "u_aaaaaaaaaaaaaaaaaaaaaaaaaa"
)

// userAuthStore makes the user-auth store of importSpace on a bare broker of the test's own, as
// provisioning makes it.
func userAuthStore(t *testing.T) jetstream.KeyValue {
	t.Helper()
	js := brokertest.JetStream(t)
	if _, err := js.CreateStream(t.Context(), space.UserAuthStoreConfig(importSpace)); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), string(meshwire.UserAuthBucket(importSpace)))
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// writeFile writes v as the file layout wrote its records: indented JSON and a newline, 0600 in a
// 0700 directory.
func writeFile(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(raw, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
}

// fileLayout writes a people ledger and a registry of remote managers in dir as the files kept
// them: alice's cli row, her managed agent bot, and the remote manager she registered.
func fileLayout(t *testing.T, dir string) (cli, bot userauth.Row, reg remotemgr.Registration) {
	t.Helper()
	cli = userauth.Row{Ver: 1, Owner: ownerA, Actor: "cli", Scope: []string{"supervise", "spawn"}, AllowSubscribe: []string{"team.>"},
		AllowPublish: []string{"team.a"}, Label: "alice", LifecycleUID: wire.NewLifecycleUID(), GrantedAt: 1_700_000_000_000}
	bot = userauth.Row{Ver: 1, Owner: ownerA, Actor: "bot", Scope: []string{}, AllowSubscribe: []string{"team.a"}, AllowPublish: []string{},
		Parent: ownerA + ".cli", TokenHash: strings.Repeat("ab", 32), LifecycleUID: wire.NewLifecycleUID(), GrantedAt: 1_700_000_000_001}
	instance := string(wire.NewLifecycleUID())
	reg = remotemgr.Registration{V: 1, Owner: ownerA, Actor: "cli", InstanceID: instance, LifecycleUID: string(wire.NewLifecycleUID()),
		PreparedAt: 1_700_000_000, Agents: []remotemgr.Target{{Owner: ownerA, Actor: "bot", LifecycleUID: string(bot.LifecycleUID)}}, Keys: []string{"UKEY"}}
	writeFile(t, filepath.Join(dir, "actors", ownerA+".cli.json"), cli)
	writeFile(t, filepath.Join(dir, "managed-actors", ownerA+".bot.json"), bot)
	writeFile(t, filepath.Join(dir, "remote-managers", instance+".json"), reg)
	// An atomic write's leftover and a file that is no record are not read, as they never were.
	writeFile(t, filepath.Join(dir, "actors", ".tmp-123"), "partial")
	writeFile(t, filepath.Join(dir, "remote-managers", "notes.txt"), "not a record")
	return cli, bot, reg
}

// imported reports which of the file layout's directories are renamed imported, and which are
// still there.
func imported(t *testing.T, dir string) (done, left []string) {
	t.Helper()
	for _, name := range []string{"actors", "managed-actors", "remote-managers"} {
		if _, err := os.Stat(filepath.Join(dir, name+".imported")); err == nil {
			done = append(done, name)
		}
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, fs.ErrNotExist) {
			left = append(left, name)
		}
	}
	return done, left
}

// TestOpenStateImportsTheFileLayout shows a people ledger and registry kept as files imported
// into the user-auth store at the first open, each row keeping its incarnation, and never read
// again: a row revoked in the store after the import stays revoked at the next open.
func TestOpenStateImportsTheFileLayout(t *testing.T) {
	ctx := t.Context()
	kv := userAuthStore(t)
	dir := t.TempDir()
	cli, bot, reg := fileLayout(t, dir)

	st, err := authservice.OpenState(ctx, dir, importSpace, kv)
	if err != nil {
		t.Fatal(err)
	}
	if done, left := imported(t, dir); len(done) != 3 || len(left) != 0 {
		t.Fatalf("after the import: %v renamed, %v left", done, left)
	}
	rows, err := st.People.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Actor != "bot" || rows[1].Actor != "cli" {
		t.Fatalf("imported rows %+v", rows)
	}
	if got := rows[1]; got.Kind != userauth.KindInteractive || got.LifecycleUID != cli.LifecycleUID || got.GrantedAt != cli.GrantedAt || got.Label != "alice" {
		t.Errorf("imported cli row %+v, want %+v", got, cli)
	}
	if got := rows[0]; got.Kind != userauth.KindManaged || got.LifecycleUID != bot.LifecycleUID || got.TokenHash != bot.TokenHash {
		t.Errorf("imported bot row %+v, want %+v", got, bot)
	}
	regs, err := st.Registry.Of(ctx, ownerA, "")
	if err != nil || len(regs) != 1 || regs[0].InstanceID != reg.InstanceID || len(regs[0].Agents) != 1 || regs[0].Keys[0] != "UKEY" {
		t.Fatalf("imported registrations %+v, %v", regs, err)
	}

	// A second open imports nothing: the store's changes since stand.
	if err := st.People.Revoke(ctx, ownerA, "cli"); err != nil {
		t.Fatal(err)
	}
	again, err := authservice.OpenState(ctx, dir, importSpace, kv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.People.Get(ctx, ownerA, "cli"); !errors.Is(err, userauth.ErrNoRow) {
		t.Fatalf("the revoked row after a second open: %v", err)
	}
	// An import that stopped before its renames runs again whole, and still leaves the row
	// revoked since revoked.
	done, _ := imported(t, dir)
	for _, name := range done {
		if err := os.Rename(filepath.Join(dir, name+".imported"), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	rerun, err := authservice.OpenState(ctx, dir, importSpace, kv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rerun.People.Get(ctx, ownerA, "cli"); !errors.Is(err, userauth.ErrNoRow) {
		t.Fatalf("an import run again brought the revoked row back: %v", err)
	}
}

// TestOpenStateImportRefusesAConflict shows an import that finds another row under one of its
// keys fail naming the key, writing nothing further and renaming nothing, so it runs again whole
// once the conflict is resolved (here, the stale file removed).
func TestOpenStateImportRefusesAConflict(t *testing.T) {
	ctx := t.Context()
	kv := userAuthStore(t)
	dir := t.TempDir()
	_, bot, reg := fileLayout(t, dir)

	// A different incarnation of bot is in the store already.
	other := bot
	other.LifecycleUID = wire.NewLifecycleUID()
	raw, _ := json.Marshal(other)
	key := "managed." + ownerA + ".bot"
	if _, err := kv.Put(ctx, key, raw); err != nil {
		t.Fatal(err)
	}
	if _, err := authservice.OpenState(ctx, dir, importSpace, kv); err == nil || !strings.Contains(err.Error(), key) {
		t.Fatalf("OpenState over a conflicting row: %v, want an error naming %s", err, key)
	}
	if done, left := imported(t, dir); len(done) != 0 || len(left) != 3 {
		t.Fatalf("after a failed import: %v renamed, %v left", done, left)
	}
	if _, err := kv.Get(ctx, "manager."+reg.InstanceID); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a registration was imported after the conflict: %v", err)
	}

	// Resolved (the stale file removed: the store's row stands): the next open imports the rest.
	if err := os.Remove(filepath.Join(dir, "managed-actors", ownerA+".bot.json")); err != nil {
		t.Fatal(err)
	}
	st, err := authservice.OpenState(ctx, dir, importSpace, kv)
	if err != nil {
		t.Fatal(err)
	}
	if row, err := st.People.Get(ctx, ownerA, "bot"); err != nil || row.LifecycleUID != other.LifecycleUID {
		t.Fatalf("bot after the import: %+v %v", row, err)
	}
	if got, err := st.Registry.Get(ctx, reg.InstanceID); err != nil || got == nil {
		t.Fatalf("the registration after the import: %+v %v", got, err)
	}
	if done, _ := imported(t, dir); len(done) != 3 {
		t.Fatalf("after the import: %v renamed", done)
	}
}

// TestOpenStateImportRefusesAnUnreadableFile shows a file the file ledger would not have read
// stop the import, naming the file: nothing is written and nothing renamed.
func TestOpenStateImportRefusesAnUnreadableFile(t *testing.T) {
	stray := string(wire.NewLifecycleUID())
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, dir string)
		want  string // what the error names
	}{
		{"corrupt row", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "actors", ownerA+".x.json"), map[string]any{"ver": 1})
		}, ownerA + ".x.json"},
		{"misnamed row", func(t *testing.T, dir string) {
			raw, _ := os.ReadFile(filepath.Join(dir, "actors", ownerA+".cli.json"))
			if err := os.WriteFile(filepath.Join(dir, "actors", ownerA+".other.json"), raw, 0o600); err != nil {
				t.Fatal(err)
			}
		}, ownerA + ".other.json"},
		{"symlinked row", func(t *testing.T, dir string) {
			if err := os.Symlink(filepath.Join(dir, "actors", ownerA+".cli.json"), filepath.Join(dir, "actors", ownerA+".link.json")); err != nil {
				t.Fatal(err)
			}
		}, ownerA + ".link.json"},
		{"row in both directories", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "actors", ownerA+".bot.json"), userauth.Row{Ver: 1, Owner: ownerA, Actor: "bot",
				Scope: []string{}, AllowSubscribe: []string{}, AllowPublish: []string{}, LifecycleUID: wire.NewLifecycleUID()})
		}, ownerA + ".bot is granted both"},
		{"registration of another instance", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "remote-managers", stray+".json"),
				remotemgr.Registration{V: 1, Owner: ownerA, InstanceID: string(wire.NewLifecycleUID())})
		}, stray + ".json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv := userAuthStore(t)
			dir := t.TempDir()
			fileLayout(t, dir)
			tc.spoil(t, dir)
			if _, err := authservice.OpenState(t.Context(), dir, importSpace, kv); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("OpenState = %v, want a refusal naming %s", err, tc.want)
			}
			if keys, err := kv.Keys(t.Context()); !errors.Is(err, jetstream.ErrNoKeysFound) {
				t.Fatalf("the store after a refused import: %v %v", keys, err)
			}
			if done, _ := imported(t, dir); len(done) != 0 {
				t.Fatalf("renamed %v after a refused import", done)
			}
		})
	}
}
