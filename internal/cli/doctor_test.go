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
	"github.com/gocotal/cotal/internal/meshwire"
)

// TestDoctorFixReplacesCorruptCredentialRows corrupts, as an admin could, an agent's credential
// row, another's gate and a third's alias head: `doctor auth` names each and fails; `doctor auth
// --fix` repairs each failing safe, after which the doctor passes, the broker refuses all three
// agents, their names can be minted again, and a fourth agent is untouched.
func TestDoctorFixReplacesCorruptCredentialRows(t *testing.T) {
	t.Parallel()
	dir := upMesh(t)
	ctx := t.Context()
	alice, bob, carol, dave := filepath.Join(dir, "alice.creds"), filepath.Join(dir, "bob.creds"), filepath.Join(dir, "carol.creds"), filepath.Join(dir, "dave.creds")
	for name, out := range map[string]string{"alice": alice, "bob": bob, "carol": carol, "dave": dave} {
		if code, _, stderr := run(t, "mint", name, "--out", out, "--dir", dir); code != exit.OK {
			t.Fatalf("mint %s: exit %d, %s", name, code, stderr)
		}
	}

	d := mesh.Dir{Path: filepath.Join(dir, mesh.DirName)}
	st, err := d.ReadState()
	if err != nil {
		t.Fatal(err)
	}
	rowOf := func(actor string) (uid, id string) {
		t.Helper()
		code, out, stderr := run(t, "creds", "list", "--json", "--actor", actor, "--dir", dir)
		if code != exit.OK {
			t.Fatalf("creds list: exit %d, %s", code, stderr)
		}
		var rows []struct{ LifecycleUID, CredentialID string }
		if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
			t.Fatalf("%s's rows %q (%v)", actor, out, err)
		}
		return rows[0].LifecycleUID, rows[0].CredentialID
	}
	aliceUID, aliceID := rowOf("alice")
	carolUID, _ := rowOf("carol")
	key, gate, head := "cred."+aliceUID+"."+aliceID, "gate."+carolUID, "lifecycle.local.dave"
	rows := []struct{ LifecycleUID, CredentialID string }{{aliceUID, aliceID}}

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
	kv, err := js.KeyValue(ctx, string(meshwire.AuthBucket(st.Spaces[0])))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		key:  `{"v":1,"profile":"agent","state":"active","oops":true}`,
		gate: `{"state":"open","oops":true}`,
		head: `{"owner":"local","actor":"dave","state":"active","oops":true}`,
	} {
		if _, err := kv.Put(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}

	code, out, _ := run(t, "doctor", "auth", "--dir", dir)
	for _, k := range []string{key, gate, head} {
		if code == exit.OK || !strings.Contains(out, k) {
			t.Errorf("doctor auth on corrupt rows: exit %d, %q; want a failure naming %s", code, out, k)
		}
	}
	code, out, stderr := run(t, "doctor", "auth", "--fix", "--dir", dir)
	if code != exit.OK {
		t.Fatalf("doctor auth --fix: exit %d, %q %q", code, out, stderr)
	}
	for _, k := range []string{key, gate, head} {
		if !strings.Contains(out, "fixed: "+k) {
			t.Errorf("doctor auth --fix did not fix %s:\n%s", k, out)
		}
	}
	if _, out, _ = run(t, "creds", "list", "--dir", dir, "--actor", "alice", "--state", "revoked"); !strings.Contains(out, rows[0].CredentialID) {
		t.Errorf("alice's replaced row is not listed revoked:\n%s", out)
	}
	if c, err := cotal.Connect(ctx, st.URL, cotal.WithCreds(alice), cotal.WithPresence(false), cotal.WithNATSOptions(nats.NoReconnect())); err == nil {
		c.Close(ctx)
		t.Error("the broker still accepts the credential of the corrupt row")
	}
	for name, creds := range map[string]string{"carol (corrupt gate)": carol, "dave (corrupt head)": dave} {
		if c, err := cotal.Connect(ctx, st.URL, cotal.WithCreds(creds), cotal.WithPresence(false), cotal.WithNATSOptions(nats.NoReconnect())); err == nil {
			c.Close(ctx)
			t.Errorf("the broker still accepts %s after the fix", name)
		}
	}
	c, err := cotal.Connect(ctx, st.URL, cotal.WithCreds(bob), cotal.WithPresence(false))
	if err != nil {
		t.Fatalf("bob, whose row was sound, no longer connects: %v", err)
	}
	c.Close(ctx)
	for _, name := range []string{"carol", "dave"} {
		if code, _, stderr := run(t, "mint", name, "--out", filepath.Join(dir, name+"2.creds"), "--dir", dir); code != exit.OK {
			t.Errorf("mint %s after the fix: exit %d, %s", name, code, stderr)
		}
	}
}
