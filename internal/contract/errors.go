package contract

import (
	"errors"
	"fmt"

	"github.com/gocotal/cotal/wire"
)

// Sentinels matched with errors.Is. ErrInvalid and ErrBadRequest name the SPEC §13.3 catalog code
// a caller answers with.
var (
	// ErrInvalid is matched by every refusal of a contract at registration: a schema outside the
	// JSON Schema profile or over one of its bounds, or a malformed declaration (contract-invalid).
	ErrInvalid = errors.New(string(wire.CodeContractInvalid))
	// ErrBadRequest is matched by every *ValueError: a value refused at invocation (bad-request).
	ErrBadRequest = errors.New(string(wire.CodeBadRequest))
	// ErrNotFound reports that no artifact is published at a digest.
	ErrNotFound = errors.New("contract: no artifact is published at this digest")
	// ErrCorrupt reports that the message stored at a digest subject is not the strict canonical
	// JSON whose digest names the subject. A reader fails loud on it (SPEC §13.7).
	ErrCorrupt = errors.New("contract: the stored artifact does not match its digest")
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// ValueError is an argument or reply that its schema refuses. It matches ErrBadRequest.
type ValueError struct {
	// Path is the JSON Pointer (RFC 6901) of the failing value; "" is the whole value.
	Path string
	// Reason says which rule of the schema the value breaks.
	Reason string
}

// Error names the failing path and the broken rule.
func (e *ValueError) Error() string {
	at := "the value"
	if e.Path != "" {
		at = "at " + e.Path
	}
	return fmt.Sprintf("%s: %s: %s", wire.CodeBadRequest, at, e.Reason)
}

// Is reports whether target is ErrBadRequest.
func (e *ValueError) Is(target error) bool { return target == ErrBadRequest }
