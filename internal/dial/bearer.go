package dial

import (
	"context"
	"fmt"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/wire"
)

// AsBearer connects to url in user-auth mode (SPEC §10): with the space's shared sentinel creds
// and a bearer the auth service issued, which its callout checks and turns into a credential
// keyed by a fresh client nonce. The nonce is the connection's name, and its inbox prefix the one
// that credential allows. A bearer lives minutes: when it expires the broker closes the
// connection, and its holder connects again with a fresh one.
func AsBearer(ctx context.Context, url string, sentinelCreds []byte, bearer string, opts ...nats.Option) (*nats.Conn, error) {
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
	return Anonymous(ctx, url, append(base, opts...)...)
}
