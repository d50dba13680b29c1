package jsapi

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Patience bounds how long Answered asks again: up to Waits times, Step longer each time.
type Patience struct {
	Waits int
	Step  time.Duration
}

// Answered calls ask until it returns something other than nats.ErrNoResponders (or a Request
// that got no answer), waiting between tries as p allows, and returns its last result. A
// JetStream API request finds no responders for a moment on a healthy broker: while the broker
// re-imports the account's API after applying new claims, and on a cluster node that has not yet
// heard from the meta leader or from a consumer's stream leader.
func Answered(ctx context.Context, p Patience, ask func() error) error {
	for waits := 0; ; waits++ {
		err := ask()
		if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, errNoAnswer) || waits == p.Waits {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Duration(waits+1) * p.Step):
		}
	}
}

// unansweredAttempts bounds how often RetryUnanswered runs an operation, and attemptWait how long
// one attempt may wait for the broker.
const (
	unansweredAttempts = 4
	attemptWait        = 5 * time.Second
)

// RetryUnanswered runs op, idempotent, again while it fails only because the JetStream API did not
// answer, with a doubling wait: while the broker applies an account update (a revocation pushed
// for another lifecycle) the account's JetStream API can briefly have no responders, or drop a
// request, and a loaded cluster can take longer than one attempt's attemptWait to answer (a
// consumer created while its stream's leader is busy).
func RetryUnanswered(ctx context.Context, op func(ctx context.Context) error) error {
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, attemptWait)
		err := op(actx)
		cancel()
		unanswered := errors.Is(err, nats.ErrNoResponders) || (errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil)
		if err == nil || attempt == unansweredAttempts || !unanswered {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// PublishUnanswered reports whether a JetStream publish failed for want of an answer: no ack in
// time, no stream answering, or an earlier copy with its message id still being committed. Sending
// it again (with the same message id, or create-only) is safe and may succeed.
func PublishUnanswered(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.As(err, &apiErr) && apiErr.ErrorCode == jsDuplicateInProcess
}

// jsDuplicateInProcess is the JetStream error a write gets while an earlier copy with its message
// id is still being committed.
const jsDuplicateInProcess jetstream.ErrorCode = 10158
