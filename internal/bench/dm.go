package bench

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/wire"
)

// dmSize is the text size of a benchmarked direct message.
const dmSize = 128

// dmCase measures direct messages stored in JetStream and consumed through the recipient's
// bound dm_ durable with an ack, each timed from send to surface.
func dmCase(ctx context.Context, r *runner) ([]Result, error) {
	f := r.fleet()
	defer f.close()
	d, err := newDM(ctx, r.env, f)
	if err != nil {
		return nil, err
	}
	res, err := r.pair(ctx, "dm", "msgs/s", d.cotal, d.raw, targetDM)
	if err != nil {
		return nil, err
	}
	res.Note = "sent, stored, surfaced and acked one at a time; raw: JetStream publish, Consume on a bound dm_ durable, ack"
	lat := &Latency{Cotal: percentiles(d.cotalLat.take()), Raw: percentiles(d.rawLat.take())}
	lat.RatioP99 = lat.Cotal.P99 / lat.Raw.P99
	res.Latency = lat
	latRes := Result{
		Name: "dm/p99", Unit: "µs", Cotal: lat.Cotal.P99, Raw: lat.Raw.P99, Ratio: lat.RatioP99,
		Target: fmt.Sprintf("ratio ≤ %.2f", targetDMP99), Met: met(lat.RatioP99 <= targetDMP99),
		Note: "send to surface",
	}
	return []Result{res, latRes}, nil
}

// newDM issues a direct-message case's agents on f. Each side has its own recipient: a pull the
// closed Cotal client left waiting would otherwise take a raw message and hold it for the ack
// wait.
func newDM(ctx context.Context, env *Env, f *fleet) (*dm, error) {
	d := &dm{env: env}
	var err error
	for _, a := range []struct {
		name string
		dst  **authority.Credential
	}{{f.name("dm_alice"), &d.from}, {f.name("dm_bob"), &d.to}, {f.name("dm_carol"), &d.rawTo}} {
		if *a.dst, err = f.agent(ctx, ledger.Request{Name: a.name}); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// dm is a direct-message case: alice writes to bob.
type dm struct {
	env              *Env
	from, to, rawTo  *authority.Credential
	cotalLat, rawLat stamps
}

func (d *dm) cotal(ctx context.Context, f *fleet) (side, error) {
	from, err := f.client(ctx, d.from, cotal.WithPresence(false))
	if err != nil {
		return nil, err
	}
	got, parts := newCounter(), text(dmSize)
	surface := func(context.Context, *cotal.Delivery) error {
		d.cotalLat.arrived(got.next())
		got.add()
		return nil
	}
	if _, err := f.client(ctx, d.to, cotal.WithPresence(false), cotal.WithHandler(surface)); err != nil {
		return nil, err
	}
	return &sendSide{got: got, per: 1, lat: &d.cotalLat, send: func(ctx context.Context) error {
		_, err := from.DirectMessage(ctx, d.to.Principal, parts)
		return err
	}}, nil
}

func (d *dm) raw(ctx context.Context, f *fleet) (side, error) {
	_, js, err := f.conn(ctx, d.from)
	if err != nil {
		return nil, err
	}
	_, tjs, err := f.conn(ctx, d.rawTo)
	if err != nil {
		return nil, err
	}
	got := newCounter()
	name := wire.DMDurable(wire.Lifecycle{Principal: d.rawTo.Principal, UID: d.rawTo.LifecycleUID})
	if err := consume(ctx, f, tjs, d.env.Space.DMStream(), name, func(jetstream.Msg) {
		d.rawLat.arrived(got.next())
		got.add()
	}); err != nil {
		return nil, err
	}
	subject := d.env.Space.DMSubject(d.rawTo.Principal, d.from.Principal)
	body, err := rawBody(d.env.Space, d.from.Principal, subject, wire.CotalMessage{To: d.rawTo.Principal.String()}, dmSize)
	if err != nil {
		return nil, err
	}
	return &sendSide{got: got, per: 1, lat: &d.rawLat, send: rawPublish(js, subject, body)}, nil
}

// consume binds a durable and acks everything it delivers after handing it to got. The
// consumer stops when f closes.
func consume(ctx context.Context, f *fleet, js jetstream.JetStream, stream, durable string, got func(jetstream.Msg)) error {
	cons, err := js.Consumer(ctx, stream, durable)
	if err != nil {
		return fmt.Errorf("bind %s on %s: %w", durable, stream, err)
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		got(msg)
		_ = msg.Ack() // a lost ack is redelivered, and a redelivery would stall the round
	})
	if err != nil {
		return fmt.Errorf("consume %s on %s: %w", durable, stream, err)
	}
	f.onClose(cc.Stop)
	return nil
}
