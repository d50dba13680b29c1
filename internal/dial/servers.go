package dial

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/jsapi"
)

// Servers sends the system-account request subject to every server of the cluster at url, as a
// system user of kr minted for it alone, and returns the replies (ServersOn).
func Servers(ctx context.Context, kr *authority.Keyring, url, subject string, first, more time.Duration) ([][]byte, error) {
	sys, err := kr.MintSystemUser("cotal-servers", []string{subject}, nil, time.Minute)
	if err != nil {
		return nil, err
	}
	nc, err := As(ctx, url, sys)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	return ServersOn(ctx, nc, subject, first, more)
}

// ServersOn sends the request subject on nc, a system user's connection, to every server that
// answers it, and returns the replies: it waits up to first for the first (a round trip through
// the cluster), then up to more after each. No reply within first is an error, and a subject no
// server answers is nats.ErrNoResponders, at once.
func ServersOn(ctx context.Context, nc *nats.Conn, subject string, first, more time.Duration) ([][]byte, error) {
	return Gather(ctx, nc, subject, nil, first, more, nil)
}

// Gather is ServersOn with a request body, data, and a test of the replies so far: once enough
// reports that they are all there can be (a server that runs alone says so in its reply; the
// caller knows which servers owe one), Gather returns without waiting out more. enough may be
// nil.
func Gather(ctx context.Context, nc *nats.Conn, subject string, data []byte, first, more time.Duration, enough func(replies [][]byte) bool) ([][]byte, error) {
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe() //nolint:errcheck // the connection's own close reaps it too
	if err := nc.PublishRequest(subject, inbox, data); err != nil {
		return nil, err
	}
	var out [][]byte
	for wait := first; ; wait = more {
		wctx, cancel := context.WithTimeout(ctx, wait)
		msg, err := sub.NextMsgWithContext(wctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && len(out) > 0 && ctx.Err() == nil {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", subject, err)
		}
		if len(out) == 0 && len(msg.Data) == 0 && msg.Header.Get(jsapi.StatusHeader) == jsapi.NoResponders {
			return nil, fmt.Errorf("%s: %w", subject, nats.ErrNoResponders)
		}
		out = append(out, msg.Data)
		if enough != nil && enough(out) {
			return out, nil
		}
	}
}
