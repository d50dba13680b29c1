package authstore

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestTakeoverBarrier: the barrier freezes the gate before it revokes (so no mint slips in while
// it evicts), stops with the gate frozen when eviction fails, resumes under its own operation
// only, and reopens the gate at the next process epoch.
func TestTakeoverBarrier(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := t.Context()
	l, req := e.activate(t, "alice")
	cred, err := e.store.Issue(ctx, e.keys, req, "c1")
	if err != nil {
		t.Fatal(err)
	}
	unreachable := errors.New("broker unreachable")
	_, err = e.store.Takeover(ctx, l, "op-t", func(ctx context.Context, keys []string) error {
		if !slices.Equal(keys, []string{cred.PublicKey}) {
			t.Errorf("the barrier evicts %v, want alice's credential", keys)
		}
		if _, err := e.store.Issue(ctx, e.keys, req, "during"); !errors.Is(err, ErrConflict) {
			t.Errorf("a mint during the barrier = %v, want ErrConflict", err)
		}
		return unreachable
	})
	if !errors.Is(err, unreachable) {
		t.Fatalf("a barrier whose eviction failed = %v", err)
	}
	if og, _ := e.store.ObserveGate(ctx, l.UID); og.Row.State != GateFrozen {
		t.Errorf("the gate is %s after a failed eviction, want frozen", og.Row.State)
	}
	noop := func(context.Context, []string) error { return nil }
	if _, err := e.store.Takeover(ctx, l, "op-other", noop); !errors.Is(err, ErrConflict) {
		t.Errorf("a second barrier on a frozen gate = %v, want ErrConflict", err)
	}
	var evictedAgain []string
	epoch, err := e.store.Takeover(ctx, l, "op-t", func(_ context.Context, keys []string) error {
		evictedAgain = keys
		return nil
	})
	if err != nil || epoch != 2 {
		t.Fatalf("the resumed barrier = %d, %v; want epoch 2", epoch, err)
	}
	// What the failed run revoked is evicted again: its eviction was never confirmed.
	if !slices.Contains(evictedAgain, cred.PublicKey) {
		t.Errorf("the resumed barrier evicted %v, not the credential the failed run revoked", evictedAgain)
	}
	// Running the completed barrier again is a no-op, not a second takeover.
	if again, err := e.store.Takeover(ctx, l, "op-t", noop); err != nil || again != 2 {
		t.Errorf("a repeated barrier = %d, %v; want epoch 2 unchanged", again, err)
	}
	og, err := e.store.ObserveGate(ctx, l.UID)
	if err != nil || og.Row.State != GateOpen || og.Row.ProcessEpoch != 2 {
		t.Errorf("the gate after the barrier = %+v, %v", og, err)
	}
	if got, err := e.store.CurrentEpoch(ctx, l); err != nil || got != 2 {
		t.Errorf("the current epoch = %d, %v", got, err)
	}
	if _, err := e.store.Issue(ctx, e.keys, req, "c2"); err != nil {
		t.Fatalf("a mint after the barrier: %v", err)
	}
	rows, err := e.store.Credentials(ctx, l.UID)
	if err != nil || len(rows) != 2 || rows[0].State != CredRevoked || rows[1].State != CredActive {
		t.Errorf("the ledger after the barrier = %+v, %v; want c1 revoked and c2 active", rows, err)
	}
}
