package userauth

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gocotal/cotal/wire"
)

// Bearer limits (SPEC §10).
const (
	// BearerVersion is the only token-shape version a validator accepts: older is a downgrade,
	// newer a misconfiguration.
	BearerVersion = 1
	// MaxBearerLifetime caps exp - iat of every bearer: short lifetimes are the revocation lever.
	MaxBearerLifetime = 900 * time.Second
	// MaxAgentBearerLifetime caps the bearer a managed agent's secret exchange mints.
	MaxAgentBearerLifetime = 300 * time.Second
	// MaxBearerSize caps an encoded bearer; a larger one is refused before any parsing.
	MaxBearerSize = 8 << 10
	// ClockTolerance is the skew allowed on iat, nbf and exp.
	ClockTolerance = 5 * time.Second
)

// bearerAlg is the only signing algorithm, pinned on both sides.
const bearerAlg = "EdDSA"

// maxCredentialIDLen bounds act.credentialId, the tail of a cred.<uid>.<credentialId> key.
const maxCredentialIDLen = 256

// Act is a bearer's server-authored actor claim: who it speaks for and under which ledger row,
// root credential and view it was minted.
type Act struct {
	// Owner restates the bearer's sub.
	Owner string `json:"owner"`
	// Actor is the ledger row's actor.
	Actor string `json:"actor"`
	// Scope is the row's scope at mint time; every connect checks it is still within the row's.
	Scope []string `json:"scope,omitempty"`
	// Parent is the spawning principal "<owner>.<actor>", an audit link.
	Parent string `json:"parent,omitempty"`
	// LifecycleUID is the row's incarnation; a connect requires it to equal the row's current one.
	LifecycleUID wire.LifecycleUID `json:"lifecycleUid"`
	// CredentialID is the incarnation's root credential (cred.<uid>.<credentialId>).
	CredentialID string `json:"credentialId"`
	// View is the elevated profile the exchange selected, or "" for the agent profile.
	View View `json:"view,omitempty"`
	// ManagerInstanceID is the one manager instance a manager-caller bearer may address.
	ManagerInstanceID wire.LifecycleUID `json:"managerInstanceId,omitempty"`
}

// Principal returns the act's principal, or an error when owner or actor break the grammar.
func (a *Act) Principal() (wire.Principal, error) { return wire.NewPrincipal(a.Owner, a.Actor) }

// Claims is a bearer's payload. Times are Unix seconds.
type Claims struct {
	// Issuer is IssuerName of the space.
	Issuer string `json:"iss"`
	// Audience is the space.
	Audience string `json:"aud"`
	// Subject is the derived owner.
	Subject string `json:"sub"`
	// IssuedAt, NotBefore and Expires bound the bearer; exp - iat is at most MaxBearerLifetime.
	IssuedAt  int64 `json:"iat"`
	NotBefore int64 `json:"nbf"`
	Expires   int64 `json:"exp"`
	// Version is BearerVersion.
	Version int `json:"ver"`
	// Act is the actor claim.
	Act Act `json:"act"`
}

// Lifetime returns exp - iat.
func (c *Claims) Lifetime() time.Duration { return time.Duration(c.Expires-c.IssuedAt) * time.Second }

// ExpiresAt returns exp as a time.
func (c *Claims) ExpiresAt() time.Time { return time.Unix(c.Expires, 0) }

// claimsIn is the payload as read, with the required numbers as pointers so that an absent claim
// is told apart from a zero one.
type claimsIn struct {
	Issuer    *string `json:"iss"`
	Audience  *string `json:"aud"`
	Subject   *string `json:"sub"`
	IssuedAt  *int64  `json:"iat"`
	NotBefore *int64  `json:"nbf"`
	Expires   *int64  `json:"exp"`
	Version   *int    `json:"ver"`
	Act       *Act    `json:"act"`
}

// bearerHeader is the protected header this package writes.
type bearerHeader struct {
	Alg string `json:"alg"`
	Typ string `json:"typ"`
	Kid string `json:"kid"`
}

// smugglingHeaders name key material or processing rules a token could carry to steer its own
// verification. Keys resolve only through the issuer's kid set, so each is refused outright.
var smugglingHeaders = [...]string{"jku", "jwk", "x5u", "x5c", "crit"}

var segmentEncoding = base64.RawURLEncoding.Strict()

// IssuerName returns the iss of the space's bearers, "urn:cotal:auth:<space>": a stable URN, not
// the service's URL, so it never changes across restarts.
func IssuerName(space wire.Space) string { return "urn:cotal:auth:" + string(space) }

