package authority

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// MaxJWTSize is the largest user JWT the authority mints (SPEC §13.9 size gate). A JWT rides the
// CONNECT line; one larger than the broker's control line is dropped without a word, so an
// oversized grant is refused here, with a reason, instead.
const MaxJWTSize = 16 << 10

// Tag prefixes stamped into every user JWT: the principal tag lets a connection listing
// (CONNZ) attribute a statically minted connection to its principal.
const (
	tagOwner = "owner:"
	tagActor = "actor:"
	// TagPrincipal starts the tag naming the credential's principal, which the broker reports
	// with the client in its advisories.
	TagPrincipal = "principal:"
)

// MintRequest is what to mint. Grant carries the profile's inputs; its ConnID is ignored, since a
// static credential's inbox is keyed by its own user key, except by SignUser, where a connection
// the broker keys for itself (an auth callout's) names its inbox by the client's nonce. Expires is the lifetime: zero takes the
// profile's DefaultLifetime, a negative value means no expiry.
type MintRequest struct {
	Profile Profile
	Grant   Grant
	Expires time.Duration
	// Name is the JWT's name; the profile when empty. A credential an auth callout mints names
	// its principal in dash form instead: the broker reports no tags for such a connection, only
	// its name, which is how the connection list attributes it (connz).
	Name string
}

// Credential is a minted user credential. Creds is the standard NATS creds file (JWT and seed),
// usable by the nats CLI and plain nats.go; it is secret, and Credential logs without it.
type Credential struct {
	Profile      Profile
	Principal    wire.Principal
	LifecycleUID wire.LifecycleUID
	// Instrument is the one-shot caller lifecycle a control instrument's rows pin
	// (Grant.Instrument); empty for every other profile.
	Instrument wire.LifecycleUID
	// Generation is the issued generation an agent's ep.v1 rows pin (Grant.Generation); empty for
	// every other profile.
	Generation string
	// CredentialID names the credential's ledger row; empty for a credential minted without one.
	CredentialID string
	// PublicKey is the user nkey, which is also the connection id of its inbox grant.
	PublicKey string
	JWT       string
	// Expires is when the credential stops working; zero means never.
	Expires time.Time
	Creds   []byte
}

// LogValue implements slog.LogValuer, leaving out the seed-bearing creds.
func (c *Credential) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("profile", string(c.Profile)),
		slog.String("principal", c.Principal.String()),
		slog.String("lifecycleUid", string(c.LifecycleUID)),
		slog.String("user", c.PublicKey),
	)
}

// Mint creates a user key and a JWT for it, signed with the space's signing key, carrying the
// profile's permissions, the principal tags and the lifetime. The JWT's name is the profile. It
// returns a *wire.ValidationError for a bad grant and a *JWTTooLargeError for a grant too large
// to connect with.
func (s *SpaceKeys) Mint(req MintRequest) (*Credential, error) {
	return s.mintAt(req, time.Now())
}

func (s *SpaceKeys) mintAt(req MintRequest, now time.Time) (*Credential, error) {
	user, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("mint %s: create user key: %w", req.Profile, err)
	}
	return s.mintWith(req, user, now)
}

// SignUser signs a user JWT for a public user key the holder generated and keeps: a credential
// whose seed never reaches the authority (an auth callout's connect, a remote manager's
// identities). The result carries no creds; the holder pairs the JWT with its own seed.
// An empty Grant.ConnID keys the inbox by pub, as Mint does.
func (s *SpaceKeys) SignUser(req MintRequest, pub string) (*Credential, error) {
	if !nkeys.IsValidPublicUserKey(pub) {
		return nil, &wire.ValidationError{Field: "userKey", Value: pub, Rule: "must be a public user nkey"}
	}
	conn := req.Grant.ConnID
	if conn == "" {
		conn = wire.ConnID(pub)
	}
	return s.signAs(req, pub, conn, time.Now())
}

// mintWith mints a credential for the given user key, with its creds.
func (s *SpaceKeys) mintWith(req MintRequest, user nkeys.KeyPair, now time.Time) (*Credential, error) {
	cred, err := s.sign(req, PublicKey(user), now)
	if err != nil {
		return nil, err
	}
	seed, err := user.Seed()
	if err != nil {
		return nil, fmt.Errorf("mint %s: encode user seed: %w", req.Profile, err)
	}
	if cred.Creds, err = jwt.FormatUserConfig(cred.JWT, seed); err != nil {
		return nil, fmt.Errorf("mint %s: format creds: %w", req.Profile, err)
	}
	return cred, nil
}

