package cotal

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/gocotal/cotal/wire"
)

// Target is where a client connects, parsed from a URL (SPEC §10).
type Target struct {
	// Server is the NATS URL to dial: nats:// or tls://.
	Server string
	// TLS reports whether TLS is required (cotals://, tls://).
	TLS bool
	// Space is the space named by a cotal:// URL; empty for a nats:// URL.
	Space wire.Space
	// Channels are the channels a cotal:// URL asks to join (?channel=a,b or ?channels=a,b).
	Channels []string
	// Token, User and Password come from the URL's user info: "token@" or "user:pass@". A token
	// that is a credential (CredentialLink) is what Connect connects as.
	Token, User, Password string
}

// redact returns raw (a URL, or a comma-separated list of them) with any user info replaced by
// "REDACTED", so an error quoting a URL never carries a token, a password or a link's credential.
func redact(raw string) string {
	if strings.Contains(raw, ",") {
		parts := strings.Split(raw, ",")
		for i, p := range parts {
			parts[i] = redact(p)
		}
		return strings.Join(parts, ",")
	}
	i := strings.Index(raw, "://")
	if i < 0 {
		return raw
	}
	rest := raw[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndexByte(rest[:end], '@')
	if at < 0 {
		return raw
	}
	return raw[:i+3] + "REDACTED" + rest[at:]
}

// Default ports and schemes.
const (
	defaultPort   = "4222"
	schemeCotal   = "cotal"
	schemeCotalS  = "cotals"
	schemeNATS    = "nats"
	schemeTLS     = "tls"
	maxURLLength  = 8192
	maxURLChannel = 256
)

// ParseURL parses a connection URL: cotal://[token@|user:pass@]host[:port]/space[?channel=a,b],
// cotals://... (TLS required), a plain nats:// or tls:// server URL, or a comma-separated list of
// those, the nodes of a cluster (all nats:// or all tls://), which the client tries in turn and
// fails over between. It returns a *wire.ValidationError naming what is wrong.
func ParseURL(raw string) (*Target, error) {
	bad := func(rule string) (*Target, error) {
		return nil, &wire.ValidationError{Field: "url", Value: redact(raw), Rule: rule}
	}
	if len(raw) > maxURLLength {
		return bad(fmt.Sprintf("is longer than %d bytes", maxURLLength))
	}
	if (strings.HasPrefix(raw, schemeNATS+"://") || strings.HasPrefix(raw, schemeTLS+"://")) && strings.Contains(raw, ",") {
		return parseServers(raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad(err.Error())
	}
	t := &Target{}
	switch u.Scheme {
	case schemeNATS, schemeTLS:
		if u.Host == "" {
			return bad("names no host")
		}
		t.Server, t.TLS = raw, u.Scheme == schemeTLS
		return t, nil
	case schemeCotal, schemeCotalS:
		t.TLS = u.Scheme == schemeCotalS
	default:
		return bad(`scheme must be cotal, cotals, nats or tls`)
	}
	host := u.Hostname()
	if host == "" {
		return bad("names no host")
	}
	port := u.Port()
	if port == "" {
		port = defaultPort
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return bad("port must be 1-65535")
	}
	space := strings.Trim(u.Path, "/")
	if space == "" {
		return bad("names no space (cotal://host:port/SPACE)")
	}
	sp, err := wire.ParseSpace(space)
	if err != nil {
		return nil, err
	}
	t.Space = sp
	if u.User != nil {
		if pass, ok := u.User.Password(); ok {
			t.User, t.Password = u.User.Username(), pass
		} else {
			t.Token = u.User.Username()
		}
	}
	q := u.Query()
	for _, key := range []string{"channel", "channels"} {
		for _, v := range q[key] {
			for ch := range strings.SplitSeq(v, ",") {
				if ch = strings.TrimSpace(ch); ch == "" {
					continue
				}
				if err := wire.ValidateChannelPattern(ch); err != nil {
					return nil, err
				}
				t.Channels = append(t.Channels, ch)
			}
		}
	}
	if len(t.Channels) > maxURLChannel {
		return bad(fmt.Sprintf("names more than %d channels", maxURLChannel))
	}
	scheme := schemeNATS
	if t.TLS {
		scheme = schemeTLS
	}
	t.Server = scheme + "://" + net.JoinHostPort(host, port)
	return t, nil
}

// parseServers parses a comma-separated list of nats:// or tls:// server URLs, all of one scheme.
func parseServers(raw string) (*Target, error) {
	var servers []string
	t := &Target{}
	for i, part := range strings.Split(raw, ",") {
		one, err := ParseURL(strings.TrimSpace(part))
		if err != nil {
			return nil, err
		}
		if one.Space != "" {
			return nil, &wire.ValidationError{Field: "url", Value: redact(raw), Rule: "a list of servers holds nats:// or tls:// URLs only"}
		}
		if i > 0 && one.TLS != t.TLS {
			return nil, &wire.ValidationError{Field: "url", Value: redact(raw), Rule: "a list of servers is all nats:// or all tls://"}
		}
		t.TLS = one.TLS
		servers = append(servers, one.Server)
	}
	t.Server = strings.Join(servers, ",")
	return t, nil
}
