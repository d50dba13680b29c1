package ledger_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// TestLedgerHoldsItsConnection shows that a held ledger does its operations on one connection:
// issues, a sweep, a listing and a retirement dial nothing new for the auth store.
func TestLedgerHoldsItsConnection(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	l, err := ledger.Open(ctx, m.URL(), m.Keyring(), m.Space)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	first := l.StoreConn()
	for i := range 5 {
		if _, err := l.Issue(ctx, ledger.Request{Name: "held_" + string(rune('a'+i))}); err != nil {
			t.Fatal(err)
		}
	}
	cred, retire, err := l.StartAgent(ctx, ledger.Request{Name: "worker", Subscribe: []string{"general"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Sweep(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Credentials(ctx); err != nil {
		t.Fatal(err)
	}
	if err := retire(ctx); err != nil {
		t.Fatal(err)
	}
	if got := l.StoreConn(); got != first || got.IsClosed() {
		t.Errorf("the ledger dialled its store again (same connection: %v, closed: %v)", got == first, got.IsClosed())
	}
	if _, err := dial.As(ctx, m.URL(), cred, nats.NoReconnect()); err == nil {
		t.Error("a retired agent's credential still connects")
	}
}

// TestLedgerRenewsItsConnection shows the held connection replaced before its credential
// expires, and after it closed, with the ledger working throughout; the replaced connection
// stays open for operations still running on it.
func TestLedgerRenewsItsConnection(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	l, err := ledger.Open(ctx, m.URL(), m.Keyring(), m.Space)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	first := l.StoreConn()
	l.AgeStoreCredential(time.Now().Add(time.Minute)) // inside the renewal window
	if _, err := l.Issue(ctx, ledger.Request{Name: "after_renewal"}); err != nil {
		t.Fatal(err)
	}
	second := l.StoreConn()
	if second == first {
		t.Fatal("a credential about to expire was not renewed")
	}
	if first.IsClosed() {
		t.Error("the replaced connection was closed at once, under operations still running on it")
	}
	second.Close()
	if _, err := l.Issue(ctx, ledger.Request{Name: "after_close"}); err != nil {
		t.Fatalf("issue after the held connection closed: %v", err)
	}
	if third := l.StoreConn(); third == second || third.IsClosed() {
		t.Error("a closed connection was not dialled again")
	}
	if !first.IsClosed() {
		t.Error("the connection two renewals back is still open")
	}
	l.Close()
	if _, err := l.Issue(ctx, ledger.Request{Name: "after_close"}); !errors.Is(err, ledger.ErrClosed) {
		t.Errorf("issue on a closed ledger = %v, want ErrClosed", err)
	}
}

// TestUserAuthStoreOutlivesItsConnection shows the user-auth store a holder keeps working across
// its connection's renewal and loss, and failing once the ledger is closed.
func TestUserAuthStoreOutlivesItsConnection(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	l, err := ledger.Open(ctx, m.URL(), m.Keyring(), m.Space)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.UserAuthConn() != nil {
		t.Fatal("the user-auth store was dialled before its first use")
	}
	kv, err := l.UserAuthStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if kv.Bucket() != "cotal_userauth_main" {
		t.Fatalf("bucket %q", kv.Bucket())
	}
	if _, err := kv.Put(ctx, "k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	first := l.UserAuthConn()
	l.AgeUserAuthCredential(time.Now().Add(time.Minute)) // inside the renewal window
	if e, err := kv.Get(ctx, "k"); err != nil || string(e.Value()) != "v1" {
		t.Fatalf("get after the renewal: %v", err)
	}
	second := l.UserAuthConn()
	if second == first {
		t.Fatal("a credential about to expire was not renewed")
	}
	second.Close()
	if _, err := kv.Put(ctx, "k", []byte("v2")); err != nil {
		t.Fatalf("put after the held connection closed: %v", err)
	}
	l.Close()
	if _, err := kv.Get(ctx, "k"); !errors.Is(err, ledger.ErrClosed) {
		t.Errorf("get on a closed ledger = %v, want ErrClosed", err)
	}
}

// TestLedgerEvictsThroughItsEvictor shows a retirement and a takeover handing the revoked keys
// to the injected evictor, which the broker then enforces: the credentials no longer connect.
func TestLedgerEvictsThroughItsEvictor(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	var mu sync.Mutex
	var evicted []string
	broker := ledger.BrokerEvictor(m.Keyring(), m.URL())
	l, err := ledger.Open(ctx, m.URL(), m.Keyring(), m.Space, ledger.WithEvictor(ledger.EvictFunc(func(ctx context.Context, sp wire.Space, keys ...string) error {
		mu.Lock()
		evicted = append(evicted, keys...)
		mu.Unlock()
		return broker.Evict(ctx, sp, keys...)
	})))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	old, err := l.Issue(ctx, ledger.Request{Name: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	// A second lifecycle of the same name takes the alias over: the first is retired.
	next, err := l.Issue(ctx, ledger.Request{Name: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Retire(ctx, wire.Lifecycle{Principal: next.Principal, UID: next.LifecycleUID}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := slices.Clone(evicted)
	mu.Unlock()
	for _, c := range []*authority.Credential{old, next} {
		if !slices.Contains(got, c.PublicKey) {
			t.Errorf("the evictor was not given %s's key of lifecycle %s", c.Principal, c.LifecycleUID)
		}
		if nc, err := dial.As(ctx, m.URL(), c, nats.NoReconnect()); err == nil {
			nc.Close()
			t.Errorf("the broker still accepts the retired credential of lifecycle %s", c.LifecycleUID)
		}
	}
}

// TestLedgerRefusesAnotherSpace shows a request for a space the ledger does not serve refused
// before anything is written.
func TestLedgerRefusesAnotherSpace(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t, meshtest.WithSpaces("main", "other"))
	l := m.Ledger("main")
	if _, err := l.Issue(t.Context(), ledger.Request{Space: "other", Name: "alice"}); err == nil {
		t.Fatal("a ledger of main issued a credential in other")
	}
	rows, err := m.Ledger("other").Credentials(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Principal == "local.alice" {
			t.Errorf("other's ledger holds a row for alice: %+v", r)
		}
	}
}

// TestRenewKeepsTheKeyAndStopsAtRevocation shows a renewal in place: the same key and row, a
// later expiry, a JWT the broker accepts; and no renewal once the credential is revoked.
func TestRenewKeepsTheKeyAndStopsAtRevocation(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	l := m.Ledger("")
	cred, err := l.Issue(ctx, ledger.Request{Profile: authority.ProfileObserver, Name: "watcher", Expires: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // JWT times are whole seconds
	next, err := l.Renew(ctx, cred, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if next.PublicKey != cred.PublicKey || next.CredentialID != cred.CredentialID || next.JWT == cred.JWT {
		t.Fatalf("renewal changed the key (%v) or the row (%v), or kept the JWT (%v)", next.PublicKey != cred.PublicKey, next.CredentialID != cred.CredentialID, next.JWT == cred.JWT)
	}
	if !next.Expires.After(cred.Expires.Add(30 * time.Minute)) {
		t.Errorf("renewed expiry %s, first %s: not moved by the renewal", next.Expires, cred.Expires)
	}
	nc, err := dial.As(ctx, m.URL(), next, nats.NoReconnect())
	if err != nil {
		t.Fatalf("the broker refuses the renewed JWT: %v", err)
	}
	nc.Close()
	if _, err := l.Revoke(ctx, cred.LifecycleUID, cred.CredentialID, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Renew(ctx, next, time.Hour); !errors.Is(err, authstore.ErrConflict) {
		t.Errorf("renew a revoked credential = %v, want ErrConflict", err)
	}
	if nc, err := dial.As(ctx, m.URL(), next, nats.NoReconnect()); err == nil {
		nc.Close()
		t.Error("the broker accepts a renewed JWT of a revoked credential")
	}
}

// TestHoldRefusesAShortLifetime shows Hold refusing a lifetime under MinHeldLifetime before
// anything is issued.
func TestHoldRefusesAShortLifetime(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	if _, err := m.Ledger("").Hold(t.Context(), ledger.Request{Profile: authority.ProfileDelivery, Name: "d", Expires: time.Second}, nil); err == nil {
		t.Fatal("Hold took a one-second lifetime")
	}
}

// TestRenewalOverdue: a held credential is overdue once two thirds of its lifetime and a retry's
// wait have passed without a renewal; revoked and never-expiring ones never are.
func TestRenewalOverdue(t *testing.T) {
	t.Parallel()
	issued := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	row := authstore.CredentialRow{State: authstore.CredActive, IssuedAt: wire.MillisOf(issued), ExpiresAt: wire.MillisOf(issued.Add(30 * time.Minute))}
	for _, tc := range []struct {
		name string
		row  authstore.CredentialRow
		at   time.Duration
		want bool
	}{
		{"fresh", row, time.Minute, false},
		{"at its renewal", row, 20 * time.Minute, false},
		{"a retry late", row, 20*time.Minute + 5*time.Second, false},
		{"missed", row, 21 * time.Minute, true},
		{"revoked", func() authstore.CredentialRow { r := row; r.State = authstore.CredRevoked; return r }(), 29 * time.Minute, false},
		{"never expires", func() authstore.CredentialRow { r := row; r.ExpiresAt = 0; return r }(), 29 * time.Minute, false},
	} {
		if got := ledger.RenewalOverdue(tc.row, issued.Add(tc.at)); got != tc.want {
			t.Errorf("%s: RenewalOverdue = %v, want %v", tc.name, got, tc.want)
		}
	}
}
