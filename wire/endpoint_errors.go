package wire

import (
	"encoding/json"
	"fmt"
	"slices"
)

// ErrorCode is the code of an endpoint error (SPEC §13.3 error catalog): one of the catalog codes
// below, or an extension code under reverse-DNS. The catalog is append-only: a code is a wire
// value, so none is ever renamed or removed.
type ErrorCode string

// The catalog codes of SPEC §13.3.
const (
	CodeBadRequest         ErrorCode = "bad-request"
	CodeUnsupportedVersion ErrorCode = "unsupported-version"
	CodeOpMismatch         ErrorCode = "op-mismatch"
	CodeClassMismatch      ErrorCode = "class-mismatch"
	CodeTargetMismatch     ErrorCode = "target-mismatch"
	CodeSenderMismatch     ErrorCode = "sender-mismatch"
	CodeUnauthenticated    ErrorCode = "unauthenticated"
	CodePermissionDenied   ErrorCode = "permission-denied"
	CodeNotFound           ErrorCode = "not-found"
	CodeAlreadyExists      ErrorCode = "already-exists"
	CodeConflict           ErrorCode = "conflict" // CAS or fencing loss, fingerprint conflict, duplicate resume
	CodeContractMismatch   ErrorCode = "contract-mismatch"
	CodeContractInvalid    ErrorCode = "contract-invalid" // a schema outside the profile or over budget at registration
	CodeFailedPrecondition ErrorCode = "failed-precondition"
	CodeDeadlineExceeded   ErrorCode = "deadline-exceeded"
	CodeCancelled          ErrorCode = "cancelled"
	CodeExpired            ErrorCode = "expired"     // lease, handle, lifecycle UID, epoch, token
	CodeUnavailable        ErrorCode = "unavailable" // no responder
	CodeUnimplemented      ErrorCode = "unimplemented"
	CodeResourceExhausted  ErrorCode = "resource-exhausted"
	CodeInternal           ErrorCode = "internal"
)

// catalogCodes lists the catalog in SPEC order.
var catalogCodes = [...]ErrorCode{
	CodeBadRequest, CodeUnsupportedVersion, CodeOpMismatch, CodeClassMismatch, CodeTargetMismatch,
	CodeSenderMismatch, CodeUnauthenticated, CodePermissionDenied, CodeNotFound, CodeAlreadyExists,
	CodeConflict, CodeContractMismatch, CodeContractInvalid, CodeFailedPrecondition,
	CodeDeadlineExceeded, CodeCancelled, CodeExpired, CodeUnavailable, CodeUnimplemented,
	CodeResourceExhausted, CodeInternal,
}

// parseErrorCode returns s as an ErrorCode: a catalog code, or an extension code of two or more
// reverse-DNS labels [a-z0-9]([a-z0-9-]*[a-z0-9])? of at most 64 bytes in all. It returns a
// *ValidationError for anything else, including a bare unknown word.
func parseErrorCode(s string) (ErrorCode, error) {
	c := ErrorCode(s)
	if c.isCatalog() {
		return c, nil
	}
	// An extension code has the grammar of a third-party endpoint name: lower-case DNS labels,
	// two or more, within the same 64-byte bound.
	if n, err := ParseEndpointName(s); err == nil && !n.reserved() {
		return c, nil
	}
	return "", Invalid("code", s, "must be a catalog code or a reverse-DNS extension code (such as com.acme.quota) of at most 64 bytes")
}

// isCatalog reports whether c is one of the catalog codes, which facts that carry a "catalog
// token" (RejectionFact, QuarantineFact) are limited to.
func (c ErrorCode) isCatalog() bool { return slices.Contains(catalogCodes[:], c) }

// Outcome says whether the effect of a refused command occurred (SPEC §13.3 "Effect outcome"). A
// responder that refuses before its handler runs says OutcomeNotExecuted, after it
// OutcomeExecuted, and OutcomeUnknown when it cannot tell.
type Outcome string

// The three effect outcomes.
const (
	OutcomeExecuted    Outcome = "executed"
	OutcomeNotExecuted Outcome = "not-executed"
	OutcomeUnknown     Outcome = "unknown"
)

func (o Outcome) valid() bool {
	return o == OutcomeExecuted || o == OutcomeNotExecuted || o == OutcomeUnknown
}

// The error detail kinds Cotal defines (details[].kind).
const (
	// DetailBindRefused marks a responder's refusal of a request whose bind names another
	// incarnation; it asserts the command did not run.
	DetailBindRefused = "ai.cotal.ep.bind-refused"
	// DetailUnboundResponder marks a caller's rejection of a reply from an incarnation other than
	// the one it bound; the command may have run.
	DetailUnboundResponder = "ai.cotal.ep.unbound-responder"
	// DetailLifecycleBlocked marks a refusal because a lifecycle barrier holds the target.
	DetailLifecycleBlocked = "ai.cotal.ep.lifecycle-blocked"
	// DetailGoalOutcome attaches a settled goal's terminal fact (member "outcome") to the
	// failed-precondition of a cancel that came too late (SPEC §13.6: the cached outcome).
	DetailGoalOutcome = "ai.cotal.ep.goal-outcome"
)

// ErrorDetail is one entry of an error's details: a reverse-DNS Kind and the entry's other
// members, kept verbatim in Extra (the way Part keeps an extension part's fields) so a detail
// relayed through Go loses nothing.
type ErrorDetail struct {
	Kind  string
	Extra map[string]json.RawMessage
}

