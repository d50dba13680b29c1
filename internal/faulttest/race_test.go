package faulttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// TestConcurrentMintsForOneName races mints for one name through the ledger (each an agent issue
// of local.x: a fresh lifecycle that takes the alias over, retiring the lifecycle before it, as
// `cotal mint x` does) and checks what SPEC.md §13.1 promises: two concurrent mints for one alias
// serialize at the head CAS and exactly one activates; a loser terminalizes its own orphan gate.
// In the end exactly one lifecycle of local.x is active: the alias head names it, its gate is
// the only open gate of a local.x lifecycle, it holds the only active credential row of local.x,
// and every other credential a mint released is refused by the broker. A failed mint fails with
// an error (a conflict, as a rule), never silently.
//
// A thousand mints, the issue's count, take a few seconds under -race.
func TestConcurrentMintsForOneName(t *testing.T) {
	meshtest.Long(t, "kills and restarts real processes")
	t.Parallel()
	const n = 1000
	ctx := bounded(t, 3*time.Minute)
	m := startMesh(t, "--no-manager")
	l := m.ledger(ctx)

	creds := make([]*authority.Credential, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			creds[i], errs[i] = l.Issue(ctx, ledger.Request{Name: "x"})
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	took := time.Since(began)

	var released []*authority.Credential
	reasons := map[string]int{}
	for i, err := range errs {
		switch {
		case err == nil:
			released = append(released, creds[i])
		case errors.Is(err, authstore.ErrConflict):
			reasons["conflict"]++
		default:
			reasons[err.Error()]++
		}
	}
	t.Logf("%d concurrent mints of local.x in %s: %d released a credential, %d refused with a conflict", n, took.Round(time.Millisecond), len(released), reasons["conflict"])
	// A loaded broker can drop a connection the ledger dials for an eviction: that mint fails
	// with the transport's error, which is reported, not silent; what it leaves behind is held to
	// the same end state below.
	for reason, k := range reasons {
		if reason != "conflict" {
			t.Logf("%d mints failed with another error: %s", k, reason)
		}
	}

	x, _ := wire.NewPrincipal(wire.DevOwner, "x")
	var head *authstore.LifecycleHead
	gates := map[wire.LifecycleUID]authstore.GateState{}
	var rows []authstore.CredentialRow
	err := meshtest.WithStore(t, l.URL(), m.keyring(), l.Space(), func(s *authstore.Store, _ *authority.SpaceKeys) error {
		var err error
		if head, _, err = s.Head(ctx, x); err != nil {
			return err
		}
		all, err := s.Credentials(ctx, "")
		for _, r := range all {
			if r.Principal == x.String() {
				rows = append(rows, r)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, uid := range lifecyclesOf(ctx, t, m, x) {
		var og *authstore.ObservedGate
		if err := meshtest.WithStore(t, l.URL(), m.keyring(), l.Space(), func(s *authstore.Store, _ *authority.SpaceKeys) error {
			var err error
			og, err = s.ObserveGate(ctx, uid)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if og != nil {
			gates[uid] = og.Row.State
		}
	}

	if head == nil || head.State != authstore.HeadActive {
		t.Fatalf("after the race the alias head of local.x is %+v: no lifecycle is active", head)
	}
	var open []wire.LifecycleUID
	states := map[authstore.GateState]int{}
	for uid, st := range gates {
		states[st]++
		if st == authstore.GateOpen {
			open = append(open, uid)
		}
	}
	t.Logf("%d lifecycles of local.x got a gate: %v; the head names %s", len(gates), states, head.LifecycleUID)
	if len(open) != 1 || open[0] != head.LifecycleUID {
		slices.Sort(open)
		t.Errorf("%d open gates among local.x's lifecycles (%q), want exactly the head's %s: a mint that lost the head CAS left its gate open", len(open), sample(toStrings(open), 5), head.LifecycleUID)
	}
	var active []authstore.CredentialRow
	for _, r := range rows {
		if r.State == authstore.CredActive {
			active = append(active, r)
		}
	}
	if len(active) != 1 || active[0].LifecycleUID != head.LifecycleUID {
		t.Errorf("%d active credential rows of local.x, want one in the head's lifecycle %s: %+v", len(active), head.LifecycleUID, active)
	}

	// Every credential a mint released but the survivor's must be refused by the broker.
	revoked, err := m.keyring().Revocations(space)
	if err != nil {
		t.Fatal(err)
	}
	var admitted, unlisted []string
	for _, c := range released {
		if c.LifecycleUID == head.LifecycleUID {
			continue
		}
		if _, ok := revoked[c.PublicKey]; !ok {
			unlisted = append(unlisted, c.CredentialID)
		}
		no, err := refused(ctx, m.url, c)
		if err != nil {
			t.Fatal(err)
		}
		if !no {
			admitted = append(admitted, c.CredentialID)
		}
	}
	if len(unlisted) > 0 {
		t.Errorf("%d of %d retired credentials are missing from the space's revocation list: %q", len(unlisted), len(released)-1, sample(unlisted, 5))
	}
	if len(admitted) > 0 {
		t.Errorf("the broker still admits %d of %d credentials of retired lifecycles: %q", len(admitted), len(released)-1, sample(admitted, 5))
	}
}

// lifecyclesOf returns the lifecycles reserved for p: the uid.<lifecycleUid> reservations of the
// auth store naming it, read with an admin's raw handle.
func lifecyclesOf(ctx context.Context, t *testing.T, m *meshProc, p wire.Principal) []wire.LifecycleUID {
	t.Helper()
	_, kv := m.rawAuth(ctx)
	lister, err := kv.ListKeysFiltered(ctx, "uid.*")
	if err != nil {
		t.Fatal(err)
	}
	var out []wire.LifecycleUID
	for key := range lister.Keys() {
		e, err := kv.Get(ctx, key)
		if err != nil {
			t.Fatalf("read %s: %v", key, err)
		}
		var res struct {
			LifecycleUID wire.LifecycleUID `json:"lifecycleUid"`
			Principal    string            `json:"principal"`
		}
		if err := json.Unmarshal(e.Value(), &res); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if res.Principal == p.String() {
			out = append(out, res.LifecycleUID)
		}
	}
	return out
}

func toStrings[S ~string](in []S) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = string(s)
	}
	return out
}

// TestRacingSessionRedeems races redemptions of one session id through the ledger (SPEC §13.6:
// the issuing row's create is the one use). First, every racer presents the grant for a
// different holder lifecycle: exactly one redemption wins, every other one is refused with a
// conflict that says the session was already redeemed, and the ledger holds one session row,
// pinned to the winner, and one caller credential row, under the winner's lifecycle. Then the
// winner's own lost-response retries race: each gets the same credential bytes back or a
// conflict, and still nothing new is minted. The winner's credential is admitted by the broker.
//
// A thousand racers, the issue's count, take a few seconds under -race.
func TestRacingSessionRedeems(t *testing.T) {
	meshtest.Long(t, "kills and restarts real processes")
	t.Parallel()
	const n = 1000
	ctx := bounded(t, 3*time.Minute)
	m := startMesh(t, "--no-manager")
	l := m.ledger(ctx)
	const sid = "sess_faulttestfaulttest0"

	// The serving instance, and one holder lifecycle per racer.
	serving := authstore.Endpoint{Name: "search", InstanceID: wire.NewLifecycleUID()}
	if err := meshtest.WithStore(t, l.URL(), m.keyring(), l.Space(), func(s *authstore.Store, _ *authority.SpaceKeys) error {
		g, err := s.ServeGate(serving)
		if err != nil {
			return err
		}
		_, err = g.Move(ctx, nil, authstore.EndpointGateRow{
			State: authstore.GateOpen, Generation: 1, ProcessEpoch: 1, Principal: "local.search1",
			Op: &authstore.EndpointGateOp{OpID: "op-ep", Kind: authstore.OpActivation},
		})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	holders := make([]wire.Lifecycle, n)
	var wg sync.WaitGroup
	var issueErr error
	var mu sync.Mutex
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c, err := l.Issue(ctx, ledger.Request{Name: fmt.Sprintf("h%d", i)})
			if err != nil {
				mu.Lock()
				issueErr = err
				mu.Unlock()
				return
			}
			holders[i] = wire.Lifecycle{Principal: c.Principal, UID: c.LifecycleUID}
		})
	}
	wg.Wait()
	if issueErr != nil {
		t.Fatalf("issue the holders: %v", issueErr)
	}
	request := func(h wire.Lifecycle) authstore.SessionRequest {
		return authstore.SessionRequest{SessionID: sid, Holder: h, HolderEpoch: 1, Serving: serving, ServingEpoch: 1, Expires: time.Now().Add(time.Hour)}
	}
	// Every redemption goes through one store on one connection, as the ledger's do.
	store, keys := meshtest.OpenStore(t, l.URL(), m.keyring(), l.Space())
	redeem := func(req authstore.SessionRequest) (*authority.Credential, error) {
		return store.RedeemSession(ctx, keys, req)
	}
	race := func(reqs []authstore.SessionRequest) ([]*authority.Credential, []error, time.Duration) {
		creds, errs := make([]*authority.Credential, len(reqs)), make([]error, len(reqs))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range reqs {
			wg.Go(func() {
				<-start
				creds[i], errs[i] = redeem(reqs[i])
			})
		}
		began := time.Now()
		close(start)
		wg.Wait()
		return creds, errs, time.Since(began)
	}

	reqs := make([]authstore.SessionRequest, n)
	for i := range reqs {
		reqs[i] = request(holders[i])
	}
	creds, errs, took := race(reqs)
	var winners []int
	refusals := map[string]int{}
	for i, err := range errs {
		switch {
		case err == nil:
			winners = append(winners, i)
		case errors.Is(err, authstore.ErrConflict) && strings.Contains(err.Error(), "already redeemed"):
			refusals["already redeemed"]++
		default:
			refusals[err.Error()]++
		}
	}
	t.Logf("%d holders raced to redeem %s in %s: %d won; refusals %v", n, sid, took.Round(time.Millisecond), len(winners), refusals)
	if len(winners) != 1 {
		t.Fatalf("%d redemptions of one session won, want exactly one", len(winners))
	}
	for reason, k := range refusals {
		if reason != "already redeemed" {
			t.Errorf("%d redemptions were refused with something other than 'already redeemed': %s", k, reason)
		}
	}
	winner := holders[winners[0]]
	won := creds[winners[0]]
	if won.Principal != winner.Principal || won.LifecycleUID != winner.UID || won.Profile != authority.ProfileSessionCaller {
		t.Errorf("the winner's credential is a %s of %s/%s, want the caller half of %s", won.Profile, won.Principal, won.LifecycleUID, winner)
	}

	// The winner's retries race too: the same bytes, or a conflict; nothing new.
	retries := make([]authstore.SessionRequest, n)
	for i := range retries {
		retries[i] = request(winner)
	}
	again, againErrs, _ := race(retries)
	same := 0
	for i, err := range againErrs {
		switch {
		case err == nil && bytes.Equal(again[i].Creds, won.Creds):
			same++
		case err == nil:
			t.Error("a retry of the winner's redemption released different credential bytes")
		case !errors.Is(err, authstore.ErrConflict):
			t.Errorf("a retry of the winner's redemption failed with %v", err)
		}
	}
	t.Logf("%d racing retries by the winner: %d got the same credential back", n, same)

	var session *authstore.ObservedSession
	callerRows := map[wire.LifecycleUID]int{}
	if err := meshtest.WithStore(t, l.URL(), m.keyring(), l.Space(), func(s *authstore.Store, _ *authority.SpaceKeys) error {
		var err error
		if session, err = s.Session(ctx, sid); err != nil {
			return err
		}
		rows, err := s.Credentials(ctx, "")
		for _, r := range rows {
			if strings.HasPrefix(r.CredentialID, sid+".") {
				callerRows[r.LifecycleUID]++
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if session == nil || session.Row.State != authstore.SessionActive || session.Row.Holder.LifecycleUID != winner.UID {
		t.Errorf("the session row is %+v, want active and pinned to the winner %s", session, winner)
	}
	if len(callerRows) != 1 || callerRows[winner.UID] != 1 {
		t.Errorf("caller credential rows of %s by lifecycle: %v, want one, under the winner %s", sid, callerRows, winner.UID)
	}
	sessionRows := sessionKeys(ctx, t, m)
	if !slices.Equal(sessionRows, []string{"session." + sid}) {
		t.Errorf("session rows in the ledger: %q, want exactly session.%s", sessionRows, sid)
	}
	if no, err := refused(ctx, m.url, won); err != nil || no {
		t.Errorf("the broker refuses the winner's caller credential: %v, %v", no, err)
	}
}

// sessionKeys lists the auth store's session.* keys with an admin's raw handle.
func sessionKeys(ctx context.Context, t *testing.T, m *meshProc) []string {
	t.Helper()
	_, kv := m.rawAuth(ctx)
	lister, err := kv.ListKeysFiltered(ctx, "session.>")
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for k := range lister.Keys() {
		keys[k] = true
	}
	return slices.Sorted(maps.Keys(keys))
}

// TestConcurrentRetirementsReachTheBroker retires many lifecycles at once through one ledger, as
// a mesh does when several agents stop together (or a takeover race retires the losers): every
// retired credential must be on the space's revocation list and refused by the broker, since its
// ledger row says revoked. Retirement is how a lifecycle's credentials stop working (SPEC §13.1:
// revoke, then verify the revocation is enforced), so one the broker still admits is a revoked
// credential that works.
//
// Counts: 40 lifecycles by default, 200 with COTAL_SOAK=1.
func TestConcurrentRetirementsReachTheBroker(t *testing.T) {
	meshtest.Long(t, "kills and restarts real processes")
	t.Parallel()
	n := count(40, 200)
	ctx := bounded(t, 2*time.Minute)
	m := startMesh(t, "--no-manager")
	l := m.ledger(ctx)
	creds := make([]*authority.Credential, n)
	for i := range n {
		c, err := l.Issue(ctx, ledger.Request{Name: fmt.Sprintf("y%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		creds[i] = c
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = l.Retire(ctx, wire.Lifecycle{Principal: creds[i].Principal, UID: creds[i].LifecycleUID})
		})
	}
	wg.Wait()
	failed := map[string]int{}
	for _, err := range errs {
		if err != nil {
			failed[err.Error()]++
		}
	}
	for reason, k := range failed {
		t.Errorf("%d of %d concurrent retirements failed: %s", k, n, reason)
	}
	revoked, err := m.keyring().Revocations(space)
	if err != nil {
		t.Fatal(err)
	}
	var unlisted, admitted []string
	for _, c := range creds {
		if _, ok := revoked[c.PublicKey]; !ok {
			unlisted = append(unlisted, c.Principal.String())
		}
		no, err := refused(ctx, m.url, c)
		if err != nil {
			t.Fatal(err)
		}
		if !no {
			admitted = append(admitted, c.Principal.String())
		}
	}
	rows, err := l.Credentials(ctx)
	if err != nil {
		t.Fatal(err)
	}
	active := 0
	for _, r := range rows {
		if strings.HasPrefix(r.Principal, "local.y") && r.State == authstore.CredActive {
			active++
		}
	}
	t.Logf("%d lifecycles retired concurrently: %d active ledger rows left, %d keys missing from the revocation list, %d credentials still admitted by the broker",
		n, active, len(unlisted), len(admitted))
	if active != 0 {
		t.Errorf("%d ledger rows of the retired lifecycles are still active", active)
	}
	if len(unlisted) > 0 {
		t.Errorf("%d of %d retired credentials are missing from the space's revocation list (a lost update of the keyring's revocation file?): %q", len(unlisted), n, sample(unlisted, 5))
	}
	if len(admitted) > 0 {
		t.Errorf("the broker still admits %d of %d credentials whose ledger rows are revoked: %q", len(admitted), n, sample(admitted, 5))
	}
}
