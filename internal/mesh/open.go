package mesh

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
)

// provisionOpen provisions a space on an open (no-auth) broker.
func provisionOpen(ctx context.Context, url string, sp wire.Space, defaults wire.ChannelDefaults) (*space.Report, error) {
	nc, err := dial(ctx, url)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream on %s: %w", url, err)
	}
	return space.Provision(ctx, js, sp, defaults)
}
