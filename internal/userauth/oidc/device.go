package oidc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

const (
	// DeviceGrantType is the grant_type of a device code redemption (RFC 8628 §3.4).
	DeviceGrantType = "urn:ietf:params:oauth:grant-type:device_code"
	// defaultInterval is the poll interval when the provider names none (RFC 8628 §3.2).
	defaultInterval = 5 * time.Second
	// slowDownStep is what each slow_down adds to the poll interval (RFC 8628 §3.5).
	slowDownStep = 5 * time.Second
	// maxInterval and maxExpiresIn bound what a provider may ask of the client.
	maxInterval  = 5 * time.Minute
	maxExpiresIn = 24 * time.Hour
)

// DefaultScopes are the scopes [Provider.StartDevice] asks for when given none: an ID token, a
// display name, and a refresh token.
var DefaultScopes = []string{"openid", "profile", "offline_access"}

// DeviceCode is a started device login (RFC 8628 §3.2). Show UserCode and VerificationURI (or
// VerificationURIComplete) to the person, then call [Provider.PollDevice].
type DeviceCode struct {
	// DeviceCode is the secret the client redeems; never show or log it.
	DeviceCode string
	// UserCode is what the person types at VerificationURI.
	UserCode string
	// VerificationURI is where the person approves the login.
	VerificationURI string
	// VerificationURIComplete, if not empty, is VerificationURI with the user code filled in.
	VerificationURIComplete string
	// Interval is the wait between polls. Lowering it below what the provider asked for makes
	// the provider answer slow_down.
	Interval time.Duration
	// ExpiresIn is how long the device code lives from when it was issued.
	ExpiresIn time.Duration

	issued time.Time // when the code was received; zero if built by hand
}

// String returns the device code with its secret redacted.
func (d DeviceCode) String() string {
	return fmt.Sprintf("DeviceCode{UserCode:%s VerificationURI:%s DeviceCode:REDACTED}", d.UserCode, d.VerificationURI)
}

// LogValue implements slog.LogValuer, redacting the device code.
func (d DeviceCode) LogValue() slog.Value {
	return slog.GroupValue(slog.String("user_code", d.UserCode), slog.String("verification_uri", d.VerificationURI))
}

// Tokens is a successful token response. Verify IDToken with a [Verifier] before trusting it.
type Tokens struct {
	// IDToken is the ID token; always present.
	IDToken string
	// AccessToken is the access token, if any; this package does not use it.
	AccessToken string
	// RefreshToken redeems new tokens with [Provider.Refresh]; may be empty.
	RefreshToken string
	// Expiry is when the access token expires, per the response's expires_in; zero if not given.
	// The ID token carries its own exp.
	Expiry time.Time
}

// String returns a redacted form: the tokens are bearer secrets.
func (t Tokens) String() string {
	return fmt.Sprintf("Tokens{IDToken:REDACTED AccessToken:REDACTED RefreshToken:REDACTED Expiry:%s}", t.Expiry.Format(time.RFC3339))
}

// LogValue implements slog.LogValuer, redacting the tokens.
func (t Tokens) LogValue() slog.Value {
	return slog.GroupValue(slog.Bool("refresh_token", t.RefreshToken != ""), slog.Time("expiry", t.Expiry))
}

// seconds is a duration in whole seconds, as a JSON number or, as some providers send it, a
// numeric string.
type seconds struct {
	d   time.Duration
	set bool
}

// UnmarshalJSON implements json.Unmarshaler.
func (s *seconds) UnmarshalJSON(b []byte) error {
	str := string(b)
	if strings.HasPrefix(str, `"`) {
		if err := json.Unmarshal(b, &str); err != nil {
			return err
		}
	}
	n, err := strconv.ParseInt(str, 10, 64)
	if err != nil || n < 0 || n > int64(maxExpiresIn/time.Second) {
		return fmt.Errorf("%s is not a whole number of seconds in range", b)
	}
	s.d, s.set = time.Duration(n)*time.Second, true
	return nil
}

