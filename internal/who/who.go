// Package who renders a peer for a person to read: its display name, which is the peer's own
// claim, beside its principal, which the broker checked. The console, the terminal UI and the
// dashboard all show peers this way, so a name cannot pose as another peer in any of them.
package who

import (
	"strconv"
	"strings"
	"unicode"

	"github.com/gocotal/cotal/internal/termsafe"
)

// Is renders a peer as its display name followed by its principal in parentheses, as in
// "alice (local.mallory)". The name is stripped of control, bidi and other invisible characters
// (termsafe.Sanitize), and quoted when it holds a parenthesis, a colon or a quote, with
// which it could pass for another sender's attribution. principal must come from what the broker
// checked (a subject, a presence key). An empty name shows the principal alone.
func Is(name, principal string) string {
	n := termsafe.Sanitize(name)
	switch {
	case n == "":
		return "(" + Word(principal) + ")"
	case strings.ContainsAny(n, `():"`):
		n = strconv.Quote(n)
	}
	return n + " (" + Word(principal) + ")"
}

// Word renders a peer-supplied token that sits among a line's fields (a role, a channel, a key):
// stripped like a name, and quoted unless it is one plain word, so it cannot pose as more fields.
func Word(s string) string {
	s = termsafe.Sanitize(s)
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune(`():"`, r) }) {
		return s
	}
	return strconv.Quote(s)
}
