package cotal

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// A credential link is a cotal:// (cotals:// with TLS) URL whose user info carries a credential:
// the user JWT and its user seed joined by a dot. The link alone connects to an authenticated
// mesh as that credential's principal, in its space, joining the channels it names:
//
//	cotal://<jwt>.<seed>@host:4222/main?channel=general
//
// It is a bearer secret, as the creds file it stands for: it works until the credential expires
// or is revoked, and Connect never logs it. A user info that is not a JWT and a user seed is a
// NATS token, as SPEC §10 reads it.

// CredentialLink returns the link that connects, as the credential creds holds (a creds file's
// contents), to server (the mesh's nats:// or tls:// URL, or a comma-separated list: the first is
// used), joining channels.
func CredentialLink(server string, creds []byte, channels ...string) (string, error) {
	g, err := ParseCreds(creds)
	if err != nil {
		return "", err
	}
	t, err := ParseURL(strings.Split(server, ",")[0])
	if err != nil {
		return "", err
	}
	if t.Space != "" {
		return "", fmt.Errorf("%w: the server must be a nats:// or tls:// URL, not a link", ErrInvalidOption)
	}
	u, err := url.Parse(t.Server)
	if err != nil {
		return "", err
	}
	scheme := schemeCotal
	if t.TLS {
		scheme = schemeCotalS
	}
	link := &url.URL{Scheme: scheme, User: url.User(g.jwt + "." + g.seed), Host: u.Host, Path: "/" + string(g.Space)}
	if len(channels) > 0 {
		link.RawQuery = url.Values{"channel": {strings.Join(channels, ",")}}.Encode()
	}
	if _, err := ParseURL(link.String()); err != nil {
		return "", err
	}
	return link.String(), nil
}

// linkCredential returns the credential a link's token carries, and whether it carries one.
func linkCredential(token string) (*Grant, bool, error) {
	i := strings.LastIndexByte(token, '.')
	if i < 0 || !strings.HasPrefix(token[i+1:], "SU") || strings.Count(token[:i], ".") != 2 {
		return nil, false, nil
	}
	g, err := parseCredential(token[:i], token[i+1:])
	if err != nil {
		return nil, true, fmt.Errorf("the link's credential: %w", err)
	}
	return g, true, nil
}

// errLinkAndCreds refuses a link's credential beside another.
var errLinkAndCreds = errors.New("a link that carries a credential excludes a creds file and a bearer")
