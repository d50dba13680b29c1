package authority_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// openSession opens the serve gate of serving and redeems session sid for holder, returning its
// caller and serving halves.
func openSession(t *testing.T, m *meshtest.Mesh, holder wire.Lifecycle, serving authstore.Endpoint, sid string) (caller, server *authority.Credential) {
	t.Helper()
	ctx := t.Context()
	err := m.WithStore(t, func(s *authstore.Store, keys *authority.SpaceKeys) error {
		g, err := s.ServeGate(serving)
		if err != nil {
			return err
		}
		if _, err := g.Move(ctx, nil, authstore.EndpointGateRow{
			State: authstore.GateOpen, Generation: 1, ProcessEpoch: 1, Principal: "local.search1",
			Op: &authstore.EndpointGateOp{OpID: "op-ep", Kind: authstore.OpActivation},
		}); err != nil {
			return err
		}
		epoch, err := s.CurrentEpoch(ctx, holder)
		if err != nil {
			return err
		}
		if caller, err = s.RedeemSession(ctx, keys, authstore.SessionRequest{
			SessionID: sid, Holder: holder, HolderEpoch: epoch, Serving: serving, ServingEpoch: 1,
			Expires: time.Now().Add(time.Hour),
		}); err != nil {
			return err
		}
		server, err = s.ServingCredential(ctx, keys, sid, serving, 1)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return caller, server
}

// TestSessionRailsAtTheBroker: each half of a session may only speak on its own rail, and
// closing the session makes the broker close both halves' connections and refuse them after.
func TestSessionRailsAtTheBroker(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	aliceCred := m.AgentCred(t, ledger.Request{Name: "alice"})
	holder := wire.Lifecycle{Principal: aliceCred.Principal, UID: aliceCred.LifecycleUID}
	serving := authstore.Endpoint{Name: "search", InstanceID: wire.NewLifecycleUID()}
	const sid = "sess_brokerbrokerbroker0"

	caller, server := openSession(t, m, holder, serving, sid)
	in, _ := meshwire.SessionRail(m.Space, "search", sid, 1, meshwire.SessionIn)
	out, _ := meshwire.SessionRail(m.Space, "search", sid, 1, meshwire.SessionOut)

	c, sv := m.Connect(t, caller), m.Connect(t, server)
	sub, err := sv.SubscribeSync(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := c.Publish(in, []byte("frame")); err != nil {
		t.Fatal(err)
	}
	if msg, err := sub.NextMsg(5 * time.Second); err != nil || string(msg.Data) != "frame" {
		t.Fatalf("the serving half did not get the caller's frame: %v", err)
	}
	// The broker holds each half to its own direction.
	if err := c.Publish(out, []byte("forged")); err != nil {
		t.Fatal(err)
	}
	if refused, err := c.Refused("Publish", out); err != nil || !refused {
		t.Errorf("the caller published on the out rail: refused=%v, %v", refused, err)
	}
	if err := sv.Publish(in, []byte("forged")); err != nil {
		t.Fatal(err)
	}
	if refused, err := sv.Refused("Publish", in); err != nil || !refused {
		t.Errorf("the serving half published on the in rail: refused=%v, %v", refused, err)
	}

	closed := make(chan struct{}, 2)
	for _, cl := range []*meshtest.Client{c, sv} {
		cl.SetClosedHandler(func(*nats.Conn) { closed <- struct{}{} })
	}
	err = m.Ledger("").CloseSession(ctx, sid, authstore.SessionCloser{Holder: &holder}, "")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("a half of the closed session is still connected")
		}
	}
	for _, cred := range []*authority.Credential{caller, server} {
		if nc, err := dial.As(ctx, m.URL(), cred, nats.NoReconnect()); err == nil {
			nc.Close()
			t.Errorf("the %s half of a closed session reconnected", cred.Profile)
		}
	}
}
