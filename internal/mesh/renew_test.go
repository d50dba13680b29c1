package mesh_test

import (
	"os"
	"testing"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/cotaltest"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// soak reports whether the long forms of the time-bound tests run (COTAL_SOAK=1); CI runs the
// bounded forms.
func soak() bool { return os.Getenv("COTAL_SOAK") == "1" }

// TestDaemonCredentialsRenew runs the daemons on credentials that live 10 s (30 s under
// COTAL_SOAK, for 3 minutes) across several renewals: a durable post made after each is
// delivered, both liveness planes stay bound, and each daemon keeps one ledger row whose
// expiry moves forward, rather than a row per renewal.
func TestDaemonCredentialsRenew(t *testing.T) {
	meshtest.Long(t, "waits out credential renewals")
	t.Parallel()
	life, span := 10*time.Second, 35*time.Second
	if soak() {
		life, span = 30*time.Second, 3*time.Minute
	}
	m := meshtest.Start(t, meshtest.WithDaemons(), meshtest.WithDaemonLifetime(life))
	ctx := t.Context()
	general := []string{"general"}
	alice := m.AgentCred(t, ledger.Request{Name: "alice", Subscribe: general, AllowPublish: general})
	bob := m.AgentCred(t, ledger.Request{Name: "bob", Subscribe: general, AllowPublish: general})
	box := cotaltest.NewRecorder()
	ac, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(alice.Creds), cotal.WithHandler(box.Handle), cotal.WithJoin("general"))
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close(t.Context())
	bc, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(bob.Creds), cotal.WithPresence(false))
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close(t.Context())

	first := daemonRows(t, m)
	deadline := time.Now().Add(span)
	for i := 0; time.Now().Before(deadline); i++ {
		text := "after renewal " + string(rune('a'+i))
		if _, err := bc.Post(ctx, "general", []wire.Part{wire.TextPart(text)}); err != nil {
			t.Fatalf("post %q: %v", text, err)
		}
		box.Next(t, text, cotaltest.Text(text))
		time.Sleep(life / 2)
	}
	for _, plane := range wire.Planes {
		res, err := bc.Probe(ctx, plane)
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict != wire.ResponderBound {
			t.Errorf("the %s plane is %s after %s of renewals, want bound", plane, res.Verdict, span)
		}
	}
	last := daemonRows(t, m)
	for profile, row := range first {
		now, ok := last[profile]
		switch {
		case !ok:
			t.Errorf("the %s daemon has no active credential after its renewals", profile)
		case now.CredentialID != row.CredentialID:
			t.Errorf("the %s daemon's credential was replaced (%s, then %s), not renewed in place", profile, row.CredentialID, now.CredentialID)
		case !now.ExpiresAt.Time().After(row.ExpiresAt.Time().Add(life / 2)):
			t.Errorf("the %s daemon's credential still expires at %s (first %s): it was not renewed", profile, now.ExpiresAt.Time(), row.ExpiresAt.Time())
		}
	}
}

// daemonRows returns the one active ledger row of each daemon profile, failing on more.
func daemonRows(t *testing.T, m *meshtest.Mesh) map[authority.Profile]authstore.CredentialRow {
	t.Helper()
	rows, err := m.Ledger("").Credentials(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[authority.Profile]authstore.CredentialRow{}
	for _, r := range rows {
		if !r.Profile.Daemon() {
			continue
		}
		if r.State != authstore.CredActive {
			continue
		}
		if have, ok := out[r.Profile]; ok {
			t.Fatalf("two active %s credentials: %s and %s", r.Profile, have.CredentialID, r.CredentialID)
		}
		out[r.Profile] = r
	}
	if len(out) != 4 {
		var have []authority.Profile
		for p := range out {
			have = append(have, p)
		}
		t.Fatalf("active daemon credentials of %q, want one each of delivery, membership-rw, warden and supervisor", have)
	}
	return out
}
