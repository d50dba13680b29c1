package authservice_test

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/dial"
)

// asBearer connects to url as a person's CLI does in user-auth mode (SPEC §10): with the space's
// shared sentinel creds and a bearer, which the callout checks and turns into a credential keyed by
// a fresh client nonce, the connection's name and inbox. It never reconnects, so a test sees the
// broker drop the connection when the bearer expires.
func asBearer(ctx context.Context, url string, sentinelCreds []byte, bearer string, opts ...nats.Option) (*nats.Conn, error) {
	// A refused bearer stays refused: do not retry it.
	opts = append([]nats.Option{nats.NoReconnect()}, opts...)
	return dial.Bearer(ctx, url, sentinelCreds, func(context.Context) (string, error) { return bearer, nil }, opts...)
}
