package cotal

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/wire"
)

// bearerWait bounds one fetch of a bearer at a connect.
const bearerWait = 30 * time.Second

// bearerAuth is how a client connects in user-auth mode.
type bearerAuth struct {
	sentinelJWT, sentinelSeed string
	token                     func(ctx context.Context) (string, error)
	grant                     Grant
}

// WithBearer authenticates in user-auth mode (SPEC §10), as a managed agent or a person: with the
// space's shared sentinel creds (which alone may do nothing) and a bearer that token returns. The
// mesh's auth callout checks the bearer at every connect and admits the connection for as long as
// the bearer lives (minutes); token is asked again at every reconnect, so the holder renews by
// returning a fresh one. g describes what the bearer's ledger row grants (a managed agent's launch
// material carries it): its principal, space, lifecycle, role and channels. The broker enforces the
// row whatever g says; the client uses g to refuse early what would be refused. WithBearer
// excludes WithCreds.
func WithBearer(sentinelCreds []byte, g Grant, token func(ctx context.Context) (string, error)) Option {
	return func(o *options) error {
		sjwt, seed, err := splitCreds(sentinelCreds)
		if err != nil {
			return fmt.Errorf("%w: sentinel creds: %w", ErrInvalidOption, err)
		}
		if _, err := nkeys.FromSeed([]byte(seed)); err != nil {
			return fmt.Errorf("%w: sentinel creds: %w", ErrInvalidOption, err)
		}
		switch {
		case token == nil:
			return fmt.Errorf("%w: a bearer source is required", ErrInvalidOption)
		case g.Principal.IsZero():
			return fmt.Errorf("%w: the grant names no principal", ErrInvalidOption)
		}
		if _, err := wire.ParseSpace(string(g.Space)); err != nil {
			return fmt.Errorf("%w: the grant's space: %w", ErrInvalidOption, err)
		}
		if _, err := wire.ParseLifecycleUID(string(g.Lifecycle)); err != nil {
			return fmt.Errorf("%w: the grant's lifecycle: %w", ErrInvalidOption, err)
		}
		g.jwt, g.seed, g.UserKey, g.Expires = "", "", "", time.Time{}
		o.bearer = &bearerAuth{sentinelJWT: sjwt, sentinelSeed: seed, token: token, grant: g}
		return nil
	}
}
