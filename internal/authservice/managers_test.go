package authservice_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/remotemgr"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/wire"
)

// TestManagerCallerView: a person with no remote manager is given a manager-caller bearer for the
// host's own manager, the one live candidate, and for nothing else: an instance that is not live is
// refused, and so is every instance once the person has a remote manager registered, live or not
// (no fallback to the host's). On the view the broker lets the person call ps on that instance's
// rail and nothing on the class rail.
func TestManagerCallerView(t *testing.T) {
	r := start(t, meshtest.WithDaemons())
	idToken := r.login(t, "alice")
	row := r.grant(t, "alice", []string{userauth.ScopeSpawn}, nil, nil)
	ask := func(instance wire.LifecycleUID) (int, *userauth.Act, string) {
		body := map[string]any{"idpToken": idToken, "actor": "cli", "view": "manager-caller"}
		if instance != "" {
			body["managerInstanceId"] = instance
		}
		status, out := r.exchange(t, body)
		if status != 200 {
			return status, nil, ""
		}
		token, act := bearerAct(t, out)
		return status, act, token
	}
	// The host's manager comes up with the daemons: the exchange picks it once it is live.
	var act *userauth.Act
	var bearer string
	for deadline := time.Now().Add(20 * time.Second); act == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the exchange never chose the host's manager")
		}
		_, act, bearer = ask("")
	}
	instance := act.ManagerInstanceID
	if act.View != userauth.ViewManagerCaller || act.Owner != row.Owner || act.Actor != "cli" {
		t.Fatalf("the view's bearer: %+v", act)
	}
	if status, _, _ := ask(instance); status != 200 {
		t.Errorf("asking for the live instance by name: HTTP %d", status)
	}
	if status, _, _ := ask(wire.NewLifecycleUID()); status != 401 {
		t.Errorf("an instance that is not live: HTTP %d, want 401", status)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	nc, err := asBearer(ctx, r.m.URL(), []byte(r.doc.SentinelCreds), bearer)
	if err != nil {
		t.Fatalf("connect on the view: %v", err)
	}
	defer nc.Close()
	p, err := act.Principal()
	if err != nil {
		t.Fatal(err)
	}
	me := wire.Lifecycle{Principal: p, UID: act.LifecycleUID}
	pinned := manager.NewClient(nc, r.m.Space, me, "cli")
	pinned.Pinned = instance
	// The host's manager runs no agent of alice's, and shows her no other.
	if rows, from, err := pinned.PsPinned(ctx); err != nil || len(rows) != 0 || from.Instance != instance {
		t.Fatalf("ps on the view: %v %v", rows, err)
	}
	// The class rail is not the view's: the broker refuses the describe that precedes any call.
	cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
	defer ccancel()
	if _, _, err := manager.NewClient(nc, r.m.Space, me, "cli").Find(cctx, nil, "anyone"); err == nil || !strings.Contains(err.Error(), "the broker refused the publish") {
		t.Errorf("the view on the manager's class rail: %v, want the broker's refusal", err)
	}

	// alice registers a remote manager that never comes up: the host's manager is not hers to
	// address any more, and the one she registered is not live.
	remote := wire.NewLifecycleUID()
	if _, err := r.st.Registry.Claim(ctx, remotemgr.Registration{V: 1, Owner: row.Owner, Actor: "cli", InstanceID: string(remote), LifecycleUID: string(wire.NewLifecycleUID())}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []wire.LifecycleUID{"", instance, remote} {
		if status, _, _ := ask(id); status != 401 {
			t.Errorf("manager-caller for %q with only a dead remote manager: HTTP %d, want 401", id, status)
		}
	}
	// And a bearer already held stops connecting: every connect re-checks the instance.
	if nc, err := asBearer(ctx, r.m.URL(), []byte(r.doc.SentinelCreds), bearer); err == nil {
		nc.Close()
		t.Error("a manager-caller bearer connected after its instance stopped being the person's to address")
	}
}
