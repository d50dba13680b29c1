package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/wire"
)

// Durable channel case shape.
const (
	fanoutMembers = 10
	fanoutChannel = "bench-durable"
	// fanoutRawChannel carries the raw side's posts, which have no members for the daemon.
	fanoutRawChannel = "bench-durable-raw"
	fanoutSize       = 128
	// fanoutPoll is how often the Cotal side reads the members' dlv_ durables.
	fanoutPoll = 10 * time.Millisecond
)

// durableChannelCase measures a durable channel: every post handed by the delivery daemon into
// each member's dlv_ durable and acknowledged there by the member's client.
func durableChannelCase(ctx context.Context, r *runner) ([]Result, error) {
	f := r.fleet()
	defer f.close()
	fo, err := newFanout(ctx, r.env, f)
	if err != nil {
		return nil, err
	}
	res, err := r.pair(ctx, "channel/durable", "deliveries/s", fo.cotal, fo.raw, 0)
	if err != nil {
		return nil, err
	}
	res.Cotal, res.Raw = res.Cotal*fanoutMembers, res.Raw*fanoutMembers // posts/s to deliveries/s
	res.Note = fmt.Sprintf("%d members; each post handed by the delivery daemon into every member's dlv_ durable and acked there; raw: one JetStream durable per member on CHAT", fanoutMembers)
	return []Result{res}, nil
}

// newFanout configures the durable channel and issues its publisher, the inspector of the
// members' durables and the raw side's stand-ins on f. The members are issued by each set-up of
// the Cotal side, so that a side set up again (as a Go benchmark's is, once per b.N) starts with
// fresh lifecycles: a member's dlv_ durable counts every hand-off it ever delivered, and the
// previous set-up's clients may hold hand-offs unacknowledged until the ack wait.
func newFanout(ctx context.Context, env *Env, f *fleet) (*fanout, error) {
	fo := &fanout{env: env}
	if err := f.setClass(ctx, fanoutChannel, wire.ClassDurable); err != nil {
		return nil, err
	}
	var err error
	if fo.pub, err = f.agent(ctx, ledger.Request{Name: f.name("dur_pub"), AllowPublish: []string{fanoutChannel, fanoutRawChannel}}); err != nil {
		return nil, err
	}
	for i := range fanoutMembers {
		cred, err := f.issue(ctx, authority.ProfileObserver, f.name("dur_raw_%d", i))
		if err != nil {
			return nil, err
		}
		fo.observers = append(fo.observers, cred)
	}
	if fo.inspector, err = f.issue(ctx, authority.ProfileProvisioner, f.name("inspector")); err != nil {
		return nil, err
	}
	return fo, nil
}

// fanout is a durable channel case: a publisher, and the credentials that read the members'
// durables (cotal) and stand in for them (raw).
type fanout struct {
	env       *Env
	pub       *authority.Credential
	inspector *authority.Credential
	observers []*authority.Credential
}

func (fo *fanout) cotal(ctx context.Context, f *fleet) (side, error) {
	pub, err := f.client(ctx, fo.pub, cotal.WithPresence(false))
	if err != nil {
		return nil, err
	}
	_, js, err := f.conn(ctx, fo.inspector)
	if err != nil {
		return nil, err
	}
	s := &cotalFanout{pub: pub, parts: text(fanoutSize)}
	var clients []*cotal.Client
	for i := range fanoutMembers {
		m, err := f.agent(ctx, ledger.Request{Name: f.name("dur_member_%d", i), Subscribe: []string{fanoutChannel}})
		if err != nil {
			return nil, err
		}
		c, err := f.client(ctx, m, cotal.WithPresence(false), cotal.WithJoin(fanoutChannel), cotal.WithHandler(func(context.Context, *cotal.Delivery) error { return nil }))
		if err != nil {
			return nil, err
		}
		clients = append(clients, c)
		l := wire.Lifecycle{Principal: m.Principal, UID: m.LifecycleUID}
		cons, err := js.Consumer(ctx, fo.env.Space.DLVStream(), wire.DLVDurable(l))
		if err != nil {
			return nil, fmt.Errorf("read the dlv_ durable of %s: %w", m.Principal, err)
		}
		s.durables = append(s.durables, cons)
	}
	// Leave the channel before disconnecting, so the mesh keeps no bench membership.
	f.onClose(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, c := range clients {
			_ = c.Leave(ctx, fanoutChannel) // best effort: the member is retired at close anyway
		}
	})
	return s, nil
}

func (fo *fanout) raw(ctx context.Context, f *fleet) (side, error) {
	_, js, err := f.conn(ctx, fo.pub)
	if err != nil {
		return nil, err
	}
	subject, _ := fo.env.Space.ChatSubject(fo.pub.Principal, fanoutRawChannel) // a valid channel
	filter, _ := fo.env.Space.ChatFilter(fanoutRawChannel)
	got := newCounter()
	stream := fo.env.Space.ChatStream()
	for i, o := range fo.observers {
		_, ojs, err := f.conn(ctx, o)
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("bench_fanout_%d", i)
		if _, err := ojs.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
			Name: name, FilterSubject: filter, DeliverPolicy: jetstream.DeliverNewPolicy,
			AckPolicy: jetstream.AckExplicitPolicy, InactiveThreshold: time.Minute,
		}); err != nil {
			return nil, fmt.Errorf("create %s on %s: %w", name, stream, err)
		}
		f.onClose(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = ojs.DeleteConsumer(ctx, stream, name) // it goes away after InactiveThreshold anyway
		})
		if err := consume(ctx, f, ojs, stream, name, func(jetstream.Msg) { got.add() }); err != nil {
			return nil, err
		}
	}
	body, err := rawBody(fo.env.Space, fo.pub.Principal, subject, wire.CotalMessage{Channel: fanoutRawChannel}, fanoutSize)
	if err != nil {
		return nil, err
	}
	return &sendSide{got: got, per: len(fo.observers), send: rawPublish(js, subject, body)}, nil
}

// cotalFanout posts through the SDK and counts a round done when every member's dlv_ durable has
// delivered every post so far and has nothing pending or unacknowledged.
type cotalFanout struct {
	pub      *cotal.Client
	parts    []wire.Part
	durables []jetstream.Consumer
	posted   uint64
}

func (s *cotalFanout) round(ctx context.Context, n int) error {
	for range n {
		if _, err := s.pub.Post(ctx, fanoutChannel, s.parts); err != nil {
			return err
		}
	}
	s.posted += uint64(n)
	// Read one durable at a time, moving on once it is done, so the reads add little load.
	t := time.NewTicker(fanoutPoll)
	defer t.Stop()
	stall, next := time.Now(), 0
	var last uint64
	for next < len(s.durables) {
		info, err := s.durables[next].Info(ctx)
		if err != nil {
			return err
		}
		// Delivered counts redeliveries too; a member's client redelivers only when its handler
		// fails, which the bench's never does.
		if info.Delivered.Consumer >= s.posted && info.NumPending == 0 && info.NumAckPending == 0 {
			next++
			continue
		}
		if progress := info.Delivered.Consumer + uint64(next)*s.posted; progress != last {
			last, stall = progress, time.Now()
		} else if time.Since(stall) > stallTimeout {
			return fmt.Errorf("stalled: %d of %d hand-offs delivered, none in %s", progress, s.posted*uint64(len(s.durables)), stallTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
