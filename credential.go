package cotal

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/wire"
)

// Grant is what a client learns from its credential: the principal it must adopt, the space, and
// the durables and channels its permissions name. The broker enforces the permissions; the client
// reads them only to know what to bind and to refuse early what the broker would refuse.
type Grant struct {
	// Profile is the credential's profile, its JWT name ("agent", "operator", ...).
	Profile string
	// Principal is the identity the credential's tags name.
	Principal wire.Principal
	// Space is the space of the credential's subject rows.
	Space wire.Space
	// UserKey is the connection's user nkey: its reply inbox is "_INBOX_<UserKey>".
	UserKey string
	// Lifecycle is set when the credential names a lifecycle: an agent's (its dm_ durable), or
	// the caller lifecycle of its endpoint reply rail (a control instrument's, fresh per mint).
	Lifecycle wire.LifecycleUID
	// Generation is the issued generation an agent credential's ep.v1 caller rows pin (SPEC
	// §13.15); empty for a credential without them.
	Generation string
	// Role is set when the credential may bind a role's task durable.
	Role string
	// AllowSubscribe lists the channel patterns the credential may read.
	AllowSubscribe []string
	// AllowPublish lists the channel patterns the credential may post to.
	AllowPublish []string
	// Capabilities are what an agent credential may do beyond its baseline, as its
	// "capability:<name>" tags name them ("spawn": spawn agents through the manager).
	Capabilities []string
	// Presence reports whether the credential may write its own presence row.
	Presence bool
	// Expires is when the credential stops working; zero means never.
	Expires time.Time
	jwt     string
	seed    string
}

// ErrCredentialExpired is returned by Connect for a credential past its expiry.
var ErrCredentialExpired = errors.New("credential expired")

// ReadCreds reads a creds file and returns its grant.
func ReadCreds(path string) (*Grant, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read creds: %w", err)
	}
	g, err := ParseCreds(raw)
	if err != nil {
		return nil, fmt.Errorf("creds %s: %w", path, err)
	}
	return g, nil
}

// ParseCreds parses the contents of a creds file (a user JWT and its seed). It checks that the
// seed is a user seed and the JWT's user's, but not the JWT's signature: the broker verifies it
// at every connect, and verifying it here too cost every agent's connect a second time.
func ParseCreds(raw []byte) (*Grant, error) {
	tok, seed, err := splitCreds(raw)
	if err != nil {
		return nil, err
	}
	return parseCredential(tok, seed)
}

// parseCredential parses a user JWT and its seed, checking that the seed is a user seed and
// the JWT's user's.
func parseCredential(tok, seed string) (*Grant, error) {
	kp, err := nkeys.FromSeed([]byte(seed))
	if err != nil {
		return nil, fmt.Errorf("no user seed: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicUserKey(pub) {
		return nil, errors.New("no user seed: the creds file's seed is not a user's")
	}
	uc, err := readClaims(tok)
	if err != nil {
		return nil, err
	}
	g, err := grantOf(tok, uc)
	if err != nil {
		return nil, err
	}
	if pub != g.UserKey {
		return nil, fmt.Errorf("the seed does not belong to the jwt's user %s", g.UserKey)
	}
	g.seed = seed
	return g, nil
}

// splitCreds finds the JWT and the seed in a creds file: the first two values each framed by
// lines of three dashes or more, as the decorated format writes them (jwt.FormatUserConfig),
// without the regular expressions the jwt package reads them with, which cost more than all the
// rest of reading a credential.
func splitCreds(raw []byte) (token, seed string, err error) {
	lines := strings.Split(strings.TrimPrefix(string(raw), "\ufeff"), "\n") // an editor's byte-order mark
	var vals []string
	for i := 0; i+2 < len(lines) && len(vals) < 2; i++ {
		if v := strings.TrimRight(lines[i+1], "\r"); isFence(lines[i]) && isFence(lines[i+2]) && isCredsValue(v) {
			vals = append(vals, v)
			i += 2
		}
	}
	switch {
	case len(vals) == 0, len(vals) == 1 && strings.HasPrefix(vals[0], "SU"): // a user seed's prefix
		return "", "", errors.New("not a creds file: no JWT framed by dashed lines")
	case len(vals) == 1:
		return "", "", errors.New("no user seed: the creds file holds a JWT only")
	}
	return vals[0], vals[1], nil
}

// isFence reports whether line is a creds file's frame line: three dashes or more at each end.
func isFence(line string) bool {
	line = strings.TrimSpace(line)
	return len(line) >= 6 && strings.HasPrefix(line, "---") && strings.HasSuffix(line, "---")
}

// isCredsValue reports whether v can be a framed JWT or seed: base64url text and dots.
func isCredsValue(v string) bool {
	for i := range len(v) {
		switch c := v[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '.', c == '=':
		default:
			return false
		}
	}
	return v != ""
}

// ParseJWT parses the grant a Cotal user JWT carries, without its seed: what a credential may
// do, as read from its permission rows and tags. It verifies the JWT's signature (by its
// issuer, which it does not judge). A grant parsed this way cannot connect.
func ParseJWT(token string) (*Grant, error) {
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return nil, fmt.Errorf("user jwt: %w", err)
	}
	return grantOf(token, uc)
}

