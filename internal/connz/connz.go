// Package connz reads the broker's view of an account's connections: the system account's
// connection list ($SYS.REQ.ACCOUNT.<account>.CONNZ), with each connection's subscriptions and
// the principal it acts as, as every server of a cluster lists its own. Only a system-account
// connection allowed that request can read it.
package connz

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/wire"
)

// Conn is one connection in the broker's list.
type Conn struct {
	// AuthorizedUser is the user the connection authenticated as: a statically minted
	// credential's user key, or the name a callout-minted credential carries.
	AuthorizedUser string `json:"authorized_user"`
	// Tags are the tags of the connection's user JWT.
	Tags []string `json:"tags"`
	// Subscriptions are the subjects the connection subscribes, wildcards kept.
	Subscriptions []string `json:"subscriptions_list"`
	// CID is the connection's id on its server.
	CID uint64 `json:"cid"`
	// Server is the id of the server that lists the connection.
	Server string `json:"-"`
}

// Principal returns the principal the connection acts as, and false when it names none: the
// principal tag of a statically minted credential, or else an authorized user in a principal's
// name-form "<owner>-<actor>", as a callout-minted credential carries it (the broker reports no
// tags for those). A principal whose owner is not a principal owner (a derived owner or the local
// one) does not count: an nkey-shaped owner is never taken for a principal.
func (c Conn) Principal() (wire.Principal, bool) {
	if p, ok := PrincipalOfTags(c.Tags); ok {
		return p, true
	}
	owner, actor, ok := strings.Cut(c.AuthorizedUser, "-")
	if !ok {
		return wire.Principal{}, false
	}
	return principal(owner + "." + actor)
}

// PrincipalOfTags returns the principal a user JWT's principal tag names, and false when no tag
// names a principal with a principal owner.
func PrincipalOfTags(tags []string) (wire.Principal, bool) {
	for _, t := range tags {
		if s, ok := strings.CutPrefix(t, authority.TagPrincipal); ok {
			return principal(s)
		}
	}
	return wire.Principal{}, false
}

func principal(dotForm string) (wire.Principal, bool) {
	p, err := wire.ParsePrincipal(dotForm)
	if err != nil || !p.HasPrincipalOwner() {
		return wire.Principal{}, false
	}
	return p, true
}

// pageSize is how many connections one request asks of a server (the broker's default), and
// maxPages bounds how many pages List reads before it gives up rather than report a partial list.
const (
	pageSize = 1024
	maxPages = 64
)

// The waits for the servers' answers. A census (a one-connection page without details, small
// and quick) finds the servers and what each holds: the first answer, then each next, but none
// once a server says it runs alone. A page of details (up to a user JWT per connection) may take
// a loaded server a while to build; it is awaited from every server the census found.
const (
	firstAnswer = 5 * time.Second
	nextAnswer  = 500 * time.Millisecond
	pageAnswer  = 15 * time.Second
)

// List returns every connection of account on every server that answers, paging through each
// server's list on nc, a system-account connection: every server of a cluster answers the
// request with its own connections. A list it could not read to the end is an error, never a
// partial list.
func List(ctx context.Context, nc *nats.Conn, account string) ([]Conn, error) {
	conns, _, err := list(ctx, nc, account, []query{{}}, 0)
	return conns, err
}

// Subscribing is List of only the connections holding a subscription that collides with subject
// (each server filters its own list): what a reader of those subscriptions needs, without the
// details of every other connection, a user JWT each, which made listing a mesh of thousands
// of agents cost more than their joining it.
func Subscribing(ctx context.Context, nc *nats.Conn, account, subject string) ([]Conn, error) {
	conns, _, err := list(ctx, nc, account, []query{{subject: subject}}, 0)
	return conns, err
}

// OfUsers returns the connections of account that authenticated as one of the user keys, on
// every server that answers (each server filters its own list), and how many servers answered.
// expect, when not 0, is how many servers the caller knows to be up: the census stops waiting
// once that many answered.
func OfUsers(ctx context.Context, nc *nats.Conn, account string, userKeys []string, expect int) (conns []Conn, servers int, err error) {
	if len(userKeys) == 0 {
		return nil, 0, nil
	}
	filters := make([]query, len(userKeys))
	for i, key := range userKeys {
		filters[i].user = key
	}
	return list(ctx, nc, account, filters, expect)
}

// list reads every answering server's list of account's connections, once for each of filters
// (its user or subject; neither: all of them). A census finds the servers and how many
// connections each holds; then each server's pages are read until its list ends. A server the
// census missed but that answers a first page is read too. A server that does not answer a page
// it owes is an error.
func list(ctx context.Context, nc *nats.Conn, account string, filters []query, expect int) ([]Conn, int, error) {
	census, err := gather(ctx, nc, account, query{limit: 1}, firstAnswer, nextAnswer, func(got []serverPage) bool {
		return len(got) == 1 && got[0].alone || expect > 0 && len(got) >= expect
	})
	if err != nil {
		return nil, 0, err
	}
	held := map[string]int{} // each server's count of the account's connections
	for _, p := range census {
		held[p.server] = p.total
	}
	var all []Conn
	for _, filter := range filters {
		conns, err := pages(ctx, nc, account, filter, held)
		if err != nil {
			return nil, 0, err
		}
		all = append(all, conns...)
	}
	return all, len(held), nil
}

