package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/mesh"
)

// TestDoctorFixReplacesCorruptCredentialRows corrupts an agent's credential row as an admin
// could: `doctor auth` names it and fails; `doctor auth --fix` replaces it with a revoked row,
// after which the broker refuses that agent, the doctor passes, and another agent is untouched.
func TestDoctorFixReplacesCorruptCredentialRows(t *testing.T) {
	t.Parallel()
	dir := upMesh(t)
	ctx := t.Context()
	alice, bob := filepath.Join(dir, "alice.creds"), filepath.Join(dir, "bob.creds")
	for name, out := range map[string]string{"alice": alice, "bob": bob} {
		if code, _, stderr := run(t, "mint", name, "--out", out, "--dir", dir); code != exit.OK {
			t.Fatalf("mint %s: exit %d, %s", name, code, stderr)
		}
	}

	d := mesh.Dir{Path: filepath.Join(dir, mesh.DirName)}
	st, err := d.ReadState()
	if err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, "creds", "list", "--json", "--actor", "alice", "--dir", dir)
	if code != exit.OK {
		t.Fatalf("creds list: exit %d, %s", code, stderr)
	}
	var rows []struct{ LifecycleUID, CredentialID string }
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("alice's rows %q (%v)", out, err)
	}
	key := "cred." + rows[0].LifecycleUID + "." + rows[0].CredentialID

	// An admin with the ledger's rights writes garbage over alice's row.
	kr, err := d.OpenKeyring()
	if err != nil {
		t.Fatal(err)
	}
	cred, err := ledger.Mint(kr, ledger.Request{Space: st.Spaces[0], Profile: authority.ProfileLedger, Name: "admin_hand"})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := dial.As(ctx, st.URL, cred)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctx, string(st.Spaces[0].AuthBucket()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, key, []byte(`{"v":1,"profile":"agent","state":"active","oops":true}`)); err != nil {
		t.Fatal(err)
	}

	code, out, _ = run(t, "doctor", "auth", "--dir", dir)
	if code == exit.OK || !strings.Contains(out, key) {
		t.Fatalf("doctor auth on a corrupt row: exit %d, %q; want a failure naming %s", code, out, key)
	}
	code, out, stderr = run(t, "doctor", "auth", "--fix", "--dir", dir)
	if code != exit.OK || !strings.Contains(out, "fixed: "+key) {
		t.Fatalf("doctor auth --fix: exit %d, %q %q", code, out, stderr)
	}
	if _, out, _ = run(t, "creds", "list", "--dir", dir, "--actor", "alice", "--state", "revoked"); !strings.Contains(out, rows[0].CredentialID) {
		t.Errorf("alice's replaced row is not listed revoked:\n%s", out)
	}
	if c, err := cotal.Connect(ctx, st.URL, cotal.WithCreds(alice), cotal.WithPresence(false), cotal.WithNATSOptions(nats.NoReconnect())); err == nil {
		c.Close(ctx)
		t.Error("the broker still accepts the credential of the corrupt row")
	}
	c, err := cotal.Connect(ctx, st.URL, cotal.WithCreds(bob), cotal.WithPresence(false))
	if err != nil {
		t.Fatalf("bob, whose row was sound, no longer connects: %v", err)
	}
	c.Close(ctx)
}
