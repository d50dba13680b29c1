package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal"
	clibackup "github.com/gocotal/cotal/internal/cli/backup"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/wire"
)

// TestBackupRestore: 100 posts and 10 DMs, `cotal backup create`, the mesh stopped, `cotal up
// --restore` in a new directory: the posts are in the channel's history, the DMs wait in the
// agent's inbox, and a credential minted before the backup still connects. A damaged backup, a
// wrong passphrase and a directory that holds a mesh are refused, and restore nothing.
func TestBackupRestore(t *testing.T) {
	dir := t.TempDir()
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan int, 1)
	upIO, _, _, _ := iostreams.Test()
	go func() { done <- Main(ctx, upIO, []string{"up", "--dir", dir, "--port", "0"}) }()
	st := waitUp(t, dir, done)

	creds := map[string]string{}
	for _, name := range []string{"alice", "bob"} {
		creds[name] = filepath.Join(t.TempDir(), name+".creds")
		if code, _, stderr := run(t, "mint", name, "--subscribe", "general", "--provision", "--out", creds[name], "--dir", dir); code != exit.OK {
			t.Fatalf("mint %s: exit %d: %s", name, code, stderr)
		}
	}
	bob, err := cotal.Connect(t.Context(), st.URL, cotal.WithCreds(creds["bob"]), cotal.WithPresence(false))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := bob.Post(t.Context(), "general", []wire.Part{wire.TextPart(fmt.Sprint("post ", i))}); err != nil {
			t.Fatal(err)
		}
	}
	alicePrincipal, err := wire.NewPrincipal(wire.DevOwner, "alice")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := bob.DirectMessage(t.Context(), alicePrincipal, []wire.Part{wire.TextPart(fmt.Sprint("dm ", i))}); err != nil {
			t.Fatal(err)
		}
	}
	_ = bob.Close(t.Context())

	pass := filepath.Join(t.TempDir(), "pass")
	if err := os.WriteFile(pass, []byte("correct horse battery staple\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "b.tgz")
	code, stdout, stderr := run(t, "backup", "create", "--out", out, "--passphrase-file", pass, "--dir", dir)
	if code != exit.OK || !strings.Contains(stdout, "keys sealed with a passphrase") {
		t.Fatalf("backup create: exit %d, %q %q", code, stdout, stderr)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the backup file: %v, %v; want 0600", fi, err)
	}
	if code, _, stderr := run(t, "backup", "create", "--out", out, "--dir", dir); code != exit.Usage || !strings.Contains(stderr, "exists") {
		t.Errorf("a backup over an existing file: exit %d, %q", code, stderr)
	}
	if code, stdout, stderr := run(t, "backup", "verify", out, "--passphrase-file", pass); code != exit.OK || !strings.Contains(stdout, "every file matches") {
		t.Errorf("backup verify: exit %d, %q %q", code, stdout, stderr)
	}
	t.Setenv(clibackup.EnvPassphrase, "")
	if code, stdout, stderr := run(t, "backup", "create", "--out", filepath.Join(t.TempDir(), "plain.tgz"), "--dir", dir); code != exit.OK || !strings.Contains(stdout, "keys unsealed") || !strings.Contains(stderr, "warning") {
		t.Errorf("a backup without a passphrase: exit %d, %q %q; want the keys unsealed, with a warning", code, stdout, stderr)
	}
	if code, stdout, _ := run(t, "backup", "create", "--out", filepath.Join(t.TempDir(), "nokeys.tgz"), "--no-keys", "--dir", dir); code != exit.OK || !strings.Contains(stdout, "keys left out") {
		t.Errorf("a backup with --no-keys: exit %d, %q", code, stdout)
	}
	stop()
	<-done

	// A damaged backup and a wrong passphrase restore nothing.
	raw, _ := os.ReadFile(out)
	damaged := filepath.Join(t.TempDir(), "damaged.tgz")
	_ = os.WriteFile(damaged, raw[:len(raw)/2], 0o600)
	if code, _, stderr := run(t, "backup", "verify", damaged); code == exit.OK {
		t.Errorf("a damaged backup verified: %q", stderr)
	}
	wrong := filepath.Join(t.TempDir(), "wrong")
	_ = os.WriteFile(wrong, []byte("tr0ub4dor&3\n"), 0o600)
	fresh := t.TempDir()
	if code, _, stderr := run(t, "up", "--dir", fresh, "--port", "0", "--restore", out, "--passphrase-file", wrong); code == exit.OK || !strings.Contains(stderr, "passphrase") {
		t.Errorf("a restore with the wrong passphrase: exit %d, %q", code, stderr)
	}
	if entries, _ := os.ReadDir(filepath.Join(fresh, mesh.DirName, "auth")); len(entries) > 0 {
		t.Errorf("a failed restore left keys behind: %v", entries)
	}
	if code, _, stderr := run(t, "up", "--dir", dir, "--port", "0", "--restore", out, "--passphrase-file", pass); code == exit.OK || !strings.Contains(stderr, "already holds a mesh") {
		t.Errorf("a restore over a mesh: exit %d, %q", code, stderr)
	}

	ctx2, stop2 := context.WithCancel(t.Context())
	defer stop2()
	done2 := make(chan int, 1)
	up2, _, _, upErr := iostreams.Test()
	go func() {
		done2 <- Main(ctx2, up2, []string{"up", "--dir", fresh, "--port", "0", "--restore", out, "--passphrase-file", pass})
	}()
	select {
	case code := <-done2:
		t.Fatalf("up --restore exited %d: %s", code, upErr.String())
	case <-time.After(0):
	}
	st2 := waitUp(t, fresh, done2)
	if got := chatCounts(t, fresh); got["general"] != 100 {
		t.Errorf("the restored channel holds %d posts, want 100", got["general"])
	}
	dms := make(chan string, 20)
	alice, err := cotal.Connect(t.Context(), st2.URL, cotal.WithCreds(creds["alice"]), cotal.WithPresence(false),
		cotal.WithHandler(func(_ context.Context, dl *cotal.Delivery) error {
			if dl.Kind == wire.DeliveryDM {
				dms <- dl.Message.Parts[0].Text
			}
			return nil
		}))
	if err != nil {
		t.Fatalf("a credential minted before the backup does not connect to the restored mesh: %v", err)
	}
	defer alice.Close(context.Background())
	got := map[string]bool{}
	for len(got) < 10 {
		select {
		case text := <-dms:
			got[text] = true
		case <-time.After(20 * time.Second):
			t.Fatalf("the restored inbox gave %d of the 10 DMs: %v", len(got), got)
		}
	}
	stop2()
	<-done2
}
