package wire

import "unicode/utf8"

// appendJSONString appends s as json.Marshal writes a string, byte for byte: HTML-escaped (<, >
// and & as \u003c, \u003e, \u0026), invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped. It skips
// the bytes that need nothing eight at a time, where encoding/json looks each one up, which made
// encoding a large text part the larger part of sending it. FuzzAppendJSONString holds it to
// json.Marshal.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start, i := 0, 0
	for i < len(s) {
		if i+8 <= len(s) && plainWord(word(s[i:i+8])) {
			i += 8
			continue
		}
		// Somewhere in the next eight bytes is one to escape: take them one at a time.
		for end := min(i+8, len(s)); i < end; {
			b := s[i]
			if b < utf8.RuneSelf {
				i++
				if plainByte(b) {
					continue
				}
				dst = appendEscaped(append(dst, s[start:i-1]...), b) // <, > and & as \u00xx
				start = i
				continue
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				dst = append(append(dst, s[start:i]...), `\ufffd`...)
			case r == '\u2028' || r == '\u2029':
				dst = append(append(dst, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			default:
				i += size // a rune written as itself
				continue
			}
			i += size
			start = i
		}
	}
	return append(append(dst, s[start:]...), '"')
}

const hexDigits = "0123456789abcdef"

// appendEscaped appends the JSON escape of an ASCII byte that is not written as itself: a quote
// or a backslash behind a backslash, \b, \f, \n, \r and \t in their short forms, and any other as
// \u00xx in lower-case hex. encoding/json and RFC 8785 both write these.
func appendEscaped(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
}

// plainByte reports whether an ASCII byte is written as itself.
func plainByte(b byte) bool {
	return b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
}

// plainWord reports whether all eight bytes of w are written as themselves: none is a control
// character, non-ASCII, a quote, a backslash, <, > or &. A word has a byte below n (n <= 128)
// exactly when (w - n*ones) &^ w & highs is not zero, and a byte equal to c exactly when w^(c*ones)
// has a zero byte.
func plainWord(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, bs, lt, gt, amp := w^('"'*ones), w^('\\'*ones), w^('<'*ones), w^('>'*ones), w^('&'*ones)
	bad := w | (w-0x20*ones)&^w |
		(q-ones)&^q | (bs-ones)&^bs | (lt-ones)&^lt | (gt-ones)&^gt | (amp-ones)&^amp
	return bad&highs == 0
}

// word is the eight bytes of s as a little-endian integer, which the compiler reads in one load.
func word(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// appendTextPart appends a text part as json.Marshal writes it.
func appendTextPart(dst []byte, text string) []byte {
	return append(appendJSONString(append(dst, textPartHead...), text), '}')
}
