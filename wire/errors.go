package wire

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrInvalid is matched by every *ValidationError, so a caller can tell "this input breaks the
// contract" apart from I/O failures with errors.Is.
var ErrInvalid = errors.New("invalid")

// ValidationError reports a value that breaks a rule of the wire contract. Field names what was
// checked ("owner", "channel", "parts[2].data.a[0]"), Value is the offending input (shortened when
// long) and Rule states the rule in words.
type ValidationError struct {
	Field string
	Value string
	Rule  string
}

// maxQuotedValue bounds how much of an offending value an error repeats: errors end up in logs and
// tool results, and a 4 KiB channel name helps nobody there.
const maxQuotedValue = 64

// Invalid returns the *ValidationError of value in field breaking rule, the value shortened
// when long.
func Invalid(field, value, rule string) *ValidationError {
	return &ValidationError{Field: field, Value: shorten(value), Rule: rule}
}

// Invalidf is Invalid with the rule formatted as fmt.Sprintf does.
func Invalidf(field, value, format string, args ...any) *ValidationError {
	return Invalid(field, value, fmt.Sprintf(format, args...))
}

// Error implements error.
func (e *ValidationError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("invalid %s: %s", e.Field, e.Rule)
	}
	return fmt.Sprintf("invalid %s %q: %s", e.Field, e.Value, e.Rule)
}

// Is reports whether target is ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// shorten cuts s to maxQuotedValue bytes on a rune boundary, marking the cut.
func shorten(s string) string {
	if len(s) <= maxQuotedValue {
		return s
	}
	cut := maxQuotedValue
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Within prefixes the Field of a *ValidationError with a parent path, so a nested failure reads
// as "from.id" or "parts[1].digest"; other errors pass through unchanged.
func Within(parent string, err error) error {
	var v *ValidationError
	if err == nil || !errors.As(err, &v) {
		return err
	}
	nested := *v
	switch {
	case nested.Field == "":
		nested.Field = parent
	case nested.Field[0] == '[':
		nested.Field = parent + nested.Field
	default:
		nested.Field = parent + "." + nested.Field
	}
	return &nested
}
