package authstore

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// sessionEnv is a ledger with one active holder lifecycle and one open serving instance.
type sessionEnv struct {
	*ledgerEnv
	holder  wire.Lifecycle
	serving Endpoint
}

func newSessionEnv(t *testing.T) *sessionEnv {
	t.Helper()
	e := newLedgerEnv(t)
	holder, _ := e.activate(t, "alice")
	serving := Endpoint{Name: "search", InstanceID: wire.NewLifecycleUID()}
	g, err := e.store.ServeGate(serving)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Move(t.Context(), nil, EndpointGateRow{
		State: GateOpen, Generation: 1, ProcessEpoch: 1, Principal: "local.search1",
		Op: &EndpointGateOp{OpID: "op-ep", Kind: OpActivation},
	}); err != nil {
		t.Fatal(err)
	}
	return &sessionEnv{ledgerEnv: e, holder: holder, serving: serving}
}

func (e *sessionEnv) request(id string, life time.Duration) SessionRequest {
	return SessionRequest{
		SessionID: id, Holder: e.holder, HolderEpoch: 1,
		Serving: e.serving, ServingEpoch: 1, Expires: time.Now().Add(life),
	}
}

const sid = "sess_0123456789abcdefghij"

func TestRedeemSession(t *testing.T) {
	e := newSessionEnv(t)
	ctx := t.Context()
	caller, err := e.store.RedeemSession(ctx, e.keys, e.request(sid, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if caller.Profile != authority.ProfileSessionCaller || caller.Principal != e.holder.Principal {
		t.Errorf("the caller half is %s for %s", caller.Profile, caller.Principal)
	}
	// The holder's lost-response retry gets the same bytes; nothing new is minted.
	again, err := e.store.RedeemSession(ctx, e.keys, e.request(sid, time.Hour))
	if err != nil || !bytes.Equal(again.Creds, caller.Creds) {
		t.Fatalf("the holder's retry = %v; want the same creds", err)
	}
	// Anyone else presenting the grant finds the one use spent.
	other := e.request(sid, time.Hour)
	other.Holder.UID = wire.NewLifecycleUID()
	if _, err := e.store.RedeemSession(ctx, e.keys, other); !errors.Is(err, ErrConflict) {
		t.Errorf("a second redemption by another lifecycle = %v, want ErrConflict", err)
	}
	// The same holder naming another serving side is not a retry of this grant.
	for _, vary := range []func(*SessionRequest){
		func(r *SessionRequest) { r.ServingEpoch = 2 },
		func(r *SessionRequest) { r.Serving.InstanceID = wire.NewLifecycleUID() },
		func(r *SessionRequest) { r.Serving.Name = "other" },
	} {
		req := e.request(sid, time.Hour)
		vary(&req)
		if _, err := e.store.RedeemSession(ctx, e.keys, req); !errors.Is(err, ErrConflict) {
			t.Errorf("the holder's redemption for another serving side %+v, epoch %d = %v, want ErrConflict", req.Serving, req.ServingEpoch, err)
		}
	}

	serving, err := e.store.ServingCredential(ctx, e.keys, sid, e.serving, 1)
	if err != nil {
		t.Fatal(err)
	}
	if serving.Profile != authority.ProfileSessionServing || serving.Principal.String() != "local.search1" {
		t.Errorf("the serving half is %s for %s", serving.Profile, serving.Principal)
	}
	if _, err := e.store.ServingCredential(ctx, e.keys, sid, e.serving, 2); err == nil {
		t.Error("a serving instance at another epoch got the serving half")
	}
	// A keyring that no longer signs with the pinned key cannot release the session.
	otherKeys := testKeys(t)
	if _, err := e.store.ServingCredential(ctx, otherKeys, sid, e.serving, 1); err == nil || !strings.Contains(err.Error(), "no longer signs") {
		t.Errorf("a release under another signing key = %v", err)
	}

	rows, err := e.store.Credentials(ctx, e.holder.UID)
	if err != nil || len(rows) != 1 || rows[0].CredentialID != sid+".c" || !slices.Equal(rows[0].SourceChain, []string{"session." + sid}) {
		t.Errorf("the holder's ledger = %+v, %v; want the caller half, sourced from the session", rows, err)
	}
	os, err := e.store.Session(ctx, sid)
	if err != nil || os.Row.State != SessionActive {
		t.Errorf("the session row = %+v, %v", os, err)
	}
	if check, err := e.store.Check(ctx); err != nil || len(check.Problems) != 0 {
		t.Errorf("Check of a healthy session = %+v, %v", check, err)
	}
}

// TestRedeemSessionRace: of N concurrent redemptions of one grant, one creates the session; the
// rest lose with ErrConflict or, once it is active, get that same credential back. One caller
// credential exists.
func TestRedeemSessionRace(t *testing.T) {
	e := newSessionEnv(t)
	const n = 8
	var wg sync.WaitGroup
	creds := make([]*authority.Credential, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { creds[i], errs[i] = e.store.RedeemSession(t.Context(), e.keys, e.request(sid, time.Hour)) })
	}
	wg.Wait()
	var first []byte
	for i, err := range errs {
		switch {
		case err == nil && first == nil:
			first = creds[i].Creds
		case err == nil && !bytes.Equal(first, creds[i].Creds):
			t.Error("two redemptions of one grant released different credentials")
		case err != nil && !errors.Is(err, ErrConflict):
			t.Errorf("a losing redemption failed with %v, want ErrConflict", err)
		}
	}
	rows, err := e.store.Credentials(t.Context(), e.holder.UID)
	if first == nil || err != nil || len(rows) != 1 {
		t.Errorf("%d caller rows (%v) and a winner: %v; want exactly one", len(rows), err, first != nil)
	}
}

func TestRedeemSessionRefusals(t *testing.T) {
	e := newSessionEnv(t)
	ctx := t.Context()
	// A holder that restarted since the grant was made: the session is refused and torn down.
	stale := e.request(sid, time.Hour)
	stale.HolderEpoch = 7
	if _, err := e.store.RedeemSession(ctx, e.keys, stale); !errors.Is(err, ErrConflict) {
		t.Fatalf("a stale holder epoch = %v, want ErrConflict", err)
	}
	os, err := e.store.Session(ctx, sid)
	if err != nil || os.Row.State != SessionSuperseded || !os.Row.Revoked.Caller || !os.Row.Revoked.Serving {
		t.Errorf("the refused session = %+v, %v; want superseded with both halves revoked", os, err)
	}
	rows, _ := e.store.Credentials(ctx, e.holder.UID)
	for _, r := range rows {
		if r.State != CredRevoked {
			t.Errorf("a refused redemption left %s %s", r.CredentialID, r.State)
		}
	}
	// A retired holder has no open gate: nothing is staged at all.
	if _, err := e.store.Retire(ctx, e.holder, "op-retire"); err != nil {
		t.Fatal(err)
	}
	const sid2 = "sess_zyxwvutsrqponmlkjihgf"
	if _, err := e.store.RedeemSession(ctx, e.keys, e.request(sid2, time.Hour)); !errors.Is(err, ErrConflict) {
		t.Errorf("redeeming for a retired holder = %v, want ErrConflict", err)
	}
	for name, req := range map[string]SessionRequest{
		"a short session id":   e.request("short", time.Hour),
		"a past expiry":        e.request(sid2, -time.Second),
		"a week-long session":  e.request(sid2, 7*24*time.Hour),
		"a dotted endpoint":    func() SessionRequest { r := e.request(sid2, time.Hour); r.Serving.Name = "a.b"; return r }(),
		"no holder at all":     func() SessionRequest { r := e.request(sid2, time.Hour); r.Holder = wire.Lifecycle{}; return r }(),
		"a bad session id tok": e.request("sess.0123456789abcdefghij", time.Hour),
	} {
		if _, err := e.store.RedeemSession(ctx, e.keys, req); err == nil {
			t.Errorf("RedeemSession accepted %s", name)
		}
	}
}

func TestCloseSession(t *testing.T) {
	e := newSessionEnv(t)
	ctx := t.Context()
	caller, err := e.store.RedeemSession(ctx, e.keys, e.request(sid, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	stranger := wire.Lifecycle{Principal: e.holder.Principal, UID: wire.NewLifecycleUID()}
	if _, err := e.store.CloseSession(ctx, sid, SessionCloser{Holder: &stranger}, ""); err == nil {
		t.Error("a non-party closed the session")
	}
	if _, err := e.store.CloseSession(ctx, sid, SessionCloser{Serving: &e.serving, Epoch: 9}, ""); err == nil {
		t.Error("the serving instance at another epoch closed the session")
	}
	td, err := e.store.CloseSession(ctx, sid, SessionCloser{Serving: &e.serving, Epoch: 1}, "")
	if err != nil {
		t.Fatal(err)
	}
	if !td.Transitioned || len(td.RevokedKeys) != 2 || !slices.Contains(td.RevokedKeys, caller.PublicKey) || td.ServingPrincipal != "local.search1" {
		t.Errorf("the close = %+v; want both halves revoked and the serving principal named", td)
	}
	again, err := e.store.CloseSession(ctx, sid, SessionCloser{Operator: true}, SessionRetired)
	if err != nil || again.Transitioned || len(again.RevokedKeys) != 2 {
		t.Errorf("a second close = %+v, %v; want no move, and both keys named again for the broker", again, err)
	}
	os, _ := e.store.Session(ctx, sid)
	if os.Row.State != SessionClosed {
		t.Errorf("the state is %s after a later close; terminal states never move", os.Row.State)
	}
	if _, err := e.store.RedeemSession(ctx, e.keys, e.request(sid, time.Hour)); !errors.Is(err, ErrConflict) {
		t.Errorf("redeeming a closed session = %v, want ErrConflict", err)
	}
}

// TestRevokingTheCallerHalfEndsTheSession: revoking a session's caller credential by hand takes
// the session and its serving half down too.
func TestRevokingTheCallerHalfEndsTheSession(t *testing.T) {
	e := newSessionEnv(t)
	ctx := t.Context()
	if _, err := e.store.RedeemSession(ctx, e.keys, e.request(sid, time.Hour)); err != nil {
		t.Fatal(err)
	}
	serving, err := e.store.ServingCredential(ctx, e.keys, sid, e.serving, 1)
	if err != nil {
		t.Fatal(err)
	}
	row, keys, err := e.store.Revoke(ctx, e.holder.UID, sid+".c", "by hand")
	if err != nil || row.State != CredRevoked || !slices.Contains(keys, serving.PublicKey) {
		t.Fatalf("Revoke = %+v, %v, %v; want the serving half's key too", row, keys, err)
	}
	if _, err := e.store.ServingCredential(ctx, e.keys, sid, e.serving, 1); err == nil {
		t.Error("the serving half is still released after its caller half was revoked")
	}
}

// TestRetireTakesSessionsDown: retiring the holder (a takeover barrier) supersedes its sessions
// and revokes the serving half too.
func TestRetireTakesSessionsDown(t *testing.T) {
	e := newSessionEnv(t)
	ctx := t.Context()
	if _, err := e.store.RedeemSession(ctx, e.keys, e.request(sid, time.Hour)); err != nil {
		t.Fatal(err)
	}
	serving, err := e.store.ServingCredential(ctx, e.keys, sid, e.serving, 1)
	if err != nil {
		t.Fatal(err)
	}
	revoked, err := e.store.Retire(ctx, e.holder, "op-retire")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(revoked, serving.PublicKey) {
		t.Errorf("the retirement revoked %v, not the serving half %s", revoked, serving.PublicKey)
	}
	os, _ := e.store.Session(ctx, sid)
	if os.Row.State != SessionSuperseded {
		t.Errorf("the session is %s, want superseded", os.Row.State)
	}
	if _, err := e.store.ReconcileSessionForTakeover(ctx, "sess_missingmissingmissing"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("reconciling a session with no row = %v, want ErrCorrupt", err)
	}
}

// TestSweepSessions: expired sessions are collected and revoked; a malformed row is reported
// and does not stop the pass.
func TestSweepSessions(t *testing.T) {
	e := newSessionEnv(t)
	ctx := t.Context()
	if _, err := e.store.RedeemSession(ctx, e.keys, e.request(sid, time.Minute)); err != nil {
		t.Fatal(err)
	}
	auth := meshwire.AuthBucket(wire.Space("main"))
	if _, err := e.js.Publish(ctx, auth.Subject("session.sess_aaaaaaaaaaaaaaaaaaaaaa"), []byte(`{"sessionId":"x"}`)); err != nil {
		t.Fatal(err)
	}
	res, err := e.store.SweepSessions(ctx, time.Now())
	if err != nil || res.Acted != 0 || len(res.Failed) != 1 {
		t.Fatalf("a sweep before expiry = %+v, %v; want nothing done and the bad row reported", res, err)
	}
	res, err = e.store.SweepSessions(ctx, time.Now().Add(2*time.Minute))
	if err != nil || res.Acted != 1 || len(res.RevokedKeys) != 2 || len(res.Failed) != 1 {
		t.Fatalf("a sweep after expiry = %+v, %v; want the session expired with both halves revoked", res, err)
	}
	os, _ := e.store.Session(ctx, sid)
	if os.Row.State != SessionExpired || !os.Row.Revoked.Caller || !os.Row.Revoked.Serving {
		t.Errorf("the swept session = %+v", os.Row)
	}
	res, err = e.store.SweepSessions(ctx, time.Now().Add(2*time.Minute))
	if err != nil || res.Acted != 0 {
		t.Errorf("a second sweep = %+v, %v; want nothing left to do", res, err)
	}
	check, err := e.store.Check(ctx)
	if err != nil || len(check.Problems) != 1 {
		t.Errorf("Check = %+v, %v; want the one malformed session", check, err)
	}
}

func TestSessionMoves(t *testing.T) {
	for _, tc := range []struct {
		from, to SessionState
		ok       bool
	}{
		{SessionIssuing, SessionActive, true},
		{SessionIssuing, SessionExpired, true},
		{SessionActive, SessionClosed, true},
		{SessionActive, SessionActive, false},
		{SessionActive, SessionIssuing, false},
		{SessionClosed, SessionActive, false},
		{SessionExpired, SessionClosed, false},
		{SessionActive, "paused", false},
	} {
		if err := checkSessionMove(tc.from, tc.to); (err == nil) != tc.ok {
			t.Errorf("%s → %s: %v, want ok=%v", tc.from, tc.to, err, tc.ok)
		}
	}
}
