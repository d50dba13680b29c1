package ledger

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
)

// withOneShot connects a one-shot credential of the ledger's own, which does not reconnect, runs fn
// on its JetStream context and closes the connection.
func (l *Ledger) withOneShot(ctx context.Context, cred *authority.Credential, fn func(nc *nats.Conn, js jetstream.JetStream) error) error {
	nc, err := dial.As(ctx, l.url, cred, nats.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	return fn(nc, js)
}