// StartDevice begins a device login for clientID (RFC 8628 §3.1), asking for scopes, or
// [DefaultScopes] when scopes is empty. It fails with [ErrNoDeviceFlow] if the provider has no
// device endpoint, with an [*OAuthError] if the provider refuses, and with a plain error for a
// malformed answer or a verification URI that is not https or loopback http.
func (p *Provider) StartDevice(ctx context.Context, hc *http.Client, clientID string, scopes []string) (*DeviceCode, error) {
	if p.DeviceAuthorizationEndpoint == "" {
		return nil, fmt.Errorf("start device login at %s: %w", p.Issuer, ErrNoDeviceFlow)
	}
	if clientID == "" {
		return nil, fmt.Errorf("start device login at %s: empty client id", p.Issuer)
	}
	if len(scopes) == 0 {
		scopes = DefaultScopes
	}
	form := url.Values{"client_id": {clientID}, "scope": {strings.Join(scopes, " ")}}
	issued := p.clock()
	status, body, err := send(ctx, hc, http.MethodPost, p.DeviceAuthorizationEndpoint, form)
	if err != nil {
		return nil, fmt.Errorf("start device login: %w", err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("start device login: %w", oauthError(status, body))
	}
	var r struct {
		DeviceCode              string  `json:"device_code"`
		UserCode                string  `json:"user_code"`
		VerificationURI         string  `json:"verification_uri"`
		VerificationURL         string  `json:"verification_url"` // a pre-RFC spelling some providers still send
		VerificationURIComplete string  `json:"verification_uri_complete"`
		ExpiresIn               seconds `json:"expires_in"`
		Interval                seconds `json:"interval"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("start device login: decode response: %w", err)
	}
	if r.VerificationURI == "" {
		r.VerificationURI = r.VerificationURL
	}
	dc := &DeviceCode{
		DeviceCode:              r.DeviceCode,
		UserCode:                r.UserCode,
		VerificationURI:         r.VerificationURI,
		VerificationURIComplete: r.VerificationURIComplete,
		Interval:                defaultInterval,
		ExpiresIn:               r.ExpiresIn.d,
		issued:                  issued,
	}
	if r.Interval.set {
		dc.Interval = r.Interval.d
	}
	if err := dc.validate(); err != nil {
		return nil, fmt.Errorf("start device login: %w", err)
	}
	return dc, nil
}

// validate checks a device authorization response.
func (d *DeviceCode) validate() error {
	switch {
	case d.DeviceCode == "":
		return errors.New("response has no device_code")
	case d.UserCode == "":
		return errors.New("response has no user_code")
	case d.VerificationURI == "":
		return errors.New("response has no verification_uri")
	case d.ExpiresIn <= 0:
		return errors.New("response has no positive expires_in")
	case d.Interval > maxInterval:
		return fmt.Errorf("interval %s is over %s", d.Interval, maxInterval)
	}
	if err := CheckURL(d.VerificationURI); err != nil {
		return fmt.Errorf("verification_uri: %w", err)
	}
	if d.VerificationURIComplete != "" {
		if err := CheckURL(d.VerificationURIComplete); err != nil {
			return fmt.Errorf("verification_uri_complete: %w", err)
		}
	}
	return nil
}

// PollDevice waits for the person to approve dc and returns the tokens (RFC 8628 §3.4–3.5). It
// polls every dc.Interval, adding 5 s on each slow_down and doubling the wait after a network
// timeout. It returns an error matching [ErrAccessDenied] if the person declined,
// [ErrExpiredToken] if the code expired, an [*OAuthError] for any other refusal, ctx.Err() if ctx
// ends first, and a plain error for a response without an id_token.
func (p *Provider) PollDevice(ctx context.Context, hc *http.Client, clientID string, dc *DeviceCode) (*Tokens, error) {
	if dc == nil || dc.DeviceCode == "" {
		return nil, errors.New("poll device login: no device code")
	}
	interval := dc.Interval
	if interval <= 0 {
		interval = defaultInterval
	}
	issued := dc.issued
	if issued.IsZero() {
		issued = p.clock()
	}
	deadline := issued.Add(dc.ExpiresIn)
	form := url.Values{
		"grant_type":  {DeviceGrantType},
		"device_code": {dc.DeviceCode},
		"client_id":   {clientID},
	}
	for {
		if dc.ExpiresIn > 0 && p.clock().Add(interval).After(deadline) {
			return nil, fmt.Errorf("poll device login: %w", ErrExpiredToken)
		}
		if err := p.wait(ctx, interval); err != nil {
			return nil, fmt.Errorf("poll device login: %w", err)
		}
		toks, err := p.redeem(ctx, hc, form)
		if err == nil {
			return toks, nil
		}
		if oe, ok := errors.AsType[*OAuthError](err); ok {
			switch oe.Code {
			case "authorization_pending":
				continue
			case "slow_down":
				interval += slowDownStep
				continue
			}
		} else if isTimeout(ctx, err) {
			// RFC 8628 §3.5: on a connection timeout, back off rather than give up.
			interval = min(2*interval, maxInterval)
			continue
		}
		return nil, fmt.Errorf("poll device login: %w", err)
	}
}

// Refresh redeems refreshToken for new tokens (RFC 6749 §6). When the provider sends no new
// refresh token, the old one is kept in the result. It fails with an error matching
// [ErrInvalidGrant] if the provider no longer honours the refresh token, and with a plain error
// for a response without an id_token.
func (p *Provider) Refresh(ctx context.Context, hc *http.Client, clientID, refreshToken string) (*Tokens, error) {
	if refreshToken == "" {
		return nil, fmt.Errorf("refresh tokens: %w", ErrNoRefreshToken)
	}
	toks, err := p.redeem(ctx, hc, url.Values{
		"grant_type":    {"refresh_token"},
		"refresh_token": {refreshToken},
		"client_id":     {clientID},
	})
	if err != nil {
		return nil, fmt.Errorf("refresh tokens: %w", err)
	}
	if toks.RefreshToken == "" {
		toks.RefreshToken = refreshToken
	}
	return toks, nil
}

// Revoke revokes a refresh token at the provider's revocation endpoint (RFC 7009), so a copy of
// it left anywhere redeems nothing more. A provider without the endpoint is ErrNoRevocation; the
// token then stays valid until it expires.
func (p *Provider) Revoke(ctx context.Context, hc *http.Client, clientID, refreshToken string) error {
	switch {
	case p.RevocationEndpoint == "":
		return ErrNoRevocation
	case refreshToken == "":
		return fmt.Errorf("revoke: %w", ErrNoRefreshToken)
	}
	status, body, err := send(ctx, hc, http.MethodPost, p.RevocationEndpoint, url.Values{
		"token":           {refreshToken},
		"token_type_hint": {"refresh_token"},
		"client_id":       {clientID},
	})
	if err != nil {
		return fmt.Errorf("revoke the refresh token: %w", err)
	}
	// RFC 7009 §2.2: 200 whether or not the token was still valid.
	if status != http.StatusOK {
		return fmt.Errorf("revoke the refresh token: %w", oauthError(status, body))
	}
	return nil
}

// redeem posts form to the token endpoint and parses the token response.
func (p *Provider) redeem(ctx context.Context, hc *http.Client, form url.Values) (*Tokens, error) {
	if p.TokenEndpoint == "" {
		return nil, errors.New("provider has no token endpoint")
	}
	now := p.clock()
	status, body, err := send(ctx, hc, http.MethodPost, p.TokenEndpoint, form)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, oauthError(status, body)
	}
	var r struct {
		IDToken      string  `json:"id_token"`
		AccessToken  string  `json:"access_token"`
		RefreshToken string  `json:"refresh_token"`
		ExpiresIn    seconds `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decode token response: %w", err)
	}
	if r.IDToken == "" {
		return nil, errors.New("token response has no id_token")
	}
	t := &Tokens{IDToken: r.IDToken, AccessToken: r.AccessToken, RefreshToken: r.RefreshToken}
	if r.ExpiresIn.set {
		t.Expiry = now.Add(r.ExpiresIn.d)
	}
	return t, nil
}

// maxDescription caps how much of a provider's error_description is kept.
const maxDescription = 200

// oauthError turns a non-200 answer into an *OAuthError, or a plain error when the body is not
// an OAuth error object.
func oauthError(status int, body []byte) error {
	var r struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.Unmarshal(body, &r) != nil || r.Error == "" {
		return fmt.Errorf("unexpected status %d", status)
	}
	if len(r.Description) > maxDescription {
		r.Description = r.Description[:maxDescription]
	}
	return &OAuthError{Code: r.Error, Description: r.Description, Status: status}
}