// Sign returns c signed by the issuer's active key as a compact JWS. An empty Issuer, Audience or
// Version is filled with the issuer's own; the claims must then be exactly what Verify accepts
// (apart from the clock), or Sign returns a *BearerError: a bearer no validator accepts is a bug
// at the mint, not at the connect.
func (i *Issuer) Sign(c Claims) (string, error) {
	if c.Issuer == "" {
		c.Issuer = i.name
	}
	if c.Audience == "" {
		c.Audience = string(i.space)
	}
	if c.Version == 0 {
		c.Version = BearerVersion
	}
	if err := i.checkClaims(&c); err != nil {
		return "", fmt.Errorf("sign bearer: %w", err)
	}
	hdr, err := json.Marshal(bearerHeader{Alg: bearerAlg, Typ: "JWT", Kid: i.active.kid})
	if err != nil {
		return "", fmt.Errorf("sign bearer: %w", err)
	}
	payload, err := json.Marshal(&c)
	if err != nil {
		return "", fmt.Errorf("sign bearer: %w", err)
	}
	signing := segmentEncoding.EncodeToString(hdr) + "." + segmentEncoding.EncodeToString(payload)
	token := signing + "." + segmentEncoding.EncodeToString(ed25519.Sign(i.active.priv, []byte(signing)))
	if len(token) > MaxBearerSize {
		return "", fmt.Errorf("sign bearer: %w", bearerErr("bearer is %d bytes, over the %d-byte cap", len(token), MaxBearerSize))
	}
	return token, nil
}

// Verify checks token as the connect boundary and the exchange must: EdDSA only, no key-carrying
// or crit header, a kid of this issuer's set, a valid signature, iss and aud of this space, sub
// a derived owner equal to act.owner, ver 1, iat, nbf and exp present, a lifetime of at most
// MaxBearerLifetime, not issued or valid-from in the future and not expired at now (with
// ClockTolerance either way), and a well-formed act. It returns the claims, or a *BearerError
// naming the broken rule. Verify checks the token alone; whether the ledger still grants what
// it claims is Exchange.Authorize's job.
func (i *Issuer) Verify(token string, now time.Time) (*Claims, error) {
	if len(token) > MaxBearerSize {
		return nil, bearerErr("bearer is %d bytes, over the %d-byte cap", len(token), MaxBearerSize)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, bearerErr("not a compact JWS (want 3 segments, got %d)", len(parts))
	}
	key, err := i.verifyHeader(parts[0], now)
	if err != nil {
		return nil, err
	}
	sig, err := segmentEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != ed25519.SignatureSize {
		return nil, bearerErr("signature is not %d bytes of base64url", ed25519.SignatureSize)
	}
	if !ed25519.Verify(key, []byte(parts[0]+"."+parts[1]), sig) {
		return nil, bearerErr("bad signature")
	}
	raw, err := segmentEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, bearerErr("payload is not base64url")
	}
	var in claimsIn
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, bearerErr("payload is not the claim shape: %v", err)
	}
	c, err := in.required()
	if err != nil {
		return nil, err
	}
	if err := i.checkClaims(c); err != nil {
		return nil, err
	}
	if err := checkTimes(c, now); err != nil {
		return nil, err
	}
	return c, nil
}

// verifyHeader checks the protected header and returns the key its kid names.
func (i *Issuer) verifyHeader(seg string, now time.Time) (ed25519.PublicKey, error) {
	raw, err := segmentEncoding.DecodeString(seg)
	if err != nil {
		return nil, bearerErr("header is not base64url")
	}
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(raw, &hdr); err != nil {
		return nil, bearerErr("header is not a JSON object")
	}
	for _, name := range smugglingHeaders {
		if _, ok := hdr[name]; ok {
			return nil, bearerErr("header carries %q; keys resolve only through the issuer's kid set", name)
		}
	}
	var alg, kid string
	if err := json.Unmarshal(hdr["alg"], &alg); err != nil || alg != bearerAlg {
		return nil, bearerErr("alg must be %s (got %s)", bearerAlg, quoteRaw(hdr["alg"]))
	}
	if err := json.Unmarshal(hdr["kid"], &kid); err != nil || kid == "" {
		return nil, bearerErr("header has no kid")
	}
	k := i.keys[kid]
	if k == nil || !k.published(now) {
		return nil, bearerErr("unknown kid %q", kid)
	}
	return k.pub, nil
}

// quoteRaw renders a raw header value for a log line, bounded.
func quoteRaw(v json.RawMessage) string {
	if v == nil {
		return "nothing"
	}
	const limit = 32
	if len(v) > limit {
		return string(v[:limit]) + "…"
	}
	return string(v)
}

// required checks that every required claim is present and returns the claims.
func (in *claimsIn) required() (*Claims, error) {
	missing := func(name string) error { return bearerErr("claim %s is required", name) }
	switch {
	case in.Issuer == nil:
		return nil, missing("iss")
	case in.Audience == nil:
		return nil, missing("aud")
	case in.Subject == nil:
		return nil, missing("sub")
	case in.IssuedAt == nil:
		return nil, missing("iat")
	case in.NotBefore == nil:
		return nil, missing("nbf")
	case in.Expires == nil:
		return nil, missing("exp")
	case in.Version == nil:
		return nil, missing("ver")
	case in.Act == nil:
		return nil, missing("act")
	}
	return &Claims{
		Issuer: *in.Issuer, Audience: *in.Audience, Subject: *in.Subject,
		IssuedAt: *in.IssuedAt, NotBefore: *in.NotBefore, Expires: *in.Expires,
		Version: *in.Version, Act: *in.Act,
	}, nil
}

