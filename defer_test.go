package cotal_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/cotaltest"
	"github.com/gocotal/cotal/wire"
)

// TestDeferredAck: a handler that defers a DM (ErrDefer) leaves it pending on the agent's durable
// until it acknowledges it (Delivery.Ack); a live channel message has nothing to acknowledge.
func TestDeferredAck(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t)
	ctx := t.Context()
	got := make(chan *cotal.Delivery, 4)
	bob := m.Agent(t, "bob", cotaltest.Channels("general"))
	bc := bob.Connect(t, cotal.WithHandler(func(_ context.Context, d *cotal.Delivery) error {
		got <- d
		return cotal.ErrDefer
	}), cotal.WithJoin("general"))
	alice := m.Agent(t, "alice", cotaltest.Channels("general")).Connect(t)
	if _, err := alice.DirectMessage(ctx, bob.Principal, []wire.Part{wire.TextPart("later")}); err != nil {
		t.Fatal(err)
	}
	var dm *cotal.Delivery
	select {
	case dm = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the DM did not arrive")
	}
	js, err := jetstream.New(bc.Conn())
	if err != nil {
		t.Fatal(err)
	}
	durable := wire.DMDurable(wire.Lifecycle{Principal: bob.Principal, UID: bc.Grant().Lifecycle})
	pending := func() int {
		t.Helper()
		c, err := js.Consumer(ctx, m.Space().DMStream(), durable)
		if err != nil {
			t.Fatal(err)
		}
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.NumAckPending
	}
	if n := pending(); n != 1 {
		t.Fatalf("a deferred DM: %d pending acknowledgements, want 1", n)
	}
	if err := dm.Ack(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for pending() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the DM is still pending after Ack")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := alice.Post(ctx, "general", []wire.Part{wire.TextPart("live")}); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-got:
		if d.Kind != wire.DeliveryChannel || d.Ack() != nil {
			t.Errorf("a live channel message: kind %s, Ack %v", d.Kind, d.Ack())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the post did not arrive")
	}
}
