package authstore

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/wire"
)

// TestServeGateIssue walks serve issuance on the auth store: an issue at the gate's epoch
// releases creds whose row records the epoch; of several issues against one observation exactly
// one commits and the losers' rows are revoked; a renewal keeps the key at the same epoch, and
// is refused once the gate has moved on.
func TestServeGateIssue(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := t.Context()
	iid := wire.NewLifecycleUID()
	g, err := e.store.ServeGate(Endpoint{Name: "manager", InstanceID: iid})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := wire.NewPrincipal("local", "cotal_manager")
	og, err := g.Move(ctx, nil, EndpointGateRow{State: GateOpen, Generation: 1, Principal: p.String(), Op: &EndpointGateOp{OpID: "a", Kind: OpActivation}})
	if err != nil {
		t.Fatal(err)
	}
	req := func(epoch int64) authority.MintRequest {
		return authority.MintRequest{Profile: authority.ProfileSupervisor, Grant: authority.Grant{Principal: p, Serve: &authority.ServeRows{
			Endpoint: wire.ManagerEndpoint, Instance: iid, Epoch: epoch, Commands: []string{"ps"}}}, Expires: time.Hour}
	}
	if _, err := g.Issue(ctx, e.keys, og, req(1), "wrong-epoch"); err == nil {
		t.Error("an issue at another epoch than the gate's succeeded")
	}
	const n = 6
	creds, errs := make([]*authority.Credential, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { creds[i], errs[i] = g.Issue(ctx, e.keys, og, req(0), "c"+string(rune('0'+i))) })
	}
	wg.Wait()
	var won *authority.Credential
	for i, err := range errs {
		switch {
		case err == nil:
			if won != nil {
				t.Fatal("two issues committed against one observation")
			}
			won = creds[i]
		case !errors.Is(err, ErrConflict):
			t.Errorf("a losing issue = %v, want ErrConflict", err)
		}
	}
	if won == nil {
		t.Fatal("no issue committed")
	}
	if won.LifecycleUID != iid || won.Profile != authority.ProfileSupervisor {
		t.Errorf("the credential names %s %s", won.LifecycleUID, won.Profile)
	}
	rows, err := g.Credentials(ctx)
	if err != nil || len(rows) != n {
		t.Fatalf("Credentials = %d rows, %v; want %d", len(rows), err, n)
	}
	for _, r := range rows {
		if e, ok := r.ServedEpoch(); !ok || e != 0 {
			t.Errorf("row %s serves epoch %d, %v", r.CredentialID, e, ok)
		}
		if (r.State == CredActive) != (r.CredentialID == won.CredentialID) {
			t.Errorf("row %s is %s", r.CredentialID, r.State)
		}
	}
	all, err := e.store.ServingCredentials(ctx)
	if err != nil || len(all) != n {
		t.Errorf("ServingCredentials = %d, %v", len(all), err)
	}

	renewed, err := g.Renew(ctx, e.keys, won.CredentialID, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if renewed.PublicKey != won.PublicKey || !renewed.Expires.After(won.Expires) {
		t.Errorf("renewal changed the key or kept the expiry: %s %s", renewed.PublicKey, renewed.Expires)
	}
	// The gate moves on to epoch 1: the epoch-0 credential renews no more.
	cur, err := g.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	frozen := cur.Row
	frozen.State, frozen.Op = GateFrozen, &EndpointGateOp{OpID: "b", Kind: OpTakeover}
	if cur, err = g.Move(ctx, cur, frozen); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Renew(ctx, e.keys, won.CredentialID, time.Hour); !errors.Is(err, ErrConflict) {
		t.Errorf("a renewal at a frozen gate = %v, want ErrConflict", err)
	}
	open := cur.Row
	open.State, open.ProcessEpoch = GateOpen, 1
	if _, err = g.Move(ctx, cur, open); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Renew(ctx, e.keys, won.CredentialID, time.Hour); !errors.Is(err, ErrConflict) {
		t.Errorf("a renewal of an older epoch = %v, want ErrConflict", err)
	}
	check, err := e.store.Check(ctx)
	if err != nil || len(check.Problems) != 0 {
		t.Errorf("Check = %+v, %v", check, err)
	}
}
