package authservice_test

import (
	"context"
	"fmt"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/wire"
)

// asBearer connects to url as a person's CLI does in user-auth mode (SPEC §10): with the space's
// shared sentinel creds and a bearer, which the callout checks and turns into a credential keyed by
// a fresh client nonce, the connection's name and inbox. It never reconnects, so a test sees the
// broker drop the connection when the bearer expires.
func asBearer(ctx context.Context, url string, sentinelCreds []byte, bearer string, opts ...nats.Option) (*nats.Conn, error) {
	token, err := jwt.ParseDecoratedJWT(sentinelCreds)
	if err != nil {
		return nil, fmt.Errorf("read the sentinel creds: %w", err)
	}
	kp, err := jwt.ParseDecoratedNKey(sentinelCreds)
	if err != nil {
		return nil, fmt.Errorf("read the sentinel creds: %w", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, err
	}
	conn := wire.NewConnID()
	base := []nats.Option{
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}),
		nats.UserJWTAndSeed(token, string(seed)),
		nats.Token(bearer),
		nats.Name(string(conn)),
		nats.CustomInboxPrefix(conn.InboxPrefix()),
		// A refused bearer stays refused: do not retry it.
		nats.NoReconnect(),
	}
	return dial.Anonymous(ctx, url, append(base, opts...)...)
}
