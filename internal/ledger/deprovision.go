package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// deprovision tears down an agent lifecycle's durables and ACL row under a deprovisioner
// credential pinned to it by name. Missing pieces are not an error; a JetStream API that did not
// answer is asked again.
func (l *Ledger) deprovision(ctx context.Context, lc wire.Lifecycle) error {
	return jsapi.RetryUnanswered(ctx, func(ctx context.Context) error { return l.deprovisionOnce(ctx, lc) })
}

func (l *Ledger) deprovisionOnce(ctx context.Context, lc wire.Lifecycle) error {
	p, err := wire.NewPrincipal(wire.DevOwner, deprovisionerActor)
	if err != nil {
		return err
	}
	cred, err := l.keys.Mint(authority.MintRequest{Profile: authority.ProfileDeprovisioner, Grant: authority.Grant{Principal: p, Target: lc}})
	if err != nil {
		return err
	}
	return l.withOneShot(ctx, cred, func(_ *nats.Conn, js jetstream.JetStream) error { return l.deprovisionWith(ctx, js, lc) })
}

// deprovisionWith deletes lc's durables and purges its ACL row through js.
func (l *Ledger) deprovisionWith(ctx context.Context, js jetstream.JetStream, lc wire.Lifecycle) error {
	var errs []error
	for _, c := range []struct{ stream, name string }{{l.sp.DMStream(), wire.DMDurable(lc)}, {l.sp.DLVStream(), wire.DLVDurable(lc)}} {
		if err := js.DeleteConsumer(ctx, c.stream, c.name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			errs = append(errs, fmt.Errorf("delete %s: %w", c.name, err))
		}
	}
	kv, err := js.KeyValue(ctx, string(meshwire.ACLBucket(l.sp)))
	if err == nil {
		err = kv.Purge(ctx, meshwire.ACLKey(lc))
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("purge the ACL row of %s: %w", lc, err))
	}
	return errors.Join(errs...)
}