// SignFor signs the user JWT of a credential for the user key pub (one UserKey derives), with
// the inbox keyed by pub, without its creds: the ledger formats those only once the credential's
// row is committed.
func (s *SpaceKeys) SignFor(req MintRequest, pub string) (*Credential, error) {
	return s.sign(req, pub, time.Now())
}

// sign is SignFor at now.
func (s *SpaceKeys) sign(req MintRequest, pub string, now time.Time) (*Credential, error) {
	return s.signAs(req, pub, wire.ConnID(pub), now)
}

// signAs is sign with the inbox keyed by conn.
func (s *SpaceKeys) signAs(req MintRequest, pub string, conn wire.ConnID, now time.Time) (*Credential, error) {
	g := req.Grant
	g.Space = s.Space
	g.ConnID = conn
	if req.Profile.instrument() && g.Instrument == "" {
		// A fresh caller lifecycle for this one credential: no lifecycle head, gate or row names
		// it, so its rows reach no other credential's reply rail.
		g.Instrument = wire.NewLifecycleUID()
	}
	if req.Profile == ProfileAgent && g.Generation == "" {
		g.Generation = meshwire.NewGeneration()
	}
	perms, err := PermissionsFor(req.Profile, g)
	if err != nil {
		return nil, err
	}
	uc := jwt.NewUserClaims(pub)
	uc.Name = string(req.Profile)
	if req.Name != "" {
		uc.Name = req.Name
	}
	uc.IssuerAccount = s.AccountPublicKey()
	// Set directly rather than through TagList.Add, which lower-cases: a principal tag must
	// round-trip an actor like "Alice" exactly.
	uc.Tags = jwt.TagList{
		tagOwner + g.Principal.Owner(),
		tagActor + g.Principal.Actor(),
		TagPrincipal + g.Principal.String(),
	}
	caps := slices.Clone(g.Capabilities)
	slices.Sort(caps)
	for _, c := range slices.Compact(caps) {
		uc.Tags = append(uc.Tags, TagCapability+c)
	}
	uc.Permissions = perms.jwt()
	if req.Profile.bounded() {
		uc.Limits.Subs, uc.Limits.Payload = MaxSubscriptions, MaxPayload
	}
	uc.IssuedAt = now.Unix()
	life := req.Expires
	if life == 0 {
		life = req.Profile.DefaultLifetime()
	}
	var expires time.Time
	if life > 0 {
		expires = now.Add(life)
		uc.Expires = expires.Unix()
	}
	token, err := uc.Encode(s.signing)
	if err != nil {
		return nil, fmt.Errorf("mint %s for %s: %w", req.Profile, g.Principal, err)
	}
	if len(token) > MaxJWTSize {
		tooLarge := &JWTTooLargeError{Profile: req.Profile, Principal: g.Principal, Size: len(token), Pub: len(perms.PubAllow), Sub: len(perms.SubAllow),
			Space: g.Space, Channels: len(g.AllowPublish)+len(g.AllowSubscribe)+len(g.Channels) > 0}
		if g.Serve != nil {
			tooLarge.Commands = len(g.Serve.commands())
		}
		return nil, tooLarge
	}
	return &Credential{
		Profile: req.Profile, Principal: g.Principal, LifecycleUID: g.LifecycleUID, Instrument: g.Instrument,
		Generation: g.Generation, PublicKey: pub, JWT: token, Expires: expires,
	}, nil
}

// Fits reports whether a credential of req would fit under MaxJWTSize in space: it mints req with
// keys made for the check, since a JWT's size depends on its rows and claims and never on which
// keys sign it. It returns the *JWTTooLargeError Mint would, or the grant's validation error.
func Fits(space wire.Space, req MintRequest) error {
	acct, err := createKey(nkeys.PrefixByteAccount)
	if err != nil {
		return err
	}
	signing, err := createKey(nkeys.PrefixByteAccount)
	if err != nil {
		return err
	}
	sk := &SpaceKeys{Space: space, account: acct, signing: signing, store: acct, accountPub: PublicKey(acct)}
	_, err = sk.Mint(req)
	return err
}
