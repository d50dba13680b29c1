// Package exit maps command errors to the cotal binary's exit codes. The codes are part of the
// CLI's contract with scripts: new ones are added, existing ones never renumbered.
package exit

import "errors"

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

// AuthError marks a refusal by the broker or by a credential's limits.
type AuthError struct{ Err error }

// Error implements error.
func (e *AuthError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *AuthError) Unwrap() error { return e.Err }

// Code returns the exit code for err: OK for nil, Usage for a *UsageError, NotAuthorized for an
// *AuthError, and Failed otherwise.
func Code(err error) int {
	if err == nil {
		return OK
	}
	if _, ok := errors.AsType[*UsageError](err); ok {
		return Usage
	}
	if _, ok := errors.AsType[*AuthError](err); ok {
		return NotAuthorized
	}
	return Failed
}