// MarshalJSON implements json.Marshaler, writing kind beside the Extra members.
func (d ErrorDetail) MarshalJSON() ([]byte, error) {
	fields := make(map[string]json.RawMessage, len(d.Extra)+1)
	for k, v := range d.Extra {
		fields[k] = v
	}
	kind, err := json.Marshal(d.Kind)
	if err != nil {
		return nil, err
	}
	fields["kind"] = kind
	return json.Marshal(fields)
}

// UnmarshalJSON implements json.Unmarshaler: an object with a string kind, whose other members
// go to Extra. It returns a *ValidationError for any other shape.
func (d *ErrorDetail) UnmarshalJSON(data []byte) error {
	f, err := envObject(data, "")
	if err != nil {
		return err
	}
	var out ErrorDetail
	if err := f.str("kind", &out.Kind, memberRequired); err != nil {
		return err
	}
	delete(f, "kind")
	if len(f) > 0 {
		out.Extra = f
	}
	*d = out
	return nil
}

func (d *ErrorDetail) validate() error {
	// A detail kind is checked with the schema's reverse-DNS pattern, the one extension part kinds
	// use, rather than the stricter lower-case grammar of codes and endpoint names: a detail is
	// informative, and refusing a whole reply over the case of one is not worth it.
	if !PartKind(d.Kind).isExtension() {
		return Invalid("kind", d.Kind, "must be reverse-DNS, such as ai.cotal.ep.bind-refused")
	}
	if _, ok := d.Extra["kind"]; ok {
		return Invalid("kind", "", "a detail's kind is its Kind field, not an Extra entry")
	}
	for k, v := range d.Extra {
		if !json.Valid(v) {
			return Invalid(k, "", "must be a JSON value")
		}
	}
	return nil
}

// EndpointError is the error object of an endpoint reply (SPEC §13.3): a code, a message for
// people, optional details, and the responder's statement of whether the effect occurred. It is
// also the error Go code returns for a refused request or reply, so callers reach it with
// errors.As. The zero value is not a valid error; build one with NewEndpointError.
type EndpointError struct {
	Code    ErrorCode     `json:"code"`
	Message string        `json:"message"`
	Details []ErrorDetail `json:"details,omitempty"`
	// Outcome is empty when the reply omitted it, which reads as OutcomeUnknown.
	Outcome Outcome `json:"outcome,omitempty"`
}

// NewEndpointError returns an error with code and outcome whose message is format formatted with
// args.
func NewEndpointError(code ErrorCode, outcome Outcome, format string, args ...any) *EndpointError {
	return &EndpointError{Code: code, Message: fmt.Sprintf(format, args...), Outcome: outcome}
}

// refusal turns a *ValidationError into the EndpointError that reports it.
func refusal(code ErrorCode, outcome Outcome, err error) *EndpointError {
	return &EndpointError{Code: code, Message: err.Error(), Outcome: outcome}
}

// Error implements error with the code and the message.
func (e *EndpointError) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Message
}

// OutcomeOrUnknown returns e's outcome, or OutcomeUnknown when the reply omitted it, as SPEC §13.3
// says a caller must read an error without one.
func (e *EndpointError) OutcomeOrUnknown() Outcome {
	if e.Outcome == "" {
		return OutcomeUnknown
	}
	return e.Outcome
}

// WithDetail returns a copy of e with one more detail of kind kind; e itself is not changed.
func (e *EndpointError) WithDetail(kind string) *EndpointError {
	out := *e
	out.Details = append(slices.Clip(e.Details), ErrorDetail{Kind: kind})
	return &out
}

// HasDetail reports whether e carries a detail of kind kind.
func (e *EndpointError) HasDetail(kind string) bool {
	return slices.ContainsFunc(e.Details, func(d ErrorDetail) bool { return d.Kind == kind })
}

// Validate checks e as a reply carries it: a valid code, an outcome from the three when present,
// and reverse-DNS detail kinds. It returns a *ValidationError naming the first bad field.
func (e *EndpointError) Validate() error {
	if _, err := parseErrorCode(string(e.Code)); err != nil {
		return err
	}
	if e.Outcome != "" && !e.Outcome.valid() {
		return Invalid("outcome", string(e.Outcome), `must be "executed", "not-executed" or "unknown"`)
	}
	for i := range e.Details {
		if err := e.Details[i].validate(); err != nil {
			return Within(fmt.Sprintf("details[%d]", i), err)
		}
	}
	return nil
}

// UnmarshalJSON implements json.Unmarshaler with exact member names: code and message are
// required strings, details an array of detail objects, outcome a string. It does not check the
// values; Validate does. Unknown members are ignored.
func (e *EndpointError) UnmarshalJSON(data []byte) error {
	f, err := envObject(data, "")
	if err != nil {
		return err
	}
	var out EndpointError
	var code, outcome string
	if err := f.str("code", &code, memberRequired); err != nil {
		return err
	}
	if err := f.str("message", &out.Message, memberRequired); err != nil {
		return err
	}
	if err := f.str("outcome", &outcome, memberNonEmpty); err != nil {
		return err
	}
	out.Code, out.Outcome = ErrorCode(code), Outcome(outcome)
	if raw, ok := f["details"]; ok {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil || items == nil {
			return Invalid("details", "", "must be an array")
		}
		if len(items) > 0 {
			out.Details = make([]ErrorDetail, len(items))
		}
		for i, item := range items {
			if err := out.Details[i].UnmarshalJSON(item); err != nil {
				return Within(fmt.Sprintf("details[%d]", i), err)
			}
		}
	}
	*e = out
	return nil
}
