package authstore

import (
	"errors"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// TestServeGate walks one endpoint instance's gate: activation opens it, a serving credential
// stages and commits, a takeover freeze makes a commit at the old observation lose, and a
// revocation is idempotent.
func TestServeGate(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := t.Context()
	ep := Endpoint{Name: "search", InstanceID: wire.NewLifecycleUID()}
	g, err := e.store.ServeGate(ep)
	if err != nil {
		t.Fatal(err)
	}
	if og, err := g.Observe(ctx); err != nil || og != nil {
		t.Fatalf("a fresh instance's gate = %+v, %v; want none", og, err)
	}
	open := EndpointGateRow{
		State: GateOpen, Generation: 1, ProcessEpoch: 1,
		Principal: "local.search1",
		Op:        &EndpointGateOp{OpID: "op1", Kind: OpActivation},
	}
	og, err := g.Move(ctx, nil, open)
	if err != nil {
		t.Fatal(err)
	}
	// The move is along the kind's transitions only: a second activation is refused.
	if _, err := g.Move(ctx, og, open); !errors.Is(err, ErrTransition) {
		t.Errorf("activating an open gate = %v, want ErrTransition", err)
	}

	row := &CredentialRow{
		CredentialID: "s1", Principal: "local.search1", Profile: authority.ProfileAgent,
		UserKey: "UKEY", State: CredActive, IssuedAt: wire.MillisOf(time.Now()),
		ExpiresAt:   wire.MillisOf(time.Now().Add(time.Hour)),
		SourceChain: []string{"epgate.search." + string(ep.InstanceID)},
	}
	if _, err := g.Stage(ctx, row); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Stage(ctx, row); !errors.Is(err, ErrConflict) {
		t.Errorf("staging a row twice = %v, want ErrConflict (rows are create-only)", err)
	}
	if err := g.Commit(ctx, og); err != nil {
		t.Fatalf("commit at the current observation: %v", err)
	}
	// The commit rewrote the gate, so the observation it used is stale now.
	if err := g.Commit(ctx, og); !errors.Is(err, ErrConflict) {
		t.Errorf("a commit at a stale observation = %v, want ErrConflict", err)
	}

	// A takeover freezes the gate: nothing commits against a frozen gate.
	cur, err := g.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	frozen := cur.Row
	frozen.State, frozen.Op = GateFrozen, &EndpointGateOp{OpID: "op2", Kind: OpTakeover, Successor: "local.search2"}
	fg, err := g.Move(ctx, cur, frozen)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Commit(ctx, cur); !errors.Is(err, ErrConflict) {
		t.Errorf("a commit observed before the freeze = %v, want ErrConflict", err)
	}
	if err := g.Commit(ctx, fg); !errors.Is(err, ErrConflict) {
		t.Errorf("a commit on a frozen gate = %v, want ErrConflict", err)
	}

	revoked, err := g.Revoke(ctx, "s1", "takeover")
	if err != nil || revoked.State != CredRevoked || revoked.Reason != "takeover" {
		t.Fatalf("Revoke = %+v, %v", revoked, err)
	}
	again, err := g.Revoke(ctx, "s1", "later")
	if err != nil || again.Reason != "takeover" {
		t.Errorf("a second revocation = %+v, %v; want the first one kept", again, err)
	}
	stored, _, err := g.Credential(ctx, "s1")
	if err != nil || stored.State != CredRevoked || stored.LifecycleUID != ep.InstanceID || len(stored.SourceChain) != 1 {
		t.Errorf("the stored row = %+v, %v", stored, err)
	}
	if _, err := g.Revoke(ctx, "missing", "x"); err == nil {
		t.Error("revoking an unknown serving credential succeeded")
	}

	check, err := e.store.Check(ctx)
	if err != nil || len(check.Problems) != 0 {
		t.Errorf("Check of a healthy endpoint = %+v, %v", check, err)
	}
}

func TestServeGateRefusesBadInput(t *testing.T) {
	e := newLedgerEnv(t)
	for name, ep := range map[string]Endpoint{
		"a dotted endpoint": {Name: "a.b", InstanceID: wire.NewLifecycleUID()},
		"an empty endpoint": {Name: "", InstanceID: wire.NewLifecycleUID()},
		"a bad instance id": {Name: "search", InstanceID: "not-a-uid"},
	} {
		if _, err := e.store.ServeGate(ep); err == nil {
			t.Errorf("ServeGate accepted %s", name)
		}
	}
	g, err := e.store.ServeGate(Endpoint{Name: "search", InstanceID: wire.NewLifecycleUID()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Move(t.Context(), nil, EndpointGateRow{State: GateOpen, Principal: "local.s"}); err == nil {
		t.Error("a move without an operation succeeded")
	}
	bad := EndpointGateRow{State: GateOpen, Principal: "no-dot", Op: &EndpointGateOp{OpID: "o", Kind: OpActivation}}
	if _, err := g.Move(t.Context(), nil, bad); err == nil {
		t.Error("a gate with a malformed principal was written")
	}
	for name, row := range map[string]*CredentialRow{
		"a dotted credential id": {CredentialID: "a.b", Principal: "local.s"},
		"a malformed principal":  {CredentialID: "s1", Principal: "nodot"},
	} {
		if _, err := g.Stage(t.Context(), row); err == nil {
			t.Errorf("Stage accepted %s", name)
		}
	}
	// A corrupt endpoint row is reported by Check, by name.
	auth := meshwire.AuthBucket(wire.Space("main"))
	if _, err := e.js.Publish(t.Context(), auth.Subject("epgate.search."+string(g.endpoint.InstanceID)), []byte(`{"state":"open","bogus":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.Publish(t.Context(), auth.Subject("epcred.search"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	check, err := e.store.Check(t.Context())
	if err != nil || len(check.Problems) != 2 {
		t.Errorf("Check = %+v, %v; want the 2 corrupt endpoint rows", check, err)
	}
}
