package oidc

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Provider is an OpenID provider's endpoints, as found by [Discover] or filled in by hand. Every
// URL must pass [CheckURL]. A Provider is safe for concurrent use once built; do not change its
// fields while it is in use.
type Provider struct {
	// Issuer is the provider's issuer identifier, compared exactly with an ID token's iss.
	Issuer string
	// DeviceAuthorizationEndpoint is where a device login starts (RFC 8628 §3.1); empty if the
	// provider has no device flow.
	DeviceAuthorizationEndpoint string
	// TokenEndpoint is where device codes and refresh tokens are redeemed.
	TokenEndpoint string
	// JWKSURI is where the provider publishes its signing keys.
	JWKSURI string
	// RevocationEndpoint is where a refresh token is revoked at logout (RFC 7009); empty if the
	// provider offers none.
	RevocationEndpoint string
	// IDTokenSigningAlgs lists id_token_signing_alg_values_supported, for information only: the
	// Verifier decides what it accepts.
	IDTokenSigningAlgs []string
	// GrantTypes lists grant_types_supported, for information only.
	GrantTypes []string

	// sleep waits between device polls; nil means a real timer. Tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
	// now is the clock for device code lifetimes; nil means time.Now.
	now func() time.Time
}

// metadata is the part of the OpenID Provider Metadata (OIDC Discovery §3) this package reads.
type metadata struct {
	Issuer                      string   `json:"issuer"`
	DeviceAuthorizationEndpoint string   `json:"device_authorization_endpoint"`
	TokenEndpoint               string   `json:"token_endpoint"`
	JWKSURI                     string   `json:"jwks_uri"`
	RevocationEndpoint          string   `json:"revocation_endpoint"`
	IDTokenSigningAlgs          []string `json:"id_token_signing_alg_values_supported"`
	GrantTypes                  []string `json:"grant_types_supported"`
}

// Discover fetches <issuer>/.well-known/openid-configuration with hc (nil means a default client)
// and returns the provider it describes. It fails if issuer or any advertised endpoint is not
// https or loopback http, if the document names another issuer than the one asked for
// ([ErrIssuerMismatch]), or if it lacks a token endpoint or a JWKS URI. A provider without a
// device authorization endpoint is returned: it can still verify tokens.
func Discover(ctx context.Context, hc *http.Client, issuer string) (*Provider, error) {
	if err := checkIssuer(issuer); err != nil {
		return nil, fmt.Errorf("discover %s: %w", issuer, err)
	}
	// OIDC Discovery §4: a trailing slash is removed before the well-known suffix is appended.
	wellKnown := strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
	status, body, err := send(ctx, hc, http.MethodGet, wellKnown, nil)
	if err != nil {
		return nil, fmt.Errorf("discover %s: %w", issuer, err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("discover %s: status %d", issuer, status)
	}
	var md metadata
	if err := json.Unmarshal(body, &md); err != nil {
		return nil, fmt.Errorf("discover %s: decode metadata: %w", issuer, err)
	}
	if md.Issuer != issuer {
		return nil, fmt.Errorf("discover %s: metadata names %q: %w", issuer, md.Issuer, ErrIssuerMismatch)
	}
	p := &Provider{
		Issuer:                      md.Issuer,
		DeviceAuthorizationEndpoint: md.DeviceAuthorizationEndpoint,
		TokenEndpoint:               md.TokenEndpoint,
		JWKSURI:                     md.JWKSURI,
		RevocationEndpoint:          md.RevocationEndpoint,
		IDTokenSigningAlgs:          md.IDTokenSigningAlgs,
		GrantTypes:                  md.GrantTypes,
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("discover %s: %w", issuer, err)
	}
	return p, nil
}

// checkIssuer checks an issuer identifier: https or loopback http, no query, no fragment
// (OIDC Discovery §3).
func checkIssuer(issuer string) error {
	if err := CheckURL(issuer); err != nil {
		return fmt.Errorf("issuer: %w", err)
	}
	u, err := url.Parse(issuer)
	if err != nil {
		return fmt.Errorf("issuer: %w", err)
	}
	if u.RawQuery != "" || u.ForceQuery {
		return fmt.Errorf("issuer %q has a query", issuer)
	}
	return nil
}

// validate checks the provider's URLs: token endpoint and JWKS URI required, every URL https or
// loopback http.
func (p *Provider) validate() error {
	if err := checkIssuer(p.Issuer); err != nil {
		return err
	}
	if p.TokenEndpoint == "" {
		return fmt.Errorf("no token_endpoint")
	}
	if p.JWKSURI == "" {
		return fmt.Errorf("no jwks_uri")
	}
	for _, e := range []struct{ name, url string }{
		{"token_endpoint", p.TokenEndpoint},
		{"jwks_uri", p.JWKSURI},
		{"device_authorization_endpoint", p.DeviceAuthorizationEndpoint},
		{"revocation_endpoint", p.RevocationEndpoint},
	} {
		if e.url == "" {
			continue
		}
		if err := CheckURL(e.url); err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
	}
	return nil
}

// clock returns the provider's clock.
func (p *Provider) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

// wait sleeps for d or until ctx is done.
func (p *Provider) wait(ctx context.Context, d time.Duration) error {
	if p.sleep != nil {
		return p.sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
