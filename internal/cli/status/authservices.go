package status

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/failover"
	"github.com/gocotal/cotal/wire"
)

// AuthServiceStatus is one authority node's auth service in user-auth mode, as it last recorded
// itself and as its exchange answers now. The field names are a stable interface.
type AuthServiceStatus struct {
	Node                string `json:"node"`
	Server              string `json:"server"`
	ExchangeURL         string `json:"exchangeUrl"`
	ManagerAuthorityURL string `json:"managerAuthorityUrl"`
	// Callout is "answering" when the node's callout was subscribed on a live connection at its
	// last record, made within authservice.NodeStale; "silent" otherwise.
	Callout string `json:"callout"`
	// Exchange is "answering" when the exchange's public face served its mesh document now,
	// "unreachable" otherwise.
	Exchange string    `json:"exchange"`
	SeenAt   time.Time `json:"seenAt"`
}

// The states of AuthServiceStatus.
const (
	stateAnswering   = "answering"
	stateSilent      = "silent"
	stateUnreachable = "unreachable"
)

// healthy reports whether both the callout and the exchange answer.
func (a AuthServiceStatus) healthy() bool {
	return a.Callout == stateAnswering && a.Exchange == stateAnswering
}

// authServices reports the auth service of every authority node of sp's mesh, from the records
// they keep in the user-auth store, checking each exchange's public face.
func authServices(ctx context.Context, o *Options, sp wire.Space) ([]AuthServiceStatus, error) {
	l, err := o.Ledger(ctx, sp)
	if err != nil {
		return nil, err
	}
	kv, err := l.UserAuthStore(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := authservice.ReadNodes(ctx, kv)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := make([]AuthServiceStatus, 0, len(recs))
	for _, r := range recs {
		a := AuthServiceStatus{Node: r.Node, Server: r.Server, ExchangeURL: r.ExchangeURL, ManagerAuthorityURL: r.ManagerAuthorityURL,
			Callout: stateSilent, Exchange: stateUnreachable, SeenAt: r.SeenAt}
		if r.Callout && r.Fresh(now) {
			a.Callout = stateAnswering
		}
		if exchange(ctx, r.ExchangeURL).State == Serving {
			a.Exchange = stateAnswering
		}
		out = append(out, a)
	}
	return out, nil
}

// renderAuthServices prints one line per auth service.
func renderAuthServices(w io.Writer, list []AuthServiceStatus) {
	for _, a := range list {
		fmt.Fprintf(w, "  auth service on %s: exchange %s %s, callout %s (recorded %s ago)\n",
			a.Node, a.ExchangeURL, a.Exchange, a.Callout, time.Since(a.SeenAt).Round(time.Second))
	}
}

// exchangeURLs lists own first, then each auth service's exchange, each once.
func exchangeURLs(own string, list []AuthServiceStatus) []string {
	urls := []string{own}
	for _, a := range list {
		urls = append(urls, a.ExchangeURL)
	}
	return failover.New(urls...).URLs()
}
