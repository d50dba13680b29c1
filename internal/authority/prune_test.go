package authority_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// TestPruneKeepsOnlyWhatStillGuards shows one prune pass past the retention: an ended session's
// row and stage pins are removed, and so is the revocation of an expired credential whose row
// the bucket dropped; the revocation of a credential that never expires stays, and the broker
// still refuses it. A pass inside the retention removes nothing.
func TestPruneKeepsOnlyWhatStillGuards(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	l := m.Ledger("")

	// A revoked agent that never expires, and a revoked observer that expires in a second.
	agent, err := l.Issue(ctx, ledger.Request{Name: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	brief, err := l.Issue(ctx, ledger.Request{Profile: authority.ProfileObserver, Name: "brief", Expires: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*authority.Credential{agent, brief} {
		if _, err := l.Revoke(ctx, c.LifecycleUID, c.CredentialID, "test"); err != nil {
			t.Fatal(err)
		}
	}

	// A session, ended.
	bob, err := l.Issue(ctx, ledger.Request{Name: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	holder := wire.Lifecycle{Principal: bob.Principal, UID: bob.LifecycleUID}
	serving := authstore.Endpoint{Name: "search", InstanceID: wire.NewLifecycleUID()}
	const sid = "sess_prunepruneprune0000"
	openSession(t, m, holder, serving, sid)
	err = m.Ledger("").CloseSession(ctx, sid, authstore.SessionCloser{Holder: &holder}, "")
	if err != nil {
		t.Fatal(err)
	}

	revocations := func() map[string]int64 {
		t.Helper()
		list, err := m.Keyring().Revocations(m.Space)
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	before := revocations()
	for _, c := range []*authority.Credential{agent, brief} {
		if _, ok := before[c.PublicKey]; !ok {
			t.Fatalf("the revocation of %s is not in the list", c.Principal)
		}
	}

	// Inside the retention nothing goes.
	if p, err := l.Prune(ctx, time.Now(), ledger.Retention); err != nil || p.Sessions+p.Revocations != 0 {
		t.Fatalf("a prune inside the retention removed %+v, %v", p, err)
	}
	meshtest.Eventually(t, 10*time.Second, "the expired credential's row dropped", func() bool {
		rows, err := l.Credentials(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.UserKey == brief.PublicKey {
				return false
			}
		}
		return true
	})

	p, err := l.Prune(ctx, time.Now().Add(ledger.Retention+time.Minute), ledger.Retention)
	if err != nil {
		t.Fatal(err)
	}
	if p.Sessions != 1 {
		t.Errorf("pruned %d sessions, want the ended one", p.Sessions)
	}
	after := revocations()
	if _, ok := after[brief.PublicKey]; ok {
		t.Error("the revocation of an expired credential without a row was kept")
	}
	if _, ok := after[agent.PublicKey]; !ok {
		t.Error("the revocation of a credential that never expires was pruned")
	}
	if nc, err := dial.As(ctx, m.URL(), agent, nats.NoReconnect()); err == nil {
		nc.Close()
		t.Error("after the prune the broker accepts a revoked credential that never expires")
	}
	// The pruned session is gone once its marker expires: no row, no corrupt read.
	meshtest.Eventually(t, 15*time.Second, "the pruned session's key gone", func() bool {
		var gone bool
		err := m.WithStore(t, func(s *authstore.Store, _ *authority.SpaceKeys) error {
			os, err := s.Session(ctx, sid)
			gone = err == nil && os == nil
			return nil
		})
		return err == nil && gone
	})
	c, err := l.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Problems) != 0 {
		t.Errorf("the doctor finds problems after a prune: %v", c.Problems)
	}
}

// TestRepairAllRefusesACorruptSession: a session row an admin corrupted is removed with its stage
// pins by the repair, and the broker refuses both of its halves, whose keys the repair derives
// without reading the row.
func TestRepairAllRefusesACorruptSession(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	l := m.Ledger("")
	bob, err := l.Issue(ctx, ledger.Request{Name: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	holder := wire.Lifecycle{Principal: bob.Principal, UID: bob.LifecycleUID}
	const sid = "sess_repairrepairrepair0"
	caller, server := openSession(t, m, holder, authstore.Endpoint{Name: "search", InstanceID: wire.NewLifecycleUID()}, sid)

	admin := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileLedger, Name: "admin_hand"}))
	kv, err := admin.JS.KeyValue(ctx, string(meshwire.AuthBucket(m.Space)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "session."+sid, []byte(`{"sessionId":"`+sid+`","oops":true}`)); err != nil {
		t.Fatal(err)
	}
	repairs, err := l.Repair(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(repairs) != 1 || repairs[0].Err != nil || repairs[0].Key != "session."+sid {
		t.Fatalf("repairs = %+v, want the session row repaired", repairs)
	}
	for _, half := range []*authority.Credential{caller, server} {
		if nc, err := dial.As(ctx, m.URL(), half, nats.NoReconnect()); err == nil {
			nc.Close()
			t.Errorf("the broker still accepts the %s half of a corrupt session", half.Profile)
		}
	}
	meshtest.Eventually(t, 15*time.Second, "the auth store sound again", func() bool {
		c, err := l.Check(ctx)
		return err == nil && len(c.Problems) == 0
	})
}
