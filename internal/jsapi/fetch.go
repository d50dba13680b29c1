package jsapi

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// noResponderWaits bounds how often Fetch waits, 25 ms longer each time (under 2 s in all), for a
// new consumer's pull requests to find it.
const noResponderWaits = 12

// Fetch is cons.Fetch(n, opts...) with the batch read out: its messages, and the error that ended
// it. It waits out a consumer created a moment ago on a cluster: the consumer lives on its
// stream's leader, and until the interest its pull requests need has reached the node this
// client is connected to, they are answered with no responders (a 503), which nats.go's own
// ordered consumer also treats as passing. A batch that brought messages is returned as it is.
func Fetch(ctx context.Context, cons jetstream.Consumer, n int, opts ...jetstream.FetchOpt) ([]jetstream.Msg, error) {
	for waits := 0; ; waits++ {
		batch, err := cons.Fetch(n, opts...)
		if err != nil {
			return nil, err
		}
		var msgs []jetstream.Msg
		for m := range batch.Messages() {
			msgs = append(msgs, m)
		}
		err = batch.Error()
		if len(msgs) > 0 || !errors.Is(err, nats.ErrNoResponders) || waits == noResponderWaits {
			return msgs, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(waits+1) * 25 * time.Millisecond):
		}
	}
}