// pages reads each server's pages of account's connections, only those filter's user or subject
// selects when it names one, until its list ends; held is each server's count of the account's
// connections (a filter need not lower the count a server reports, so a short page is what ends
// a filtered list). A server that held none owes nothing; one that answers a first page without
// being in held joins it.
func pages(ctx context.Context, nc *nats.Conn, account string, filter query, held map[string]int) ([]Conn, error) {
	owed := map[string]int{} // each server's count of the connections still to read
	for server, n := range held {
		owed[server] = n
	}
	var all []Conn
	for page := range maxPages {
		offset := page * pageSize
		want := map[string]bool{}
		for server, n := range owed {
			if n > 0 {
				want[server] = true
			}
		}
		if len(want) == 0 {
			return all, nil
		}
		q := filter
		q.offset, q.limit, q.details = offset, pageSize, true
		got, err := gather(ctx, nc, account, q, pageAnswer, pageAnswer, func(got []serverPage) bool {
			n := 0
			for _, p := range got {
				if want[p.server] {
					n++
				}
			}
			return n == len(want)
		})
		if err != nil {
			return nil, err
		}
		for _, p := range got {
			_, known := held[p.server]
			switch {
			case !known && page == 0 && len(p.conns) > 0:
				held[p.server] = p.total // missed by the census: its list is read from its start
			case !want[p.server]:
				continue // a server whose list ended, or one first heard after its start
			}
			delete(want, p.server)
			all = append(all, p.conns...)
			if len(p.conns) < pageSize {
				owed[p.server] = 0
			} else {
				owed[p.server] = max(p.total-offset-len(p.conns), 0)
			}
		}
		for server := range want {
			return nil, fmt.Errorf("list the connections of %s: server %s did not answer for its connections from %d", account, server, offset)
		}
	}
	return nil, fmt.Errorf("list the connections of %s: more than %d connections on a server", account, maxPages*pageSize)
}

// query is one request of an account's connection list.
type query struct {
	user          string // only this user's connections, when set
	subject       string // only connections holding a subscription colliding with it, when set
	offset, limit int
	details       bool // each connection's subscriptions, user and tags
}

// serverPage is one server's page of an account's connections.
type serverPage struct {
	server string // the server's id
	alone  bool   // the server is in no cluster: no other answers
	total  int    // the account's connections on the server (a filter does not lower it)
	conns  []Conn
}

// connzAnswer is a server's answer to an account's connection-list request.
type connzAnswer struct {
	Server *struct {
		ID      string `json:"id"`
		Cluster string `json:"cluster"`
	} `json:"server"`
	Data *struct {
		Total       int    `json:"total"`
		Connections []Conn `json:"connections"`
	} `json:"data"`
	Error *struct {
		Code        int    `json:"code"`
		Description string `json:"description"`
	} `json:"error"`
}

// gather sends q to every server and reads their pages: the first within first, each next within
// more, until enough reports the pages so far are all there are.
func gather(ctx context.Context, nc *nats.Conn, account string, q query, first, more time.Duration, enough func([]serverPage) bool) ([]serverPage, error) {
	body := map[string]any{"offset": q.offset, "limit": q.limit}
	if q.details {
		body["subscriptions"], body["auth"] = true, true
	}
	if q.subject != "" {
		body["filter_subject"] = q.subject
	}
	if q.user != "" {
		body["user"] = q.user
	}
	req, _ := json.Marshal(body) // always encodes
	var pages []serverPage
	var bad error
	_, err := dial.Gather(ctx, nc, jsapi.AccountConnz(account), req, first, more, func(replies [][]byte) bool {
		p, err := decodePage(account, replies[len(replies)-1])
		if err != nil {
			bad = err
			return true
		}
		pages = append(pages, p)
		return enough(pages)
	})
	switch {
	case bad != nil:
		return nil, bad
	case err != nil:
		return nil, fmt.Errorf("list the connections of %s: %w", account, err)
	}
	return pages, nil
}

// decodePage reads one server's answer.
func decodePage(account string, r []byte) (serverPage, error) {
	var a connzAnswer
	switch err := json.Unmarshal(r, &a); {
	case err != nil:
		return serverPage{}, fmt.Errorf("list the connections of %s: the broker's answer %q is not a connection list: %w", account, r[:min(len(r), 200)], err)
	case a.Error != nil:
		return serverPage{}, fmt.Errorf("list the connections of %s: the broker refused (%d): %s", account, a.Error.Code, a.Error.Description)
	case a.Data == nil || a.Server == nil:
		return serverPage{}, fmt.Errorf("list the connections of %s: the broker's answer %q holds no list", account, r[:min(len(r), 200)])
	}
	for i := range a.Data.Connections {
		a.Data.Connections[i].Server = a.Server.ID
	}
	return serverPage{server: a.Server.ID, alone: a.Server.Cluster == "", total: a.Data.Total, conns: a.Data.Connections}, nil
}
