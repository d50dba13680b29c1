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
	// NKey is the user key a connection authenticated with by nkey alone.
	NKey string `json:"nkey"`
	// Tags are the tags of the connection's user JWT.
	Tags []string `json:"tags"`
	// Subscriptions are the subjects the connection subscribes, wildcards kept.
	Subscriptions []string `json:"subscriptions_list"`
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

// The waits for the servers' answers: the first, then each next. A server that runs alone says
// so in its answer, and then none is waited for.
const (
	firstAnswer = 5 * time.Second
	nextAnswer  = 500 * time.Millisecond
)

// List returns every connection of account on every server that answers, paging through each
// server's list on nc, a system-account connection: every server of a cluster answers the
// request with its own connections. A list it could not read to the end is an error, never a
// partial list.
func List(ctx context.Context, nc *nats.Conn, account string) ([]Conn, error) {
	var all []Conn
	totals := map[string]int{} // each server's count of the account's connections
	for page := range maxPages {
		offset := page * pageSize
		pages, err := listPage(ctx, nc, account, offset)
		if err != nil {
			return nil, err
		}
		more := false
		for _, p := range pages {
			if page == 0 {
				totals[p.server] = p.total
			} else if totals[p.server] <= offset {
				continue // a server whose list ended: its answer to a later page is empty
			}
			all = append(all, p.conns...)
			more = more || offset+len(p.conns) < totals[p.server] && len(p.conns) == pageSize
		}
		if !more {
			return all, nil
		}
	}
	return nil, fmt.Errorf("list the connections of %s: more than %d connections on a server", account, maxPages*pageSize)
}

// serverPage is one server's page of an account's connections.
type serverPage struct {
	server string // the server's id
	total  int    // the account's connections on the server
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

// listPage reads every server's page of account's connections at offset, with each server's
// count of them.
func listPage(ctx context.Context, nc *nats.Conn, account string, offset int) ([]serverPage, error) {
	req, _ := json.Marshal(map[string]any{"subscriptions": true, "auth": true, "offset": offset, "limit": pageSize}) // always encodes
	alone := func(reply []byte) bool {
		var a connzAnswer
		return json.Unmarshal(reply, &a) == nil && a.Server != nil && a.Server.Cluster == ""
	}
	replies, err := dial.Gather(ctx, nc, jsapi.AccountConnz(account), req, firstAnswer, nextAnswer, alone)
	if err != nil {
		return nil, fmt.Errorf("list the connections of %s: %w", account, err)
	}
	out := make([]serverPage, 0, len(replies))
	for _, r := range replies {
		var a connzAnswer
		switch err := json.Unmarshal(r, &a); {
		case err != nil:
			return nil, fmt.Errorf("list the connections of %s: the broker's answer %q is not a connection list: %w", account, r, err)
		case a.Error != nil:
			return nil, fmt.Errorf("list the connections of %s: the broker refused (%d): %s", account, a.Error.Code, a.Error.Description)
		case a.Data == nil || a.Server == nil:
			return nil, fmt.Errorf("list the connections of %s: the broker's answer %q holds no list", account, r)
		}
		out = append(out, serverPage{server: a.Server.ID, total: a.Data.Total, conns: a.Data.Connections})
	}
	return out, nil
}
