// Package dial connects the mesh's own processes to the broker: as a minted credential, with the
// inbox prefix its grant allows, or without credentials on an open mesh. Every connection checks
// the broker's version floor. Agents connect through the SDK (cotal.Connect) instead.
package dial

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/wire"
)

// As connects to url with cred, with the inbox prefix its grant allows set before anything else
// (SPEC §10). nats.go's asynchronous error reports are dropped unless opts set a handler: a
// short-lived connection may trip refusals it does not care about (an ordered consumer cleaning
// itself up without the grant to).
func As(ctx context.Context, url string, cred *authority.Credential, opts ...nats.Option) (*nats.Conn, error) {
	base, err := credOptions(cred, func() (string, error) { return cred.JWT, nil })
	if err != nil {
		return nil, err
	}
	return Anonymous(ctx, url, append(base, opts...)...)
}

// credOptions are the options of a connection as cred, presenting the JWT jwtFn returns.
func credOptions(cred *authority.Credential, jwtFn nats.UserJWTHandler) ([]nats.Option, error) {
	kp, err := jwt.ParseDecoratedUserNKey(cred.Creds)
	if err != nil {
		return nil, fmt.Errorf("read the seed of a %s credential: %w", cred.Profile, err)
	}
	return []nats.Option{
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}),
		nats.UserJWT(jwtFn, kp.Sign),
		nats.CustomInboxPrefix(wire.ConnID(cred.PublicKey).InboxPrefix()),
		nats.Name(cred.Principal.String()),
	}, nil
}

// Anonymous connects to url with opts alone: without credentials on an open mesh, or with the
// caller's own.
func Anonymous(ctx context.Context, url string, opts ...nats.Option) (*nats.Conn, error) {
	if d, ok := ctx.Deadline(); ok {
		opts = append(opts, nats.Timeout(time.Until(d)))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", url, err)
	}
	if err := wire.CheckServerVersion(nc.ConnectedServerVersion()); err != nil {
		nc.Close()
		return nil, err
	}
	return nc, nil
}
