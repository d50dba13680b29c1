package authstore

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/broker/brokertest"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
)

// ledgerEnv is an open broker with a provisioned space, its auth store and the space's keys.
type ledgerEnv struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	store *Store
	keys  *authority.SpaceKeys
}

func newLedgerEnv(t *testing.T) *ledgerEnv {
	t.Helper()
	js := brokertest.JetStream(t)
	nc := js.Conn()
	if _, err := space.Provision(t.Context(), js, "main", wire.ChannelDefaults{DeliveryClass: wire.ClassDurable}); err != nil {
		t.Fatal(err)
	}
	store, err := Open(t.Context(), nc, "main")
	if err != nil {
		t.Fatal(err)
	}
	return &ledgerEnv{nc: nc, js: js, store: store, keys: testKeys(t)}
}

// testKeys opens a keyring in a temporary directory and returns the keys of the space "main".
func testKeys(t *testing.T) *authority.SpaceKeys {
	t.Helper()
	kr, err := authority.OpenKeyring(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sk, err := kr.Space("main")
	if err != nil {
		t.Fatal(err)
	}
	return sk
}

func (e *ledgerEnv) activate(t *testing.T, actor string) (wire.Lifecycle, authority.MintRequest) {
	t.Helper()
	p, err := wire.NewPrincipal("local", actor)
	if err != nil {
		t.Fatal(err)
	}
	l := wire.Lifecycle{Principal: p, UID: wire.NewLifecycleUID()}
	if _, err := e.store.Activate(t.Context(), l, "op1"); err != nil {
		t.Fatal(err)
	}
	return l, authority.MintRequest{Profile: authority.ProfileAgent, Grant: authority.Grant{Principal: p, LifecycleUID: l.UID}}
}

func TestOpenAuthStoreRefusesDrift(t *testing.T) {
	for name, edit := range map[string]func(c *jetstream.StreamConfig){
		"direct get":  func(c *jetstream.StreamConfig) { c.AllowDirect = true },
		"an age":      func(c *jetstream.StreamConfig) { c.MaxAge = time.Hour },
		"a size":      func(c *jetstream.StreamConfig) { c.MaxBytes = 1 << 20 },
		"a msg limit": func(c *jetstream.StreamConfig) { c.MaxMsgs = 1000 },
	} {
		t.Run(name, func(t *testing.T) {
			e := newLedgerEnv(t)
			cfg := space.AuthStoreConfig("other")
			edit(&cfg)
			if _, err := e.js.CreateStream(t.Context(), cfg); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(t.Context(), e.nc, "other"); !errors.Is(err, ErrStoreShape) {
				t.Errorf("Open of a store with %s = %v, want ErrStoreShape", name, err)
			}
		})
	}
}

// TestIssueRace: of N mints against one observation of a gate, exactly one commits; the others
// lose with ErrConflict and leave no row.
func TestIssueRace(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := t.Context()
	l, req := e.activate(t, "alice")
	og, err := e.store.ObserveGate(ctx, l.UID)
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = e.store.IssueObserved(ctx, e.keys, og, req, fmt.Sprintf("c%d", i))
		})
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, ErrConflict):
			t.Errorf("a losing mint failed with %v, want ErrConflict", err)
		}
	}
	rows, err := e.store.Credentials(ctx, l.UID)
	if err != nil {
		t.Fatal(err)
	}
	if wins != 1 || len(rows) != 1 {
		t.Errorf("%d mints won and %d rows are in the ledger; want exactly one of each", wins, len(rows))
	}
}

