// Package exit maps command errors to the cotal binary's exit codes. The codes are part of the
// CLI's contract with scripts: new ones are added, existing ones never renumbered.
package exit

import (
	"errors"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal"
)

// The exit codes.
const (
	OK            = 0 // success
	Failed        = 1 // the command ran and failed
	Usage         = 2 // bad flags or arguments: nothing was attempted
	NotAuthorized = 4 // the broker or the credential refused the operation
)

// UsageError marks an error in how the command was called.
type UsageError struct{ Err error }

// Error implements error.
func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *UsageError) Unwrap() error { return e.Err }

// CodeError carries the exit code a command documents for its own outcome, such as `cotal status
// --components`'s 0 to 3.
type CodeError struct {
	Code int
	Err  error
}

// Error implements error.
func (e *CodeError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *CodeError) Unwrap() error { return e.Err }

// AuthError marks a refusal by the broker or by a credential's limits.
type AuthError struct{ Err error }

// Error implements error.
func (e *AuthError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *AuthError) Unwrap() error { return e.Err }

// refusals are the sentinels of a refusal by the broker or by a credential. The SDK's come first:
// a refused publish or request (cotal.ErrNotPermitted, which also wraps a connect the broker
// refused), a refused subscription (cotal.ErrJoinRefused) and a credential past its expiry
// (cotal.ErrCredentialExpired). nats.go's cover the commands that talk to the broker without
// the SDK (the ledger, provisioning): a connect refused for a bad, expired or revoked
// credential, and a refused publish or subscription.
var refusals = []error{
	cotal.ErrNotPermitted,
	cotal.ErrJoinRefused,
	cotal.ErrCredentialExpired,
	nats.ErrAuthorization,
	nats.ErrAuthExpired,
	nats.ErrAuthRevoked,
	nats.ErrPermissionViolation,
}

// Code returns the exit code for err: OK for nil, its own for a *CodeError, Usage for a
// *UsageError, NotAuthorized for an *AuthError or a refusal by the broker or a credential (see
// refusals), and Failed otherwise.
func Code(err error) int {
	if err == nil {
		return OK
	}
	if c, ok := errors.AsType[*CodeError](err); ok {
		return c.Code
	}
	if _, ok := errors.AsType[*UsageError](err); ok {
		return Usage
	}
	if _, ok := errors.AsType[*AuthError](err); ok {
		return NotAuthorized
	}
	for _, r := range refusals {
		if errors.Is(err, r) {
			return NotAuthorized
		}
	}
	return Failed
}
