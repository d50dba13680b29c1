// Package dial connects the mesh's own processes to the broker: as a minted credential, with the
// inbox prefix its grant allows, or without credentials on an open mesh. Every connection checks
// the broker's version floor. Agents connect through the SDK (cotal.Connect) instead.
package dial

import (
	"context"
	"fmt"
	"sync"
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

// bearerWait bounds the fetch of one bearer at a connect or reconnect.
const bearerWait = 30 * time.Second

// Bearer connects to url in user-auth mode (SPEC §10): as the shared deny-all sentinel of
// sentinelCreds, presenting at every connect and reconnect a fresh bearer from token as the auth
// token, under a client nonce that names the connection and its inbox, which the callout's
// credential is keyed by.
func Bearer(ctx context.Context, url string, sentinelCreds []byte, token func(ctx context.Context) (string, error), opts ...nats.Option) (*nats.Conn, error) {
	sjwt, err := jwt.ParseDecoratedJWT(sentinelCreds)
	if err != nil {
		return nil, fmt.Errorf("sentinel creds: %w", err)
	}
	kp, err := jwt.ParseDecoratedNKey(sentinelCreds)
	if err != nil {
		return nil, fmt.Errorf("sentinel creds: %w", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, fmt.Errorf("sentinel creds: %w", err)
	}
	conn := wire.NewConnID()
	var mu sync.Mutex
	var tokenErr error // the last bearer fetch's, reported with a refused connect
	base := []nats.Option{
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}),
		nats.UserJWTAndSeed(sjwt, string(seed)),
		nats.Name(string(conn)),
		nats.CustomInboxPrefix(conn.InboxPrefix()),
		nats.TokenHandler(func() string {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bearerWait)
			defer cancel()
			tok, err := token(ctx)
			mu.Lock()
			tokenErr = err
			mu.Unlock()
			return tok // an empty one is refused at the connect
		}),
	}
	nc, err := Anonymous(ctx, url, append(base, opts...)...)
	if err != nil {
		mu.Lock()
		defer mu.Unlock()
		if tokenErr != nil {
			return nil, fmt.Errorf("%w: no bearer to present: %w", err, tokenErr)
		}
		return nil, err
	}
	return nc, nil
}
