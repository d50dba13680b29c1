package jsapi

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
)

// requestWaits bounds how often Request waits, 50 ms longer each time (under 1.1 s in all), for
// the JetStream API to answer again.
const requestWaits = 6

// Request sends one JetStream API request on nc and returns its reply. The account's JetStream API
// is a service the broker imports from its system account, and the broker drops and re-adds that
// import while it applies new account claims (every revocation push is one): a request in that
// moment has no responders, so Request asks again, a few times within ctx, before it reports
// nats.ErrNoResponders.
func Request(ctx context.Context, nc *nats.Conn, subject string, body []byte) (*nats.Msg, error) {
	for waits := 0; ; waits++ {
		msg, err := nc.RequestWithContext(ctx, subject, body)
		if !errors.Is(err, nats.ErrNoResponders) || waits == requestWaits {
			return msg, err
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(err, ctx.Err())
		case <-time.After(time.Duration(waits+1) * 50 * time.Millisecond):
		}
	}
}
