package delivery

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// The fan-out and the reader handle their consumers' messages in batches: each batch reads the
// registry rows it needs once (a channel's config, a member's ACL row) after all of its messages
// were stored, and publishes its copies and hand-offs asynchronously, acknowledging each message
// once what it owes is stored. One leader read per message, and one publish waited for at a
// time, bounded the whole durable-channel path.

// Batch sizes: how many messages one batch takes at most.
const (
	// fanoutBatch bounds a fan-out batch, in posts.
	fanoutBatch = 256
	// readerBatch bounds a reader batch, in inbox entries: half the reader's window, so that the
	// next batch is already delivered while one is handled.
	readerBatch = readerWindow / 2
)

// publishWindow bounds the asynchronous publishes a batch has unanswered at once, well within
// the JetStream context's own bound on pending asynchronous publishes (4,000 by default), which
// the fan-out, the reader and the catch-ups share.
const publishWindow = 1024

// batcher gathers the messages a consumer delivers into batches, handled one at a time on one
// goroutine, in the order they were delivered. The consumer's handler blocks while a batch is
// full, so the consumer's own window holds back the rest.
type batcher struct {
	in   chan jetstream.Msg
	done chan struct{}
}

// startBatcher handles batches of up to size messages with handle until ctx (the term's) ends;
// close waits for the batch in hand, which ctx's end cuts short.
func startBatcher(ctx context.Context, size int, handle func(ctx context.Context, msgs []jetstream.Msg)) *batcher {
	b := &batcher{in: make(chan jetstream.Msg, size), done: make(chan struct{})}
	go func() { // owned: close waits for it
		defer close(b.done)
		for {
			var msgs []jetstream.Msg
			select {
			case <-ctx.Done():
				return // what is unhandled is redelivered after the ack wait
			case msg := <-b.in:
				msgs = append(msgs, msg)
			}
		gather:
			for len(msgs) < size {
				select {
				case msg := <-b.in:
					msgs = append(msgs, msg)
				default:
					break gather
				}
			}
			handle(ctx, msgs)
		}
	}()
	return b
}

// add queues msg for the next batch; once ctx (the term's) has ended it drops it, to be
// redelivered after the ack wait.
func (b *batcher) add(ctx context.Context, msg jetstream.Msg) {
	select {
	case b.in <- msg:
	case <-ctx.Done():
	}
}

// close waits for the batcher, which stops when the term's context ends.
func (b *batcher) close() { <-b.done }

// flight tracks the asynchronous publishes of one batch, each made on behalf of one of the
// batch's messages (by index), with at most publishWindow of them unanswered at once. A message
// whose publishes were all stored has err nil.
type flight struct {
	ctx     context.Context
	pending []published
	failed  map[int]error
}

// published is one asynchronous publish and the index of the message it was made for.
type published struct {
	ack jetstream.PubAckFuture
	of  int
}

func newFlight(ctx context.Context) *flight { return &flight{ctx: ctx, failed: map[int]error{}} }

// publish makes one asynchronous publish for message of, first waiting for the oldest answers
// while the window is full. A publish that cannot be made fails its message.
func (f *flight) publish(of int, pub func() (jetstream.PubAckFuture, error)) {
	for len(f.pending) >= publishWindow {
		f.settleOldest()
	}
	ack, err := pub()
	if err != nil {
		f.fail(of, err)
		return
	}
	f.pending = append(f.pending, published{ack: ack, of: of})
}

// wait waits for the answer to every publish made.
func (f *flight) wait() {
	for len(f.pending) > 0 {
		f.settleOldest()
	}
}

// err is why a publish for message of failed, or nil; only final after wait.
func (f *flight) err(of int) error { return f.failed[of] }

// fail records err as message of's failure, keeping the first.
func (f *flight) fail(of int, err error) {
	if f.failed[of] == nil {
		f.failed[of] = err
	}
}

func (f *flight) settleOldest() {
	p := f.pending[0]
	f.pending = f.pending[1:]
	select {
	case <-p.ack.Ok():
	case err := <-p.ack.Err():
		f.fail(p.of, err)
	case <-f.ctx.Done():
		f.fail(p.of, f.ctx.Err())
	}
}

// readAll calls read for each key, readerLanes at a time, and returns what each call returned.
// Each is a leader round trip; made one after another they would add up.
func readAll[T any](ctx context.Context, keys []string, read func(ctx context.Context, key string) (T, error)) map[string]readResult[T] {
	out := make(map[string]readResult[T], len(keys))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, readerLanes)
	for _, key := range keys {
		sem <- struct{}{}
		wg.Go(func() { // owned: waited for below
			defer func() { <-sem }()
			v, err := read(ctx, key)
			mu.Lock()
			out[key] = readResult[T]{v: v, err: err}
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// readResult is one of readAll's reads.
type readResult[T any] struct {
	v   T
	err error
}
