package oidc

import (
	"errors"
	"fmt"
)

// ErrInvalidToken is matched (with errors.Is) by every error [Verifier.Verify] returns for a token
// that is malformed, wrongly signed, or carries claims that do not fit. The concrete error is a
// [*TokenError] naming the reason. An error that does not match it (a JWKS that could not be
// fetched, a cancelled context) says nothing about the token.
var ErrInvalidToken = errors.New("invalid id token")

// TokenError is the reason an ID token was refused. It matches [ErrInvalidToken].
type TokenError struct {
	// Reason says what is wrong with the token, for logs; it never contains the token.
	Reason string
	// Err is the underlying cause, if any.
	Err error
}

// Error implements error.
func (e *TokenError) Error() string {
	if e.Err != nil {
		return "invalid id token: " + e.Reason + ": " + e.Err.Error()
	}
	return "invalid id token: " + e.Reason
}

// Unwrap returns the underlying cause.
func (e *TokenError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrInvalidToken].
func (e *TokenError) Is(target error) bool { return target == ErrInvalidToken }

// invalid returns a *TokenError with a formatted reason.
func invalid(format string, args ...any) error {
	return &TokenError{Reason: fmt.Sprintf(format, args...)}
}

// invalidCause returns a *TokenError with a reason and its cause.
func invalidCause(reason string, err error) error {
	return &TokenError{Reason: reason, Err: err}
}

// ErrInsecureURL is returned for a URL that is neither https nor http to a loopback host
// (127.0.0.0/8, ::1, localhost).
var ErrInsecureURL = errors.New("url is neither https nor loopback http")

// ErrRedirect is returned when a provider answers with a redirect: none is followed.
var ErrRedirect = errors.New("redirect refused")

// ErrResponseTooLarge is returned when a provider's response body exceeds 1 MiB.
var ErrResponseTooLarge = errors.New("response body over 1 MiB")

// ErrIssuerMismatch is returned by [Discover] when the provider's metadata names another issuer
// than the one asked for.
var ErrIssuerMismatch = errors.New("issuer mismatch")

// ErrNoDeviceFlow is returned by [Provider.StartDevice] for a provider that advertises no device
// authorization endpoint.
var ErrNoDeviceFlow = errors.New("provider has no device authorization endpoint")

// ErrAccessDenied is matched by the [*OAuthError] of a device login the person declined
// (RFC 8628 access_denied).
var ErrAccessDenied = errors.New("access denied")

// ErrExpiredToken is matched by the [*OAuthError] of a device code that expired before it was
// approved (RFC 8628 expired_token), and by the error [Provider.PollDevice] returns when the code's
// lifetime runs out on the client's clock.
var ErrExpiredToken = errors.New("device code expired")

// ErrInvalidGrant is matched by the [*OAuthError] of a grant the provider no longer honours
// (invalid_grant): typically a revoked or expired refresh token, meaning the person must log in
// again.
var ErrInvalidGrant = errors.New("grant no longer valid")

// ErrNoRefreshToken is returned by [FreshIDToken] when the cached ID token is about to expire and
// the session holds no refresh token: the person must log in again.
var ErrNoRefreshToken = errors.New("session has no refresh token")

// ErrNoRevocation is returned by [Provider.Revoke] for a provider that advertises no revocation
// endpoint (RFC 7009).
var ErrNoRevocation = errors.New("the identity provider offers no token revocation")

// ErrNoSession is returned by [Sessions.Get] for a key with no cached session.
var ErrNoSession = errors.New("no cached session")

// ErrCorruptSessions is matched by the error for a sessions file that cannot be read as one; the
// error names the file, which is left untouched.
var ErrCorruptSessions = errors.New("corrupt sessions file")

// OAuthError is an error response from a provider's token or device authorization endpoint
// (RFC 6749 §5.2, RFC 8628 §3.5).
type OAuthError struct {
	// Code is the error code, such as "access_denied".
	Code string
	// Description is the provider's error_description, if any. It is outside input: log it, do
	// not trust it.
	Description string
	// Status is the HTTP status of the response.
	Status int
}

// Error implements error.
func (e *OAuthError) Error() string {
	if e.Description != "" {
		return fmt.Sprintf("provider error %q (status %d): %q", e.Code, e.Status, e.Description)
	}
	return fmt.Sprintf("provider error %q (status %d)", e.Code, e.Status)
}

// Is matches [ErrAccessDenied], [ErrExpiredToken] and [ErrInvalidGrant] by code.
func (e *OAuthError) Is(target error) bool {
	switch target {
	case ErrAccessDenied:
		return e.Code == "access_denied"
	case ErrExpiredToken:
		return e.Code == "expired_token"
	case ErrInvalidGrant:
		return e.Code == "invalid_grant"
	}
	return false
}
