package delivery

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// term is one active term of the daemon: the context its handlers run with, cancelled when the
// term ends, and the count of handler bodies running. Handlers are called by nats.go on its own
// goroutines, so the term gates them: once end has begun, a handler returns at once, and end
// waits for those already running. Nothing a term started outlives it.
type term struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	ended   bool           // mu guards ended
	running sync.WaitGroup // handler bodies in flight; added to only under mu while !ended
}

func newTerm(parent context.Context) *term {
	ctx, cancel := context.WithCancel(parent)
	return &term{ctx: ctx, cancel: cancel}
}

// enter admits one handler body, which must then call leave; it refuses once the term has ended.
func (t *term) enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return false
	}
	t.running.Add(1)
	return true
}

func (t *term) leave() { t.running.Done() }

// end cancels the term's context, refuses new handler bodies and waits for the running ones.
func (t *term) end() {
	t.cancel()
	t.mu.Lock()
	t.ended = true
	t.mu.Unlock()
	t.running.Wait()
}

// handler returns h as a consumer's message handler run within the term. A message refused
// after the term has ended is left unacknowledged: it is redelivered after its ack wait.
func (t *term) handler(h func(ctx context.Context, msg jetstream.Msg)) jetstream.MessageHandler {
	return func(msg jetstream.Msg) {
		if !t.enter() {
			return
		}
		defer t.leave()
		h(t.ctx, msg)
	}
}

// stopConsuming stops a consumer's intake and waits until its handler has returned for good.
func stopConsuming(cc jetstream.ConsumeContext) {
	// Closed is taken before Stop: taken after, it may report a subscription already
	// unsubscribed as closed while its last handler call still runs.
	closed := cc.Closed()
	cc.Stop()
	<-closed
}

// pool runs jobs on a fixed number of worker goroutines with a bounded queue. submit never
// blocks: a full queue refuses the job, so a subscription handler can answer at once rather
// than stall the requests behind it. close waits for the workers, which first run what is
// queued.
type pool struct {
	jobs    chan func()
	mu      sync.Mutex
	closed  bool // mu guards closed; jobs is sent on and closed only under mu
	workers sync.WaitGroup
}

func newPool(workers, queue int) *pool {
	p := &pool{jobs: make(chan func(), queue)}
	for range workers {
		p.workers.Go(func() { // owned: close waits for it
			for job := range p.jobs {
				job()
			}
		})
	}
	return p
}

// submit queues job; errBusy when the queue is full, errNotServing once the pool is closed.
func (p *pool) submit(job func()) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errNotServing
	}
	select {
	case p.jobs <- job:
		return nil
	default:
		return errBusy
	}
}

// close refuses new jobs and waits until the workers have run every queued one.
func (p *pool) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.jobs)
	}
	p.mu.Unlock()
	p.workers.Wait()
}
