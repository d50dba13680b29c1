package cotal_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/cotaltest"
	"github.com/gocotal/cotal/wire"
)

// TestQuarantineIsTold: a post whose from.id is not its sender, published raw with the agent's
// own credential, is stored by the broker and deleted by the warden (the warden's tests show the
// deletion), which tells the sender why: the SDK reports it on Errors as a *QuarantineError and
// hands the handler the warden's DM.
func TestQuarantineIsTold(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t)
	ctx := t.Context()
	alice := m.Agent(t, "alice", cotaltest.Channels("general"))
	dms := make(chan *cotal.Delivery, 4)
	c := alice.Connect(t, cotal.WithHandler(func(_ context.Context, d *cotal.Delivery) error {
		if d.Kind == wire.DeliveryDM {
			dms <- d
		}
		return nil
	}))

	userJWT, err := jwt.ParseDecoratedJWT(alice.Creds)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := jwt.DecodeUserClaims(userJWT)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := jwt.ParseDecoratedNKey(alice.Creds)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := nats.Connect(m.URL(), nats.UserJWT(func() (string, error) { return userJWT, nil }, func(nonce []byte) ([]byte, error) { return seed.Sign(nonce) }),
		nats.CustomInboxPrefix(wire.ConnID(claims.Subject).InboxPrefix()))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	js, err := jetstream.New(raw)
	if err != nil {
		t.Fatal(err)
	}
	forged := []byte(`{"id":"forged-1","ts":1733400000000,"space":"` + string(m.Space()) + `","from":{"id":"local.mallory","name":"mallory"},"channel":"general","parts":[{"kind":"text","text":"not me"}]}`)
	subject, err := m.Space().ChatSubject(alice.Principal, "general")
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(ctx, subject, forged)
	if err != nil {
		t.Fatalf("the broker refused the raw post: %v", err)
	}

	var q *cotal.QuarantineError
	select {
	case err := <-c.Errors():
		if !errors.As(err, &q) {
			t.Fatalf("Errors() = %v, want a *QuarantineError", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no quarantine reported")
	}
	if q.ID != "forged-1" || q.Subject != subject || q.Seq != ack.Sequence || q.Reason != string(wire.ReasonSenderMismatch) {
		t.Errorf("quarantine %+v, want forged-1 at seq %d for %s", q, ack.Sequence, wire.ReasonSenderMismatch)
	}
	select {
	case d := <-dms:
		if d.Sender.String() != "local.cotal_warden" {
			t.Errorf("the notice came from %s", d.Sender)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler was not handed the warden's DM")
	}
}
