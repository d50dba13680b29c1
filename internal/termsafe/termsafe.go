// Package termsafe makes text that arrived from the wire safe to print on a terminal.
package termsafe

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Sanitize returns s with everything removed that would let a peer's text act on a
// terminal or disguise itself there, for showing a display name, an activity or a role that
// arrived from the wire. It removes:
//
//   - whole escape sequences: CSI ("ESC [" or U+009B, up to its final byte), the control strings
//     OSC, DCS, SOS, PM and APC (up to BEL or ST, or the end of s), and the other "ESC x" escapes;
//   - every other C0 and C1 control character and DEL, so tab and newline go too;
//   - every format character (Unicode category Cf): the bidi controls U+061C, U+200E, U+200F,
//     U+202A–U+202E and U+2066–U+2069, the zero-width U+200B–U+200D and U+2060, the BOM
//     U+FEFF, and the rest of the invisible characters in that category;
//   - the line and paragraph separators U+2028 and U+2029, and the Hangul fillers U+115F,
//     U+1160, U+3164 and U+FFA0, letters that draw nothing and make a name look blank.
//
// Invalid UTF-8 becomes U+FFFD. Letters, marks, digits, punctuation, symbols and spaces of every
// script are kept. The result contains none of the removed runes, so sanitizing it again changes
// nothing. It does not quote or shorten: a caller that places the text among other fields decides
// how to delimit it.
func Sanitize(s string) string {
	if terminalSafe(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == ctlESC || (0x80 <= r && r <= 0x9f):
			i = escapeEnd(s, i)
			continue
		case r == utf8.RuneError && n == 1:
			b.WriteRune(utf8.RuneError)
		case !hiddenOnTerminal(r):
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// terminalSafe reports whether Sanitize would return s unchanged, so the common case
// allocates nothing.
func terminalSafe(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return false
			}
		}
		if hiddenOnTerminal(r) {
			return false
		}
	}
	return true
}

// hiddenOnTerminal reports whether Sanitize removes r wherever it stands: a control
// character (C0, DEL, C1), a format character, a line or paragraph separator, or a Hangul filler.
func hiddenOnTerminal(r rune) bool {
	switch {
	case r < 0x20 || (0x7f <= r && r <= 0x9f):
		return true
	case r < 0x7f:
		return false // printable ASCII, the common case
	}
	switch r {
	case 0x2028, 0x2029, 0x115f, 0x1160, 0x3164, 0xffa0:
		return true
	}
	return unicode.Is(unicode.Cf, r)
}

// The C0 and C1 controls that begin or end an escape sequence or a control string (ECMA-48 §5).
const (
	ctlESC = 0x1b
	ctlBEL = 0x07
	ctlDCS = 0x90
	ctlSOS = 0x98
	ctlCSI = 0x9b
	ctlST  = 0x9c
	ctlOSC = 0x9d
	ctlPM  = 0x9e
	ctlAPC = 0x9f
)

// escapeEnd returns the index just past the escape sequence or control string that starts at
// s[i] with ESC or a C1 control, as a terminal would consume it. A lone introducer, or one
// followed by something that cannot continue it, ends at once, and the rest of s is read as text
// again.
func escapeEnd(s string, i int) int {
	r, n := utf8.DecodeRuneInString(s[i:])
	j := i + n
	if r == ctlESC {
		if j == len(s) {
			return j
		}
		switch c := s[j]; {
		case c == '[':
			r, j = ctlCSI, j+1
		case c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_':
			r, j = ctlOSC, j+1 // OSC, DCS, SOS, PM and APC all run to a terminator
		case 0x20 <= c && c <= 0x2f: // intermediate bytes, then a final byte (ECMA-35 nF)
			for j < len(s) && 0x20 <= s[j] && s[j] <= 0x2f {
				j++
			}
			if j < len(s) && 0x30 <= s[j] && s[j] <= 0x7e {
				j++
			}
			return j
		case 0x30 <= c && c <= 0x7e: // a two-byte escape, such as ESC c (reset) or ESC 7
			return j + 1
		default:
			return j
		}
	}
	switch r {
	case ctlCSI:
		// Parameter (0x30–0x3F) and intermediate (0x20–0x2F) bytes, then one final byte.
		for j < len(s) && 0x20 <= s[j] && s[j] <= 0x3f {
			j++
		}
		if j < len(s) && 0x40 <= s[j] && s[j] <= 0x7e {
			j++
		}
		return j
	case ctlOSC, ctlDCS, ctlSOS, ctlPM, ctlAPC:
		for j < len(s) {
			r, n := utf8.DecodeRuneInString(s[j:])
			switch {
			case r == ctlBEL || r == ctlST:
				return j + n
			case r == ctlESC && j+1 < len(s) && s[j+1] == '\\':
				return j + 2 // ST as ESC \
			case r == ctlESC:
				return j // another sequence begins, which ends this one
			}
			j += n
		}
		return j
	}
	return j // any other C1 control stands alone
}

// Cut shortens s to at most n bytes on a rune boundary, marking a cut with "…".
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
