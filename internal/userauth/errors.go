package userauth

import (
	"errors"
	"fmt"
)

// Errors callers branch on, for errors.Is.
var (
	// ErrDenied matches every refusal of a bearer or an exchange: a *BearerError, a row that no
	// longer grants what the bearer claims, a failed root-credential check.
	ErrDenied = errors.New("userauth: denied")
	// ErrNoRow is returned by the people ledger when no row grants the principal.
	ErrNoRow = errors.New("userauth: no ledger row")
	// ErrUnavailable is returned (wrapped) by a RootCredentials or ManagerSelector implementation
	// when its store cannot answer right now. The exchange answers it with 503 rather than a
	// refusal, so a caller retries instead of giving up.
	ErrUnavailable = errors.New("userauth: authority store unavailable")
)

// BearerError is a refused bearer. Reason names the rule it broke, for the operator's log; a
// caller sends its peer a generic refusal instead, so a prober learns nothing. It matches
// ErrDenied.
type BearerError struct {
	Reason string
}

// Error implements error.
func (e *BearerError) Error() string { return "bearer refused: " + e.Reason }

// Is makes a *BearerError match ErrDenied.
func (e *BearerError) Is(target error) bool { return target == ErrDenied }

func bearerErr(format string, args ...any) *BearerError {
	return &BearerError{Reason: fmt.Sprintf(format, args...)}
}

// FileError reports a state file (owner-secret.json, issuer.json, a file of the people ledger's
// old layout awaiting import) that exists but cannot be used. The file is never rewritten: it may
// hold the only copy of a secret every owner or bearer of the space depends on.
type FileError struct {
	Path string
	Err  error
}

// Error implements error.
func (e *FileError) Error() string {
	return fmt.Sprintf("%s: %v (left untouched; restore or remove it)", e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *FileError) Unwrap() error { return e.Err }

// RowError reports a key of the people ledger that holds no usable row: a corrupt or oversized
// value, one not valid for its kind, one that names another principal, or a key outside the
// grammar. It never grants anything and is left as it is; revoking or granting the principal
// again replaces it.
type RowError struct {
	Key string
	Err error
}

// Error implements error.
func (e *RowError) Error() string { return fmt.Sprintf("people ledger key %s: %v", e.Key, e.Err) }

// Unwrap returns the cause.
func (e *RowError) Unwrap() error { return e.Err }