// TestIssueCrashPoints: a crash between stage and commit, or between commit and release, then a
// retry, converges to one active credential with identical bytes.
func TestIssueCrashPoints(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := t.Context()
	l, req := e.activate(t, "alice")

	// Crash after staging: the row is there, the gate untouched, nothing released.
	if _, _, _, _, err := e.store.stage(ctx, e.keys, req, "after-stage"); err != nil {
		t.Fatal(err)
	}
	first, err := e.store.Issue(ctx, e.keys, req, "after-stage")
	if err != nil {
		t.Fatal(err)
	}
	// Crash after the commit, before the creds reached anyone: the retry releases them again.
	again, err := e.store.Issue(ctx, e.keys, req, "after-stage")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Creds, again.Creds) {
		t.Error("a retried release returned different creds")
	}
	rows, err := e.store.Credentials(ctx, l.UID)
	if err != nil || len(rows) != 1 || rows[0].State != CredActive {
		t.Errorf("ledger %+v, %v; want one active row", rows, err)
	}
}

// TestSiblingRenewalsCommit: credentials of one lifecycle (a daemon's on every node of a cluster)
// renewing at once all commit, though each renewal's touch of the shared gate races the others';
// a retirement still wins over a renewal.
func TestSiblingRenewalsCommit(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := t.Context()
	l, req := e.activate(t, "cotal_membership")
	const n, rounds = 6, 5
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("node%d", i)
		if _, err := e.store.Issue(ctx, e.keys, req, ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, id := range ids {
		wg.Go(func() {
			for range rounds {
				if _, err := e.store.Renew(ctx, e.keys, l.UID, id, time.Minute); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("sibling renewals failed one another: %v", err)
	}
	// A barrier that moves the gate between a renewal's observation and its confirmation wins;
	// sibling renewals, which leave it as it was, do not.
	og, err := e.store.ObserveGate(ctx, l.UID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Renew(ctx, e.keys, l.UID, ids[1], time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := e.store.confirmGate(ctx, keyGate+string(l.UID), og.raw); err != nil {
		t.Errorf("the gate after a sibling's renewal: %v, want it unchanged", err)
	}
	if _, err := e.store.Retire(ctx, l, "op2"); err != nil {
		t.Fatal(err)
	}
	if err := e.store.confirmGate(ctx, keyGate+string(l.UID), og.raw); !errors.Is(err, ErrConflict) {
		t.Errorf("confirming a renewal over a gate retired since it was observed = %v, want ErrConflict", err)
	}
	if _, err := e.store.Renew(ctx, e.keys, l.UID, ids[0], time.Minute); !errors.Is(err, ErrConflict) {
		t.Errorf("a renewal after the retirement = %v, want ErrConflict", err)
	}
}

func TestRetireClosesTheGate(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := t.Context()
	l, req := e.activate(t, "alice")
	cred, err := e.store.Issue(ctx, e.keys, req, "c1")
	if err != nil {
		t.Fatal(err)
	}
	revoked, err := e.store.Retire(ctx, l, "op2")
	if err != nil || len(revoked) != 1 || revoked[0] != cred.PublicKey {
		t.Fatalf("Retire = %v, %v", revoked, err)
	}
	if _, err := e.store.Issue(ctx, e.keys, req, "c2"); !errors.Is(err, ErrConflict) {
		t.Errorf("a mint on a retired gate = %v, want ErrConflict", err)
	}
	h, _, err := e.store.Head(ctx, l.Principal)
	if err != nil || h.State != HeadRetired {
		t.Errorf("head %+v, %v", h, err)
	}
	if _, err := e.store.CurrentEpoch(ctx, l); !errors.Is(err, ErrConflict) {
		t.Errorf("a retired holder's epoch = %v, want ErrConflict", err)
	}
	// A new lifecycle of the alias takes the next epoch.
	next := wire.Lifecycle{Principal: l.Principal, UID: wire.NewLifecycleUID()}
	if _, err := e.store.Activate(ctx, next, "op3"); err != nil {
		t.Fatal(err)
	}
	if epoch, err := e.store.CurrentEpoch(ctx, next); err != nil || epoch != 2 {
		t.Errorf("the successor's epoch = %d, %v; want 2", epoch, err)
	}
	// The alias is now held: activating another lifecycle of it conflicts.
	if _, err := e.store.Activate(ctx, wire.Lifecycle{Principal: l.Principal, UID: wire.NewLifecycleUID()}, "op4"); !errors.Is(err, ErrConflict) {
		t.Errorf("activating a held alias = %v, want ErrConflict", err)
	}
}

func TestCorruptRowsAreReported(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := t.Context()
	l, req := e.activate(t, "alice")
	if _, err := e.store.Issue(ctx, e.keys, req, "good"); err != nil {
		t.Fatal(err)
	}
	auth := meshwire.AuthBucket(wire.Space("main"))
	for key, value := range map[string]string{
		"cred." + string(l.UID) + ".garbage": "{not json",
		"cred." + string(l.UID) + ".extra":   `{"v":1,"credentialId":"extra","surprise":true}`,
	} {
		if _, err := e.js.Publish(ctx, auth.Subject(key), []byte(value)); err != nil {
			t.Fatal(err)
		}
	}
	check, err := e.store.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(check.Problems) != 2 || check.Rows < 5 {
		t.Errorf("Check found %d problems in %d rows, want the 2 corrupt rows among the rest: %v", len(check.Problems), check.Rows, check.Problems)
	}
	rows, err := e.store.Credentials(ctx, l.UID)
	if len(rows) != 1 || rows[0].CredentialID != "good" {
		t.Errorf("the good row was hidden by the bad ones: %+v", rows)
	}
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "garbage") || !strings.Contains(err.Error(), "extra") {
		t.Errorf("Credentials error = %v, want both corrupt rows named", err)
	}
	// A delete marker on a gate, which is never deleted, is corruption, not absence.
	kv, err := e.js.KeyValue(ctx, string(auth))
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "gate."+string(l.UID)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.ObserveGate(ctx, l.UID); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a deleted gate = %v, want ErrCorrupt", err)
	}
}

func TestGateTransitions(t *testing.T) {
	tests := []struct {
		kind     OpKind
		from, to GateState
		ok       bool
	}{
		{OpActivation, "", GateOpen, true},
		{OpActivation, GateOpen, GateOpen, false},
		{OpTakeover, GateOpen, GateFrozen, true},
		{OpTakeover, GateFrozen, GateOpen, true},
		{OpTakeover, GateRetired, GateOpen, false},
		{OpRegistration, GateOpen, GateOpen, true},
		{OpRegistration, GateFrozen, GateOpen, false},
		{OpRetirement, GateOpen, GateRetired, true},
		{OpRetirement, GateFrozen, GateRetired, true},
		{OpRetirement, GateRetired, GateOpen, false},
		{"bogus", GateOpen, GateOpen, false},
	}
	for _, tt := range tests {
		if err := CheckGateTransition(tt.kind, tt.from, tt.to); (err == nil) != tt.ok {
			t.Errorf("%s %q→%q = %v, want ok=%v", tt.kind, tt.from, tt.to, err, tt.ok)
		}
	}
}

// TestAWriteSentAgainIsNotItsOwnConflict sends one write twice, as publish does when the first
// answer did not come: the repeat is answered with the first one's sequence, where a second
// write at the same expected revision is refused.
func TestAWriteSentAgainIsNotItsOwnConflict(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := t.Context()
	msg := nats.NewMsg(e.store.bucket.Subject("probe.once"))
	msg.Data = []byte(`{}`)
	first, err := e.store.publish(ctx, msg, 0)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.store.publish(ctx, msg, 0)
	if err != nil {
		t.Fatalf("the repeat of a landed write: %v", err)
	}
	if again.Sequence != first.Sequence || !again.Duplicate {
		t.Fatalf("the repeat landed at %d (duplicate %v), want the first's %d", again.Sequence, again.Duplicate, first.Sequence)
	}
	other := nats.NewMsg(msg.Subject)
	other.Data = msg.Data
	if _, err := e.store.publish(ctx, other, 0); !jsapi.Conflict(err) {
		t.Fatalf("a second write at revision 0: %v, want a conflict", err)
	}
}
