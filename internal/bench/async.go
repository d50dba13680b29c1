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

// targetAsync is the pipelined posts' target ratio against raw asynchronous publishing.
const targetAsync = 0.85

// asyncSize is the text size of a pipelined post.
const asyncSize = 128

// asyncCase measures pipelined posts: one sender posting to a channel without waiting for each
// acknowledgement, cotal.DefaultSendWindow of them in flight, against raw JetStream PublishAsync
// with the same window, each message with its own Nats-Msg-Id. A unit is a post the stream
// acknowledged.
func asyncCase(ctx context.Context, r *runner) ([]Result, error) {
	f := r.fleet()
	defer f.close()
	a, err := newAsync(ctx, r.env, f)
	if err != nil {
		return nil, err
	}
	res, err := r.pair(ctx, "post/async", "msgs/s", a.cotal, a.raw, targetAsync)
	if err != nil {
		return nil, err
	}
	res.Note = fmt.Sprintf("posts/s stored, %d awaiting their acknowledgement at once; raw: JetStream PublishAsync with Nats-Msg-Id and the same window", cotal.DefaultSendWindow)
	return []Result{res}, nil
}

// async is a pipelined-post case: one publisher, a channel per side.
type async struct {
	env                 *Env
	channel, rawChannel string
	pub                 *authority.Credential
}

// newAsync configures a pipelined-post case's channels and issues its publisher on f.
func newAsync(ctx context.Context, env *Env, f *fleet) (*async, error) {
	a := &async{env: env, channel: "bench-async", rawChannel: "bench-async-raw"}
	for _, ch := range []string{a.channel, a.rawChannel} {
		if err := f.setClass(ctx, ch, wire.ClassLive); err != nil {
			return nil, err
		}
	}
	var err error
	if a.pub, err = f.agent(ctx, ledger.Request{Name: f.name("async_pub"), AllowPublish: []string{a.channel, a.rawChannel}}); err != nil {
		return nil, err
	}
	return a, nil
}

// pipeSide is a side that sends a round's messages without waiting, then waits for each.
type pipeSide struct {
	send func(ctx context.Context) (wait func(context.Context) error, err error)
}

func (s *pipeSide) round(ctx context.Context, n int) error {
	waits := make([]func(context.Context) error, 0, n)
	for range n {
		w, err := s.send(ctx)
		if err != nil {
			return err
		}
		waits = append(waits, w)
	}
	for _, w := range waits {
		if err := w(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (a *async) cotal(ctx context.Context, f *fleet) (side, error) {
	pub, err := f.client(ctx, a.pub, cotal.WithPresence(false))
	if err != nil {
		return nil, err
	}
	parts := text(asyncSize)
	return &pipeSide{send: func(ctx context.Context) (func(context.Context) error, error) {
		p, err := pub.PostAsync(ctx, a.channel, parts)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error { _, err := p.Wait(ctx); return err }, nil
	}}, nil
}

// rawStallWait is how long the raw side's send waits for a slot in a full window.
const rawStallWait = 30 * time.Second

func (a *async) raw(ctx context.Context, f *fleet) (side, error) {
	nc, _, err := f.conn(ctx, a.pub)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(cotal.DefaultSendWindow))
	if err != nil {
		return nil, err
	}
	subject, _ := a.env.Space.ChatSubject(a.pub.Principal, a.rawChannel) // validated at issue
	body, err := rawBody(a.env.Space, a.pub.Principal, subject, wire.CotalMessage{Channel: a.rawChannel}, asyncSize)
	if err != nil {
		return nil, err
	}
	return &pipeSide{send: func(ctx context.Context) (func(context.Context) error, error) {
		// Like the SDK's, a send finding the window full waits for a slot (the default gives up
		// after 200 ms, which a loaded machine exceeds).
		fut, err := js.PublishAsync(subject, body, jetstream.WithMsgID(wire.NewMessageID()), jetstream.WithStallWait(rawStallWait))
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			select {
			case <-fut.Ok():
				return nil
			case err := <-fut.Err():
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}, nil
	}}, nil
}
