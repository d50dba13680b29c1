package faulttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// TestCorruptAuthRows has an admin, holding the mesh's keys, write malformed rows straight into
// the auth store (cotal_auth_<space>) with a ledger-profile connection, past every check of the
// ledger: an alias head naming another principal (local.victim's head naming alice and her
// lifecycle), a gate with a field its closed schema lacks, and a credential row that is not JSON.
// Then:
//
//   - `cotal doctor auth` exits non-zero and names each of the three rows;
//   - ledger operations that touch them refuse with ErrCorrupt instead of acting: a mint of
//     local.victim (which would otherwise take over the lifecycle the corrupt head names),
//     retiring, taking over and issuing on the lifecycle with the corrupt gate, revoking the
//     garbage credential; listing the credentials returns the sound rows and an error naming
//     the garbage one;
//   - nothing else is lost: alice and bob, issued before, keep their open gates and active
//     credentials and still talk over a DM and a channel post.
//
// Two rows that are not JSON objects at all (one new, one over bob's credential row) have the
// shape of a JetStream reply, which the warden undoes: it removes the new one and puts bob's
// row back, so the doctor never sees them.
func TestCorruptAuthRows(t *testing.T) {
	meshtest.Long(t, "kills and restarts real processes")
	t.Parallel()
	ctx := bounded(t, 2*time.Minute)
	m := startMesh(t, "--no-manager")
	l := m.ledger(ctx)

	const channel = "general"
	alice := startAgent(ctx, t, l, ledger.Request{Name: "alice", Subscribe: []string{channel}})
	bob := startAgent(ctx, t, l, ledger.Request{Name: "bob", Subscribe: []string{channel}})
	victim := startAgent(ctx, t, l, ledger.Request{Name: "victim"})
	carol := startAgent(ctx, t, l, ledger.Request{Name: "carol"})
	carolLife := wire.Lifecycle{Principal: carol.Principal, UID: carol.LifecycleUID}
	intact(ctx, t, m, l, "before the corruption", alice, bob)

	if code, out, stderr := m.cotal(ctx, "doctor", "auth", "--dir", m.root); code != 0 {
		t.Fatalf("doctor auth on a sound store: exit %d\n%s%s", code, out, stderr)
	}

	// The admin's writes: three rows that are JSON but not what their keys hold, and two that
	// are not JSON at all, one of them over bob's credential row.
	_, kv := m.rawAuth(ctx)
	headKey := "lifecycle." + victim.Principal.String()
	wrongHead, _ := json.Marshal(map[string]any{
		"owner": alice.Principal.Owner(), "actor": alice.Principal.Actor(), "lifecycleUid": alice.LifecycleUID,
		"processEpoch": 1, "state": "active",
	})
	gateKey := "gate." + string(carol.LifecycleUID)
	extraGate, _ := json.Marshal(map[string]any{
		"state": "open", "generation": 1, "processEpoch": 1, "op": map[string]string{"opId": "activate-" + string(carol.LifecycleUID), "kind": "activation"},
		"note": "edited by hand",
	})
	badID := "bad" + nuid.Next()
	credKey := "cred." + string(carol.LifecycleUID) + "." + badID
	badCred, _ := json.Marshal(map[string]any{"v": 7, "credentialId": badID, "note": "written by hand"})
	junkKey := "cred." + string(carol.LifecycleUID) + ".junk" + nuid.Next()
	bobKey := "cred." + string(bob.LifecycleUID) + "." + bob.CredentialID
	bobRow, err := kv.Get(ctx, bobKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		key   string
		value []byte
	}{{headKey, wrongHead}, {gateKey, extraGate}, {credKey, badCred}, {junkKey, []byte("\x00not a row")}, {bobKey, []byte("\x00not a row")}} {
		if _, err := kv.Put(ctx, w.key, w.value); err != nil {
			t.Fatalf("the admin's write of %s: %v", w.key, err)
		}
	}
	// A row that is not a JSON object has the shape of a JetStream reply: the warden removes it,
	// or puts back the row it replaced.
	if !waitFor(ctx, 100*time.Millisecond, func() bool {
		_, junkErr := kv.Get(ctx, junkKey)
		e, err := kv.Get(ctx, bobKey)
		return errors.Is(junkErr, jetstream.ErrKeyNotFound) && err == nil && bytes.Equal(e.Value(), bobRow.Value())
	}) {
		t.Errorf("the warden did not remove %s or put bob's row back", junkKey)
	} else {
		t.Logf("the warden removed the non-JSON row %s and put bob's credential row back", junkKey)
	}

	// The doctor names each of the others.
	code, out, stderr := m.cotal(ctx, "doctor", "auth", "--dir", m.root)
	if code == 0 {
		t.Errorf("doctor auth exits 0 on a store with corrupt rows:\n%s", out)
	}
	if miss := containsAll(out, headKey, gateKey, credKey); len(miss) > 0 {
		t.Errorf("doctor auth does not name %q:\n%s%s", miss, out, stderr)
	}
	if n := strings.Count(out, "corrupt:"); n != 3 {
		t.Errorf("doctor auth reports %d corrupt rows, want exactly the 3 written:\n%s", n, out)
	}
	t.Logf("doctor auth: exit %d\n%s%s", code, out, stderr)

	// The ledger refuses to act on them.
	refuse := func(what string, err error) {
		t.Helper()
		switch {
		case err == nil:
			t.Errorf("%s succeeded over a corrupt row", what)
		case !errors.Is(err, authstore.ErrCorrupt):
			t.Errorf("%s failed without naming the corruption: %v", what, err)
		default:
			t.Logf("%s refused: %v", what, err)
		}
	}
	refuse("retiring carol's lifecycle", l.Retire(ctx, carolLife))
	_, err = l.Takeover(ctx, carolLife, "op-"+nuid.Next())
	refuse("taking carol's lifecycle over", err)
	err = meshtest.WithStore(t, l.URL(), m.keyring(), l.Space(), func(s *authstore.Store, keys *authority.SpaceKeys) error {
		_, err := s.Issue(ctx, keys, authority.MintRequest{Profile: authority.ProfileAgent, Grant: authority.Grant{Principal: carol.Principal, LifecycleUID: carol.LifecycleUID}}, nuid.Next())
		return err
	})
	refuse("issuing on carol's lifecycle", err)
	_, err = l.Revoke(ctx, carol.LifecycleUID, badID, "faulttest")
	refuse("revoking the corrupt credential row", err)
	_, err = l.Credentials(ctx)
	refuse("listing the credentials", err)
	if err != nil && !strings.Contains(err.Error(), credKey) {
		t.Errorf("listing the credentials fails without naming %s: %v", credKey, err)
	}
	intact(ctx, t, m, l, "after the refusals", alice, bob)

	// A mint of local.victim reads a head that names alice's lifecycle: acting on it would take
	// alice's lifecycle over.
	_, err = l.Issue(ctx, ledger.Request{Name: "victim"})
	refuse("a mint of local.victim, whose head names alice", err)
	intact(ctx, t, m, l, "after the mint of local.victim", alice, bob)

	// Refusing changed nothing: the same rows are still there to repair.
	if code, out, _ := m.cotal(ctx, "doctor", "auth", "--dir", m.root); err != nil && (code == 0 || strings.Count(out, "corrupt:") != 3) {
		t.Errorf("doctor auth after the ledger's refusals: exit %d, want the same 3 corrupt rows:\n%s", code, out)
	}
}