// readClaims decodes a user JWT's claims without verifying its signature, refusing anything but
// a version-2 user JWT.
func readClaims(token string) (*jwt.UserClaims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errors.New("user jwt: not a JWT (three dot-separated parts)")
	}
	body, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("user jwt: its claims: %w", err)
	}
	uc := &jwt.UserClaims{}
	if err := json.Unmarshal(body, uc); err != nil {
		return nil, fmt.Errorf("user jwt: its claims: %w", err)
	}
	if uc.Type != jwt.UserClaim || uc.Version != 2 {
		return nil, fmt.Errorf("user jwt: a %q JWT of version %d, not a version-2 user JWT", uc.Type, uc.Version)
	}
	return uc, nil
}

// grantOf reads the grant from a user JWT's claims.
func grantOf(token string, uc *jwt.UserClaims) (*Grant, error) {
	var err error
	g := &Grant{Profile: uc.Name, UserKey: uc.Subject, jwt: token}
	if uc.Expires > 0 {
		g.Expires = time.Unix(uc.Expires, 0)
	}
	for _, tag := range uc.Tags {
		if v, ok := strings.CutPrefix(tag, "principal:"); ok {
			if g.Principal, err = wire.ParsePrincipal(v); err != nil {
				return nil, fmt.Errorf("principal tag: %w", err)
			}
		}
		if v, ok := strings.CutPrefix(tag, "capability:"); ok {
			g.Capabilities = append(g.Capabilities, v)
		}
	}
	if g.Principal.IsZero() {
		return nil, fmt.Errorf("the credential names no principal (no principal: tag); it was not minted for Cotal")
	}
	g.readRows(uc.Permissions.Pub.Allow, uc.Permissions.Sub.Allow)
	if g.Space == "" {
		return nil, fmt.Errorf("the credential grants no Cotal subject, so names no space")
	}
	return g, nil
}

// readRows learns the space, lifecycle, role and channel ACLs from the permission rows, in the
// shapes authority.PermissionsFor writes them.
func (g *Grant) readRows(pub, sub []string) {
	me := g.Principal.Name()
	for _, row := range append(append([]string(nil), pub...), sub...) {
		if rest, ok := strings.CutPrefix(row, wire.Root+"."); ok && g.Space == "" {
			if sp, _, ok := strings.Cut(rest, "."); ok {
				g.Space = wire.Space(sp)
			}
		}
	}
	if g.Space == "" {
		return
	}
	presenceRow := g.Space.PresenceBucket().Subject(wire.PresenceKey(g.Principal))
	chatFrom := g.Space.Prefix() + ".chat.*.*."
	chatAs := g.Space.Prefix() + ".chat." + g.Principal.String() + "."
	for _, row := range pub {
		switch {
		case strings.HasPrefix(row, jsapi.ConsumerInfo+g.Space.DMStream()+".dm_"+me+"-"):
			g.Lifecycle = wire.LifecycleUID(strings.TrimPrefix(row, jsapi.ConsumerInfo+g.Space.DMStream()+".dm_"+me+"-"))
		case strings.HasPrefix(row, jsapi.ConsumerInfo+g.Space.TaskStream()+".svc_"):
			g.Role = strings.TrimPrefix(row, jsapi.ConsumerInfo+g.Space.TaskStream()+".svc_")
		case row == presenceRow:
			g.Presence = true
		case strings.HasPrefix(row, chatAs):
			g.AllowPublish = append(g.AllowPublish, strings.TrimPrefix(row, chatAs))
		}
	}
	// The reply rail "…ep.reply.*.*.*.<owner>.<actor>.<uid>.*" names the caller lifecycle of a
	// credential that has no dm_ durable.
	replyRail := strings.TrimSuffix(g.Space.ReplyReadGrant(wire.Lifecycle{Principal: g.Principal}, ""), ".*")
	// "…ep.v1.reply.*.*.*.<owner>.<actor>.<uid>.<generation>.*" names its issued generation.
	v1Rail := strings.TrimSuffix(g.Space.ReplyReadGrant(wire.Lifecycle{Principal: g.Principal, UID: "u"}, "g"), "u.g.*")
	for _, row := range sub {
		if uid, ok := strings.CutPrefix(row, replyRail); ok && g.Lifecycle == "" {
			if u, err := wire.ParseLifecycleUID(strings.TrimSuffix(uid, ".*")); err == nil {
				g.Lifecycle = u
			}
		}
		if tail, ok := strings.CutPrefix(row, v1Rail); ok {
			if _, gen, ok := strings.Cut(strings.TrimSuffix(tail, ".*"), "."); ok && wire.ValidateGeneration(gen) == nil {
				g.Generation = gen
			}
		}
		if ch, ok := strings.CutPrefix(row, chatFrom); ok {
			g.AllowSubscribe = append(g.AllowSubscribe, ch)
		} else if row == g.Space.KindAll(wire.KindChat) {
			g.AllowSubscribe = append(g.AllowSubscribe, ">")
		}
	}
}

// CanRead reports whether the grant may read channel (live and history).
func (g *Grant) CanRead(channel string) bool { return wire.ChannelInAllow(g.AllowSubscribe, channel) }

// CanPost reports whether the grant may post to channel.
func (g *Grant) CanPost(channel string) bool { return wire.ChannelInAllow(g.AllowPublish, channel) }
