// Package connz reads the broker's view of an account's connections: the system account's
// connection list ($SYS.REQ.ACCOUNT.<account>.CONNZ), with each connection's subscriptions and
// the principal it acts as. Only a system-account connection allowed that request can read it.
package connz

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/authority"
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

// pageSize is how many connections one request asks for (the broker's default), and maxPages
// bounds how many pages List reads before it gives up rather than report a partial list.
const (
	pageSize = 1024
	maxPages = 64
)

// List returns every connection of account, paging through the broker's list on nc, a
// system-account connection. It reads one broker's list: a cluster's other servers are not
// asked. A list it could not read to the end is an error, never a partial list.
func List(ctx context.Context, nc *nats.Conn, account string) ([]Conn, error) {
	var all []Conn
	for page := range maxPages {
		conns, total, err := listPage(ctx, nc, account, page*pageSize)
		if err != nil {
			return nil, err
		}
		all = append(all, conns...)
		if len(conns) < pageSize || page*pageSize+len(conns) >= total {
			return all, nil
		}
	}
	return nil, fmt.Errorf("list the connections of %s: more than %d connections", account, maxPages*pageSize)
}

// listPage reads the page of account's connections at offset, and the account's total.
func listPage(ctx context.Context, nc *nats.Conn, account string, offset int) ([]Conn, int, error) {
	req, _ := json.Marshal(map[string]any{"subscriptions": true, "auth": true, "offset": offset, "limit": pageSize}) // always encodes
	msg, err := nc.RequestWithContext(ctx, jsapi.AccountConnz(account), req)
	if err != nil {
		return nil, 0, fmt.Errorf("list the connections of %s: %w", account, err)
	}
	var rep struct {
		Data *struct {
			Total       int    `json:"total"`
			Connections []Conn `json:"connections"`
		} `json:"data"`
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	switch err := json.Unmarshal(msg.Data, &rep); {
	case err != nil:
		return nil, 0, fmt.Errorf("list the connections of %s: the broker's answer %q is not a connection list: %w", account, msg.Data, err)
	case rep.Error != nil:
		return nil, 0, fmt.Errorf("list the connections of %s: the broker refused (%d): %s", account, rep.Error.Code, rep.Error.Description)
	case rep.Data == nil:
		return nil, 0, fmt.Errorf("list the connections of %s: the broker's answer %q holds no list", account, msg.Data)
	}
	return rep.Data.Connections, rep.Data.Total, nil
}
