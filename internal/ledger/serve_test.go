package ledger_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

var managerCommands = []string{"status", "ps", "spawn", "despawn", "stop"}

// servingRows reads the serving credential rows of a manager instance.
func servingRows(t *testing.T, m *meshtest.Mesh, iid wire.LifecycleUID) map[string]authstore.CredentialRow {
	t.Helper()
	out := map[string]authstore.CredentialRow{}
	err := m.WithStore(t, func(s *authstore.Store, _ *authority.SpaceKeys) error {
		g, err := s.ServeGate(authstore.Endpoint{Name: "manager", InstanceID: iid})
		if err != nil {
			return err
		}
		rows, err := g.Credentials(t.Context())
		for _, r := range rows {
			out[r.CredentialID] = r
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// refusedAtConnect reports whether the broker refuses a connection with cred.
func refusedAtConnect(t *testing.T, m *meshtest.Mesh, cred *authority.Credential) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	nc, err := dial.As(ctx, m.URL(), cred, nats.MaxReconnects(0))
	if err != nil {
		return true
	}
	nc.Close()
	return false
}

// TestServeManagerAdvancesAndFences: the first serve of an instance opens its gate at epoch 0;
// every later one advances the epoch and fences the older incarnation (its row revoked, its
// connection closed, a reconnect refused, a renewal refused); the current one renews at its
// epoch with the same key; a clean stop releases it; and a grant that cannot be minted moves
// nothing.
func TestServeManagerAdvancesAndFences(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	l := m.Ledger(m.Space)
	iid := wire.NewLifecycleUID()

	cred0, e0, err := l.Serve(ctx, wire.ManagerEndpoint, "cotal_manager", iid, managerCommands, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if e0 != 0 || cred0.LifecycleUID != iid || cred0.Profile != authority.ProfileSupervisor || cred0.CredentialID == "" {
		t.Fatalf("the first serve: epoch %d, %s %s %q", e0, cred0.LifecycleUID, cred0.Profile, cred0.CredentialID)
	}
	c0 := m.Connect(t, cred0)

	if _, _, err := l.Serve(ctx, wire.ManagerEndpoint, "cotal_manager", iid, []string{"Not A Command"}, time.Hour); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("serving a malformed command = %v, want ErrInvalid", err)
	}
	if c0.Status() != nats.CONNECTED {
		t.Fatal("a refused serve fenced the running incarnation")
	}

	cred1, e1, err := l.Serve(ctx, wire.ManagerEndpoint, "cotal_manager", iid, managerCommands, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if e1 != 1 {
		t.Errorf("the second serve is at epoch %d, want 1 (a refused serve must not advance it)", e1)
	}
	meshtest.Eventually(t, 10*time.Second, "the fenced connection to close", func() bool { return c0.Status() != nats.CONNECTED })
	if !refusedAtConnect(t, m, cred0) {
		t.Error("the broker let the fenced credential connect")
	}
	if refusedAtConnect(t, m, cred1) {
		t.Fatal("the broker refused the current credential")
	}
	rows := servingRows(t, m, iid)
	if r := rows[cred0.CredentialID]; r.State != authstore.CredRevoked || r.Reason == "" {
		t.Errorf("the fenced row is %s (%q)", r.State, r.Reason)
	}
	if r := rows[cred1.CredentialID]; r.State != authstore.CredActive {
		t.Errorf("the current row is %s", r.State)
	} else if e, ok := r.ServedEpoch(); !ok || e != 1 {
		t.Errorf("the current row serves epoch %d, %v", e, ok)
	}

	if _, err := l.RenewServing(ctx, wire.ManagerEndpoint, cred0, time.Hour); !errors.Is(err, authstore.ErrConflict) {
		t.Errorf("renewing the fenced credential = %v, want ErrConflict", err)
	}
	renewed, err := l.RenewServing(ctx, wire.ManagerEndpoint, cred1, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if renewed.PublicKey != cred1.PublicKey || renewed.CredentialID != cred1.CredentialID || !renewed.Expires.After(cred1.Expires) {
		t.Errorf("the renewal changed the key or kept the expiry: %s %s", renewed.PublicKey, renewed.Expires)
	}

	if err := l.ReleaseServing(ctx, wire.ManagerEndpoint, iid, cred1.CredentialID); err != nil {
		t.Fatal(err)
	}
	if !refusedAtConnect(t, m, cred1) {
		t.Error("the broker let a released credential connect")
	}
	if err := l.ReleaseServing(ctx, wire.ManagerEndpoint, iid, cred1.CredentialID); err != nil {
		t.Errorf("releasing twice: %v", err)
	}
	// The next start of the instance advances again.
	if _, e2, err := l.Serve(ctx, wire.ManagerEndpoint, "cotal_manager", iid, managerCommands, time.Hour); err != nil || e2 != 2 {
		t.Errorf("the third serve = epoch %d, %v; want 2", e2, err)
	}
}

// TestServeManagerRace: of two serves of one instance racing, at least one wins and a loser
// loses with ErrConflict; the winners' epochs are distinct.
func TestServeManagerRace(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	l := m.Ledger(m.Space)
	iid := wire.NewLifecycleUID()
	if _, _, err := l.Serve(ctx, wire.ManagerEndpoint, "cotal_manager", iid, managerCommands, time.Hour); err != nil {
		t.Fatal(err)
	}
	const n = 3
	epochs, errs := make([]int64, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, epochs[i], errs[i] = l.Serve(ctx, wire.ManagerEndpoint, "cotal_manager", iid, managerCommands, time.Hour)
		})
	}
	wg.Wait()
	won := map[int64]bool{}
	for i, err := range errs {
		switch {
		case err == nil:
			if won[epochs[i]] {
				t.Errorf("two serves won epoch %d", epochs[i])
			}
			won[epochs[i]] = true
		case !errors.Is(err, authstore.ErrConflict):
			t.Errorf("a losing serve = %v, want ErrConflict", err)
		}
	}
	if len(won) == 0 {
		t.Fatal("no serve won")
	}
	active := 0
	for _, r := range servingRows(t, m, iid) {
		if r.State == authstore.CredActive {
			active++
		}
	}
	if active != 1 {
		t.Errorf("%d serving credentials are active, want 1", active)
	}
}

// TestHoldManager: a held manager credential connects, serves at its epoch and is released
// (revoked) by Release.
func TestHoldManager(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	l := m.Ledger(m.Space)
	iid := wire.NewLifecycleUID()
	if _, _, err := l.HoldServing(ctx, wire.ManagerEndpoint, "cotal_manager", iid, managerCommands, time.Second, nil); err == nil {
		t.Error("holding a manager credential for a second succeeded")
	}
	h, epoch, err := l.HoldServing(ctx, wire.ManagerEndpoint, "cotal_manager", iid, managerCommands, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	cred := h.Credential()
	if epoch != 0 || !h.IsConnected() {
		t.Fatalf("held at epoch %d, connected %v", epoch, h.IsConnected())
	}
	one, _, _ := meshwire.ServeFilters(m.Space, wire.ManagerEndpoint, iid, "ps", false)
	if _, err := h.QueueSubscribeSync(one, meshwire.QueueGroup(wire.ManagerEndpoint)); err != nil {
		t.Fatal(err)
	}
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if r := servingRows(t, m, iid)[cred.CredentialID]; r.State != authstore.CredRevoked {
		t.Errorf("a released credential's row is %s", r.State)
	}
	if !refusedAtConnect(t, m, cred) {
		t.Error("the broker let a released credential connect")
	}
}