// checkClaims checks everything about c that does not depend on the clock. Sign and Verify share
// it, so whatever the issuer mints its validator accepts.
func (i *Issuer) checkClaims(c *Claims) error {
	switch {
	case c.Issuer != i.name:
		return bearerErr("iss %q is not %q", c.Issuer, i.name)
	case c.Audience != string(i.space):
		return bearerErr("aud %q is not the space %q", c.Audience, i.space)
	case c.Version != BearerVersion:
		return bearerErr("ver %d is not %d", c.Version, BearerVersion)
	case !wire.IsDerivedOwner(c.Subject):
		return bearerErr("sub %q is not a derived owner token", c.Subject)
	case c.Act.Owner != c.Subject:
		return bearerErr("act.owner %q is not sub %q", c.Act.Owner, c.Subject)
	case c.Expires <= c.IssuedAt:
		return bearerErr("exp is not after iat")
	case c.Expires-c.IssuedAt > int64(MaxBearerLifetime/time.Second):
		return bearerErr("lifetime %ds exceeds the %ds cap", c.Expires-c.IssuedAt, int64(MaxBearerLifetime/time.Second))
	case c.NotBefore > c.Expires:
		return bearerErr("nbf is after exp")
	}
	return checkAct(&c.Act)
}

// checkAct checks the act claim's grammar. Whether the ledger grants it is checked elsewhere.
func checkAct(a *Act) error {
	if err := wire.ValidateActor(a.Actor); err != nil {
		return bearerErr("act.actor: %v", err)
	}
	if err := ValidateScopes(a.Scope); err != nil {
		return bearerErr("act.scope: %v", err)
	}
	if a.Parent != "" {
		if err := validateParent(a.Parent); err != nil {
			return bearerErr("act.parent: %v", err)
		}
	}
	if _, err := wire.ParseLifecycleUID(string(a.LifecycleUID)); err != nil {
		return bearerErr("act.lifecycleUid: %v", err)
	}
	if err := validateCredentialID(a.CredentialID); err != nil {
		return bearerErr("act.credentialId: %v", err)
	}
	if _, err := ParseView(string(a.View)); err != nil {
		return bearerErr("act.view: %v", err)
	}
	switch {
	case a.View == ViewManagerCaller && a.ManagerInstanceID == "":
		return bearerErr("view manager-caller requires act.managerInstanceId")
	case a.View != ViewManagerCaller && a.ManagerInstanceID != "":
		return bearerErr("act.managerInstanceId is valid only with view manager-caller")
	case a.ManagerInstanceID != "":
		if _, err := wire.ParseLifecycleUID(string(a.ManagerInstanceID)); err != nil {
			return bearerErr("act.managerInstanceId: %v", err)
		}
	}
	return nil
}

// checkTimes checks c against the validator's clock. The lifetime cap alone would let a token
// post-dated a year out pass, so iat and nbf may not be in the future and exp may not lie further
// than the cap from now.
func checkTimes(c *Claims, now time.Time) error {
	t := now.Unix()
	tol := int64(ClockTolerance / time.Second)
	switch {
	case c.IssuedAt > t+tol:
		return bearerErr("iat is in the future")
	case c.NotBefore > t+tol:
		return bearerErr("not valid before %d", c.NotBefore)
	case t >= c.Expires+tol:
		return bearerErr("expired at %d", c.Expires)
	case c.Expires > t+int64(MaxBearerLifetime/time.Second)+tol:
		return bearerErr("exp lies more than the lifetime cap past now")
	}
	return nil
}

// validateParent checks a parent audit link: "<owner>.<actor>" with a derived owner.
func validateParent(s string) error {
	p, err := wire.ParsePrincipal(s)
	if err != nil {
		return err
	}
	if !wire.IsDerivedOwner(p.Owner()) {
		return fmt.Errorf("owner %q of %q is not a derived owner token", p.Owner(), s)
	}
	return nil
}

// validateCredentialID checks a credential id: dot-separated segments of [A-Za-z0-9_-], at most
// 256 characters, so it is a safe KV key tail.
func validateCredentialID(id string) error {
	if id == "" || len(id) > maxCredentialIDLen {
		return fmt.Errorf("credential id must be 1 to %d characters", maxCredentialIDLen)
	}
	for seg := range strings.SplitSeq(id, ".") {
		if seg == "" || strings.Trim(seg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" {
			return fmt.Errorf("credential id %q must be dot-separated segments of [A-Za-z0-9_-]", id)
		}
	}
	return nil
}
