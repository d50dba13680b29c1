package oidc

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
	"unicode/utf8"
)

const (
	// clockSkew is the tolerance applied to exp, iat and nbf.
	clockSkew = 5 * time.Second
	// refetchGap is the least time between two JWKS fetches caused by unknown kids.
	refetchGap = 30 * time.Second
	// keySetMaxAge is how long a fetched JWKS is trusted before it is fetched again, so that a
	// key the provider withdraws stops verifying.
	keySetMaxAge = 10 * time.Minute
	// maxSubLen is the longest sub accepted (OIDC Core §2).
	maxSubLen = 255
)

// Identity is who a verified ID token says its bearer is.
type Identity struct {
	// Issuer is the token's iss, equal to the provider's issuer.
	Issuer string
	// Subject is the token's sub: the provider's stable identifier for the person.
	Subject string
	// Name is preferred_username, name or email, the first present; it may be empty and is for
	// display only.
	Name string
	// IssuedAt is the token's iat.
	IssuedAt time.Time
	// Expires is the token's exp.
	Expires time.Time
}

// Verifier checks ID tokens from one provider for one client. It fetches the provider's JWKS on
// first use and caches it, fetching again after ten minutes, or on a token with an unknown kid at
// most once every 30 s. A Verifier is safe for concurrent use; the zero value is not usable.
type Verifier struct {
	issuer   string
	jwksURI  string
	clientID string
	hc       *http.Client
	now      func() time.Time // the clock; tests replace it

	mu        sync.Mutex // guards the fields below; held across a JWKS fetch
	keys      keySet     // nil until the first successful fetch
	fetchedAt time.Time  // when keys were fetched
	triedAt   time.Time  // when a fetch was last attempted
	fetchErr  error      // the last fetch failure
}

// NewVerifier returns a Verifier for ID tokens issued by p to clientID, fetching keys with hc
// (nil means a default client). Problems with p surface on the first Verify.
func NewVerifier(p *Provider, clientID string, hc *http.Client) *Verifier {
	return &Verifier{
		issuer:   p.Issuer,
		jwksURI:  p.JWKSURI,
		clientID: clientID,
		hc:       hc,
		now:      time.Now,
	}
}

// Verify checks idToken's signature against the provider's JWKS and its claims against the
// provider and client, and returns the identity it carries. A token that fails a check gives an
// error matching [ErrInvalidToken] (a [*TokenError] naming the reason); a JWKS that cannot be
// fetched gives an error that does not.
func (v *Verifier) Verify(ctx context.Context, idToken string) (Identity, error) {
	if v.clientID == "" {
		return Identity{}, fmt.Errorf("verify id token: empty client id")
	}
	t, err := parseJWS(idToken)
	if err != nil {
		return Identity{}, err
	}
	k, err := v.key(ctx, t.kid, t.alg)
	if err != nil {
		return Identity{}, err
	}
	pub, err := k.publicKey()
	if err != nil {
		return Identity{}, invalidCause("unusable key", err)
	}
	if err := t.verifySignature(pub); err != nil {
		return Identity{}, err
	}
	return v.checkClaims(t.payload)
}

// key returns the JWKS key named kid that fits alg, fetching the JWKS when it is missing or old,
// or when kid is unknown and no fetch happened in the last refetchGap.
func (v *Verifier) key(ctx context.Context, kid, alg string) (jwk, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.now()
	stale := v.keys == nil || now.Sub(v.fetchedAt) >= keySetMaxAge
	if (stale || v.keys[kid] == nil) && (v.triedAt.IsZero() || now.Sub(v.triedAt) >= refetchGap || now.Before(v.triedAt)) {
		v.triedAt = now
		ks, err := fetchKeys(ctx, v.hc, v.jwksURI)
		if err != nil {
			v.fetchErr = err
		} else {
			v.keys, v.fetchedAt, v.fetchErr = ks, now, nil
		}
	}
	if v.keys == nil || now.Sub(v.fetchedAt) >= keySetMaxAge {
		if v.fetchErr != nil {
			return jwk{}, fmt.Errorf("verify id token: %w", v.fetchErr)
		}
		return jwk{}, fmt.Errorf("verify id token: no current jwks from %s", v.jwksURI)
	}
	cands := v.keys[kid]
	if len(cands) == 0 {
		return jwk{}, invalid("unknown kid %q", kid)
	}
	var fit []jwk
	for _, k := range cands {
		if k.algFits(alg) {
			fit = append(fit, k)
		}
	}
	switch len(fit) {
	case 0:
		return jwk{}, invalid("key %q does not fit alg %s", kid, alg)
	case 1:
		return fit[0], nil
	}
	return jwk{}, invalid("kid %q names %d keys for alg %s", kid, len(fit), alg)
}

// checkClaims decodes the payload and checks iss, aud, azp, exp, iat, nbf and sub.
func (v *Verifier) checkClaims(payload []byte) (Identity, error) {
	var c idClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return Identity{}, invalidCause("claims are not a well-formed JSON object", err)
	}
	if c.Iss == nil || *c.Iss != v.issuer {
		return Identity{}, invalid("iss is not %q", v.issuer)
	}
	if c.Aud == nil || !slices.Contains(*c.Aud, v.clientID) {
		return Identity{}, invalid("aud does not contain client %q", v.clientID)
	}
	// OIDC Core §3.1.3.7: with several audiences the authorized party must be this client; and
	// an azp naming another client means the token was issued to that client.
	if len(*c.Aud) > 1 && c.Azp == nil {
		return Identity{}, invalid("several audiences and no azp")
	}
	if c.Azp != nil && *c.Azp != v.clientID {
		return Identity{}, invalid("azp is not client %q", v.clientID)
	}
	if !c.Exp.set {
		return Identity{}, invalid("no exp")
	}
	if !c.Iat.set {
		return Identity{}, invalid("no iat")
	}
	now := v.now()
	if !now.Before(c.Exp.t.Add(clockSkew)) {
		return Identity{}, invalid("expired at %s", c.Exp.t.UTC().Format(time.RFC3339))
	}
	if c.Iat.t.After(now.Add(clockSkew)) {
		return Identity{}, invalid("issued in the future, at %s", c.Iat.t.UTC().Format(time.RFC3339))
	}
	if !c.Exp.t.After(c.Iat.t) {
		return Identity{}, invalid("exp is not after iat")
	}
	if c.Nbf.set && c.Nbf.t.After(now.Add(clockSkew)) {
		return Identity{}, invalid("not valid before %s", c.Nbf.t.UTC().Format(time.RFC3339))
	}
	if c.Sub == nil || *c.Sub == "" {
		return Identity{}, invalid("empty sub")
	}
	if len(*c.Sub) > maxSubLen {
		return Identity{}, invalid("sub is %d bytes, over %d", len(*c.Sub), maxSubLen)
	}
	if !utf8.ValidString(*c.Sub) {
		return Identity{}, invalid("sub is not valid UTF-8")
	}
	return Identity{
		Issuer:   *c.Iss,
		Subject:  *c.Sub,
		Name:     c.displayName(),
		IssuedAt: c.Iat.t,
		Expires:  c.Exp.t,
	}, nil
}
