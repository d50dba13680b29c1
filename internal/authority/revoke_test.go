package authority_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// TestRevokedCredentialIsRefusedByTheBroker: revoking a credential closes its open connection and
// refuses its reconnect, while other agents carry on.
func TestRevokedCredentialIsRefusedByTheBroker(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	aliceCred, alice := m.Agent(t, ledger.Request{Name: "alice", AllowPublish: []string{"general"}})
	_, bob := m.Agent(t, ledger.Request{Name: "bob", AllowPublish: []string{"general"}})
	closed := make(chan struct{})
	alice.SetClosedHandler(func(*nats.Conn) { close(closed) })
	alice.SetReconnectHandler(func(*nats.Conn) {})

	rows, err := m.Ledger("").Credentials(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var credID string
	for _, r := range rows {
		if r.UserKey == aliceCred.PublicKey {
			credID = r.CredentialID
		}
	}
	if credID == "" {
		t.Fatalf("alice's credential has no ledger row: %+v", rows)
	}
	row, err := m.Ledger("").Revoke(ctx, aliceCred.LifecycleUID, credID, "revoked by the operator")
	if err != nil {
		t.Fatal(err)
	}
	if row.State != "revoked" {
		t.Errorf("row state %s", row.State)
	}
	// RevokeCredential returned only after CONNZ showed alice gone; her client sees the close.
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		if alice.Status() == nats.CONNECTED {
			t.Fatal("alice is still connected after her revocation")
		}
	}
	if _, err := dial.As(ctx, m.URL(), aliceCred, nats.NoReconnect()); err == nil {
		t.Fatal("a revoked credential reconnected")
	} else if !errors.Is(err, nats.ErrAuthorization) && !errors.Is(err, nats.ErrAuthRevoked) {
		t.Logf("reconnect refused with %v", err)
	}
	subj, _ := m.Space.ChatSubject(mustPrincipal(t, "local.bob"), "general")
	if err := bob.Publish(subj, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if refused, err := bob.Refused("Publish", subj); err != nil || refused || bob.Status() != nats.CONNECTED {
		t.Errorf("bob was disturbed by alice's revocation: refused=%v %v, %s", refused, err, bob.Status())
	}
	// The revocation survives into the account JWT the next up renders.
	sk, err := m.Keyring().Space(m.Space)
	if err != nil {
		t.Fatal(err)
	}
	token, err := m.Keyring().AccountJWT(sk)
	if err != nil {
		t.Fatal(err)
	}
	ac, err := jwt.DecodeAccountClaims(token)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ac.Revocations[aliceCred.PublicKey]; !ok {
		t.Error("the account JWT does not carry the revocation")
	}
}

// TestTakeoverRevokesThePredecessor: issuing a new lifecycle for a name still held retires the
// old one, whose credential the broker then refuses.
func TestTakeoverRevokesThePredecessor(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	old := m.AgentCred(t, ledger.Request{Name: "alice"})
	c := m.Connect(t, old)
	closed := make(chan struct{})
	c.SetClosedHandler(func(*nats.Conn) { close(closed) })
	successor := m.AgentCred(t, ledger.Request{Name: "alice"})
	if successor.LifecycleUID == old.LifecycleUID {
		t.Fatal("the successor reused the lifecycle")
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the predecessor's connection survived the takeover")
	}
	if nc, err := dial.As(ctx, m.URL(), successor); err != nil {
		t.Errorf("the successor cannot connect: %v", err)
	} else {
		nc.Close()
	}
	if _, err := dial.As(ctx, m.URL(), old, nats.NoReconnect()); err == nil {
		t.Error("the predecessor's credential still connects")
	}
}

// TestProcessTakeoverEvicts: the takeover barrier closes the old process's connection and moves
// the lifecycle to its next epoch.
func TestProcessTakeoverEvicts(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	cred, c := m.Agent(t, ledger.Request{Name: "alice"})
	closed := make(chan struct{})
	c.SetClosedHandler(func(*nats.Conn) { close(closed) })
	epoch, err := m.Ledger("").Takeover(ctx, wire.Lifecycle{Principal: cred.Principal, UID: cred.LifecycleUID}, "restart-1")
	if err != nil || epoch != 2 {
		t.Fatalf("TakeoverProcess = %d, %v; want epoch 2", epoch, err)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the old process is still connected after the barrier")
	}
	if _, err := dial.As(ctx, m.URL(), cred, nats.NoReconnect()); err == nil {
		t.Error("the old process's credential still connects")
	}
}

// TestServiceCredentialsHaveRows: a credential of a profile other than agent is issued through
// its principal's standing lifecycle, with a row that revokes it at the broker.
func TestServiceCredentialsHaveRows(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	var creds []*authority.Credential
	for range 2 {
		cred, err := m.Ledger("").Issue(ctx, ledger.Request{Profile: authority.ProfileObserver, Name: "watcher"})
		if err != nil {
			t.Fatal(err)
		}
		creds = append(creds, cred)
	}
	if creds[0].LifecycleUID == "" || creds[0].LifecycleUID != creds[1].LifecycleUID {
		t.Errorf("two credentials of one service principal are under lifecycles %q and %q, want one standing lifecycle", creds[0].LifecycleUID, creds[1].LifecycleUID)
	}
	rows, err := m.Ledger("").Credentials(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	n := 0
	for _, r := range rows {
		if r.Principal == "local.watcher" && r.Profile == authority.ProfileObserver {
			n++
			if r.UserKey == creds[0].PublicKey {
				id = r.CredentialID
			}
		}
	}
	if n != 2 || id == "" {
		t.Fatalf("%d ledger rows for the watcher's 2 credentials", n)
	}
	if _, err := m.Ledger("").Revoke(ctx, creds[0].LifecycleUID, id, "revoked by the operator"); err != nil {
		t.Fatal(err)
	}
	if nc, err := dial.As(ctx, m.URL(), creds[0], nats.NoReconnect()); err == nil {
		nc.Close()
		t.Error("a revoked observer credential connected")
	}
	if nc, err := dial.As(ctx, m.URL(), creds[1]); err != nil {
		t.Errorf("the watcher's other credential was refused too: %v", err)
	} else {
		nc.Close()
	}
}

func mustPrincipal(t *testing.T, s string) wire.Principal {
	t.Helper()
	p, err := wire.ParsePrincipal(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
