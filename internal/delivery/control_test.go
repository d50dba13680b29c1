package delivery_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/delivery"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// TestControlRefusalsCarryTheirCode: a control request the daemon refuses reaches the client side
// as a *wire.ControlError whose code says whether to ask again. A request the daemon can never
// serve (an op it does not know, a channel outside the caller's read ACL, a malformed lifecycle)
// is refused for good; a join cut short by the daemon stopping is to be retried, and the SDK's
// Join hands that refusal over in JoinResult.BackstopErr.
func TestControlRefusalsCarryTheirCode(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	var hold atomic.Bool
	held := make(chan struct{}, 1)
	hook := func(hctx context.Context, handler string) func() {
		if handler == wire.OpDurableJoin && hold.Load() {
			select {
			case held <- struct{}{}:
			default:
			}
			<-hctx.Done() // the op's context: it ends with the term
		}
		return func() {}
	}
	stop, _ := runDaemonWith(t, m, "delivery", hook, nil)
	team := []string{"team"}
	cred := m.AgentCred(t, ledger.Request{Name: "alice", AllowPublish: team, Subscribe: team})
	nc := m.Connect(t, cred).Conn
	ask := func(op string, args any) error {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		rep, err := control(rctx, nc, m.Space, cred.Principal, op, args)
		if err != nil {
			return err
		}
		return rep.Err(op) // as the SDK's control turns a reply into an error
	}
	meshtest.Eventually(t, wait+delivery.LeaseTTL, "the daemon to serve", func() bool {
		return ask(meshwire.OpListMemberships, meshwire.ListMembershipsArgs{LifecycleUID: cred.LifecycleUID}) == nil
	})

	for _, tt := range []struct {
		name, op string
		args     any
	}{
		{"an unknown op", "dropMemberships", struct{}{}},
		{"a channel outside the read ACL", wire.OpDurableJoin, wire.DurableJoinArgs{Channel: "elsewhere"}},
		{"a malformed lifecycle", meshwire.OpListMemberships, meshwire.ListMembershipsArgs{LifecycleUID: "not-a-uid"}},
	} {
		err := ask(tt.op, tt.args)
		var ce *wire.ControlError
		if !errors.As(err, &ce) || ce.Op != tt.op || ce.Code != wire.ControlCodeRefused {
			t.Errorf("%s: %v (%+v), want a %q refusal", tt.name, err, ce, wire.ControlCodeRefused)
		}
	}

	// A join still running when the daemon stops: the term's end cuts it short, which is about
	// the daemon, not the request.
	hold.Store(true)
	c := connect(t, m, cred.Creds, nil)
	joined := make(chan *cotal.JoinResult, 1)
	go func() { // owned: received from below
		res, err := c.Join(ctx, "team")
		if err != nil {
			t.Errorf("join: %v", err)
		}
		joined <- res
	}()
	select {
	case <-held:
	case <-time.After(wait):
		t.Fatal("the durable join never reached the daemon")
	}
	stop()
	res := <-joined
	if res == nil {
		return
	}
	var ce *wire.ControlError
	if res.Durable || !errors.As(res.BackstopErr, &ce) || ce.Op != wire.OpDurableJoin || ce.Code != wire.ControlCodeRetry {
		t.Errorf("join cut short by the daemon's stop = durable %t, backstop %q, error %v (%+v); want a %q refusal",
			res.Durable, res.Backstop, res.BackstopErr, ce, wire.ControlCodeRetry)
	}
}
