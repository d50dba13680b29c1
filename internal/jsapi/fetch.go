package jsapi

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// fetchPatience bounds how long Fetch waits (about 2 s in all) for a new consumer's pull requests
// to find it.
var fetchPatience = Patience{Waits: 12, Step: 25 * time.Millisecond}

// Fetch is cons.Fetch(n, opts...) with the batch read out: its messages, and the error that ended
// it. It waits out a consumer created a moment ago on a cluster: the consumer lives on its
// stream's leader, and until the interest its pull requests need has reached the node this
// client is connected to, they are answered with no responders (a 503), which nats.go's own
// ordered consumer also treats as passing. A batch that brought messages is returned as it is.
func Fetch(ctx context.Context, cons jetstream.Consumer, n int, opts ...jetstream.FetchOpt) ([]jetstream.Msg, error) {
	var msgs []jetstream.Msg
	var batchErr error // how a batch that brought messages ended, returned with them
	err := Answered(ctx, fetchPatience, func() error {
		batch, err := cons.Fetch(n, opts...)
		if err != nil {
			return err
		}
		msgs = msgs[:0]
		for m := range batch.Messages() {
			msgs = append(msgs, m)
		}
		batchErr = batch.Error()
		if len(msgs) > 0 {
			return nil
		}
		return batchErr
	})
	if len(msgs) > 0 {
		return msgs, batchErr
	}
	return nil, err
}
