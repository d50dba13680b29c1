package cotal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/wire"
)

// Pipelined sends publish without waiting for the stream's acknowledgement, so one sender is not
// held to one round trip per message: up to the client's send window (WithSendWindow) await
// theirs at once. Each message keeps what Send gives it: its id as Nats-Msg-Id (a retry under
// the same id is stored once), the refusals before publishing, and a permission violation the
// broker reports for its subject surfaced as ErrNotPermitted, by its own Pending.

// asyncAckWait bounds how long a pipelined send waits for its acknowledgement before it fails,
// as JetStream's own request timeout bounds a send that waits.
const asyncAckWait = 5 * time.Second

// asyncStallWait bounds how long a pipelined send waits for a slot in a full window when its
// context has no deadline.
const asyncStallWait = 30 * time.Second

// ErrWindowFull is matched by the error of a pipelined send that found the send window full
// until its context's deadline (or asyncStallWait).
var ErrWindowFull = errors.New("the send window stayed full")

// Pending is a message published without waiting for its acknowledgement. Wait returns the
// outcome; it is safe to call from several goroutines, and more than once.
type Pending struct {
	c       *Client
	id      string
	subject string
	fut     jetstream.PubAckFuture

	settled chan struct{} // closed once sent or err is set
	once    sync.Once
	sent    *Sent
	err     error
}

// ID returns the message's id.
func (p *Pending) ID() string { return p.id }

// Wait waits until the stream acknowledges the message, and returns where it is stored, or why it
// was not (ErrNotPermitted when the broker refused its subject); or until ctx ends, which leaves
// the message in flight: Wait again to learn its outcome.
func (p *Pending) Wait(ctx context.Context) (*Sent, error) {
	select {
	case ack := <-p.fut.Ok():
		p.settle(&Sent{ID: p.id, Stream: ack.Stream, Seq: ack.Sequence, Duplicate: ack.Duplicate}, nil)
	case err := <-p.fut.Err():
		p.settle(nil, p.c.publishError("send "+p.id, p.subject, err))
	case <-p.settled:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	<-p.settled
	return p.sent, p.err
}

func (p *Pending) settle(sent *Sent, err error) {
	p.once.Do(func() {
		p.sent, p.err = sent, err
		close(p.settled)
	})
}

// SendAsync is Send without waiting for the acknowledgement: it completes and checks m as Send
// does, publishes it once the send window has a free slot (waiting for one until ctx's deadline),
// and returns its Pending.
func (c *Client) SendAsync(ctx context.Context, m *wire.CotalMessage) (*Pending, error) {
	return c.sendAsync(ctx, m, nil)
}

// PostAsync is Post without waiting for the acknowledgement (SendAsync).
func (c *Client) PostAsync(ctx context.Context, channel string, parts []wire.Part, opts ...SendOption) (*Pending, error) {
	return c.sendAsync(ctx, &wire.CotalMessage{Channel: channel, Parts: parts}, opts)
}

// DirectMessageAsync is DirectMessage without waiting for the acknowledgement (SendAsync).
func (c *Client) DirectMessageAsync(ctx context.Context, to wire.Principal, parts []wire.Part, opts ...SendOption) (*Pending, error) {
	if to.IsZero() {
		return nil, &wire.ValidationError{Field: "to", Rule: "is required"}
	}
	return c.sendAsync(ctx, &wire.CotalMessage{To: to.String(), Parts: parts}, opts)
}

// AskAsync is Ask without waiting for the acknowledgement (SendAsync).
func (c *Client) AskAsync(ctx context.Context, role string, parts []wire.Part, opts ...SendOption) (*Pending, error) {
	return c.sendAsync(ctx, &wire.CotalMessage{ToService: role, Parts: parts}, opts)
}

func (c *Client) sendAsync(ctx context.Context, m *wire.CotalMessage, opts []SendOption) (*Pending, error) {
	subject, data, err := c.prepare(m, opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	stall := asyncStallWait
	if dl, ok := ctx.Deadline(); ok {
		stall = time.Until(dl)
	}
	fut, err := c.pipe.PublishAsync(subject, data, jetstream.WithMsgID(m.ID), jetstream.WithStallWait(max(stall, time.Millisecond)))
	if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
		return nil, fmt.Errorf("send %s: %w (%d awaiting their acknowledgement)", m.ID, ErrWindowFull, c.opts.sendWindow)
	}
	if err != nil {
		return nil, c.publishError("send "+m.ID, subject, err)
	}
	return &Pending{c: c, id: m.ID, subject: subject, fut: fut, settled: make(chan struct{})}, nil
}
