package jsapi

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
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
