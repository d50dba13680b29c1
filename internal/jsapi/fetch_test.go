package jsapi_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/broker/brokertest"
	"github.com/gocotal/cotal/internal/jsapi"
)

// TestFetchWaitsForItsConsumer fetches from a consumer whose pull requests no server answers yet,
// as on a cluster node the new consumer's interest has not reached: Fetch waits until the
// consumer is there and returns its messages, and gives up with no responders when it never is.
func TestFetchWaitsForItsConsumer(t *testing.T) {
	nc, err := nats.Connect(brokertest.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := js.Publish(ctx, "s.x", []byte("m")); err != nil {
			t.Fatal(err)
		}
	}
	cfg := jetstream.ConsumerConfig{Name: "c", AckPolicy: jetstream.AckNonePolicy}
	cons, err := js.CreateConsumer(ctx, "S", cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Gone: its pull requests meet no responder. It never comes back.
	if err := js.DeleteConsumer(ctx, "S", "c"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if msgs, err := jsapi.Fetch(ctx, cons, 10, jetstream.FetchMaxWait(time.Second)); !errors.Is(err, nats.ErrNoResponders) || len(msgs) != 0 {
		t.Fatalf("a consumer that never comes: %d messages, %v", len(msgs), err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("gave up after %s, before waiting it out", waited)
	}
	// It comes back while Fetch waits.
	go func() {
		time.Sleep(150 * time.Millisecond)
		if _, err := js.CreateConsumer(context.WithoutCancel(ctx), "S", cfg); err != nil {
			t.Error(err)
		}
	}()
	msgs, err := jsapi.Fetch(ctx, cons, 10, jetstream.FetchMaxWait(time.Second))
	if err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
		t.Fatalf("fetch once the consumer is there: %v", err)
	}
	if len(msgs) != 3 {
		t.Fatalf("got %d messages, want 3", len(msgs))
	}
}
