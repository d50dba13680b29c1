package mesh

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/delivery"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/ledger"
)

// The actors of a delivery daemon's feed credentials.
const (
	membershipActor = "cotal_membership"
	// observerName names the system user that lists the account's connections for the feed.
	observerName = "cotal-membership-observer"
)

// Delivery is a delivery daemon of l's space on its held credentials: its own (delivery, for
// actor), and the membership feed's writer (membership-rw) and system observer (the account's
// connection list and its connect and disconnect events), each renewed at two thirds of life.
type Delivery struct {
	*delivery.Daemon
	held []*ledger.Held
}

// NewDelivery issues and connects a delivery daemon's credentials through l. Release lets them
// go once the daemon has stopped.
func NewDelivery(ctx context.Context, l *ledger.Ledger, actor string, life time.Duration, log *slog.Logger) (*Delivery, error) {
	dv := &Delivery{}
	own, err := l.Hold(ctx, ledger.Request{Profile: authority.ProfileDelivery, Name: actor, Expires: life}, log)
	if err != nil {
		return nil, err
	}
	dv.held = append(dv.held, own)
	writer, err := l.Hold(ctx, ledger.Request{Profile: authority.ProfileMembership, Name: membershipActor, Expires: life}, log)
	if err != nil {
		return nil, errors.Join(err, dv.Release())
	}
	dv.held = append(dv.held, writer)
	acct := l.Account()
	observer, err := l.HoldSystem(ctx, observerName, []string{jsapi.AccountConnz(acct)},
		[]string{jsapi.AccountConnect(acct), jsapi.AccountDisconnect(acct)}, life, log)
	if err != nil {
		return nil, errors.Join(err, dv.Release())
	}
	dv.held = append(dv.held, observer)
	dv.Daemon, err = delivery.New(own.Conn, delivery.Config{
		Space: l.Space(), Holder: own.Credential().Principal.String(), Log: log,
		Feed: &delivery.FeedConfig{Observer: observer.Conn, Account: acct, Writer: writer.Conn},
	})
	if err != nil {
		return nil, errors.Join(err, dv.Release())
	}
	return dv, nil
}

// Release lets the daemon's credentials go: connections closed, ledger credentials revoked.
func (dv *Delivery) Release() error {
	var errs []error
	for _, h := range dv.held {
		errs = append(errs, h.Release())
	}
	dv.held = nil
	return errors.Join(errs...)
}