// intact checks that alice and bob lost nothing: their credential rows are active and their
// gates open, the broker admits them, and alice's DM and post reach bob.
func intact(ctx context.Context, t *testing.T, m *meshProc, l *ledger.Ledger, when string, alice, bob *authority.Credential) {
	t.Helper()
	rows, _ := l.Credentials(ctx) // the corrupt row's error was checked already
	byID := map[string]authstore.CredentialRow{}
	for _, r := range rows {
		byID[r.CredentialID] = r
	}
	for _, c := range []*authority.Credential{alice, bob} {
		if r, ok := byID[c.CredentialID]; !ok || r.State != authstore.CredActive {
			t.Errorf("%s: %s's credential row is %s (listed: %v), want active (reason %q)", when, c.Principal, r.State, ok, r.Reason)
		}
		var og *authstore.ObservedGate
		if err := meshtest.WithStore(t, l.URL(), m.keyring(), l.Space(), func(s *authstore.Store, _ *authority.SpaceKeys) error {
			var err error
			og, err = s.ObserveGate(ctx, c.LifecycleUID)
			return err
		}); err != nil || og == nil || og.Row.State != authstore.GateOpen {
			t.Errorf("%s: %s's gate is %+v (%v), want open", when, c.Principal, og, err)
		}
		if no, err := refused(ctx, m.url, c); err != nil || no {
			t.Errorf("%s: the broker refuses %s: %v, %v", when, c.Principal, no, err)
			return
		}
	}
	rec := newTally()
	bc, err := cotal.Connect(ctx, m.url, cotal.WithCredsData(bob.Creds), cotal.WithHandler(rec.handle), cotal.WithJoin("general"))
	if err != nil {
		t.Errorf("%s: bob connects: %v", when, err)
		return
	}
	defer bc.Close(context.WithoutCancel(ctx))
	ac, err := cotal.Connect(ctx, m.url, cotal.WithCredsData(alice.Creds))
	if err != nil {
		t.Errorf("%s: alice connects: %v", when, err)
		return
	}
	defer ac.Close(context.WithoutCancel(ctx))
	dm, err := ac.DirectMessage(ctx, bob.Principal, []wire.Part{wire.TextPart("still here")})
	if err != nil {
		t.Errorf("%s: alice's DM: %v", when, err)
		return
	}
	post, err := ac.Post(ctx, "general", []wire.Part{wire.TextPart("still posting")})
	if err != nil {
		t.Errorf("%s: alice's post: %v", when, err)
		return
	}
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if miss := rec.waitAll(wctx, []string{dm.ID, post.ID}); len(miss) > 0 {
		t.Errorf("%s: bob did not get %d of alice's 2 messages", when, len(miss))
	}
}
