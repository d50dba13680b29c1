package wire

import (
	"bytes"
	"encoding/json"
)

// decodeEnvelopeFast decodes the common shape of a message in one pass without reflection. That
// shape is a JSON object holding only the envelope's keys, each once and spelled exactly. ts
// and numbers in parts are plain integers, from holds only strings, mentions only strings, and
// parts only flat objects of strings and integers. Cotal clients write this shape for text and
// artifact parts; a data part's nested value falls back. A string with escapes is decoded by
// encoding/json itself. ok is false for anything else, and the caller then decodes with
// encoding/json, so the fast path never decides what the general decoder would decide
// differently (FuzzEnvelopeFast holds it to that). data must be valid UTF-8.
func decodeEnvelopeFast(data []byte) (e *envelope, ok bool) {
	s := &scanner{b: data}
	e = &envelope{}
	var seen uint16
	if !s.next('{') {
		return nil, false
	}
	if s.next('}') {
		return e, s.end()
	}
	for {
		key, ok := s.key()
		if !ok || !s.next(':') {
			return nil, false
		}
		bit, ok := envelopeKeys[string(key)] // looked up without a copy
		if !ok || seen&bit != 0 {
			return nil, false // an unknown, duplicate or differently spelled key: the general decoder's call
		}
		seen |= bit
		if !s.field(e, bit) {
			return nil, false
		}
		if s.next('}') {
			return e, s.end()
		}
		if !s.next(',') {
			return nil, false
		}
	}
}

// The envelope's keys, each a bit, to refuse duplicates.
const (
	keyID uint16 = 1 << iota
	keyTS
	keySpace
	keyFrom
	keyChannel
	keyTo
	keyToService
	keyMentions
	keyParts
	keyReplyTo
	keyContextID
)

// envelopeKeys gives each envelope key its bit.
var envelopeKeys = map[string]uint16{
	"id": keyID, "ts": keyTS, "space": keySpace, "from": keyFrom, "channel": keyChannel, "to": keyTo,
	"toService": keyToService, "mentions": keyMentions, "parts": keyParts, "replyTo": keyReplyTo, "contextId": keyContextID,
}

// field reads the value of the key whose bit is key into e.
func (s *scanner) field(e *envelope, key uint16) bool {
	var ok bool
	switch key {
	case keyTS:
		raw, ok := s.integer()
		if !ok {
			return false
		}
		var ts EpochMillis
		if ts.UnmarshalJSON(raw) != nil {
			return false
		}
		e.TS = &ts
		return true
	case keyFrom:
		e.From, ok = s.ref()
		return ok
	case keyMentions:
		e.Mentions, ok = s.strings()
		return ok
	case keyParts:
		e.Parts, e.texts, ok = s.parts()
		return ok
	}
	v, ok := s.str()
	if !ok {
		return false
	}
	switch key {
	case keyID:
		e.ID = &v
	case keySpace:
		e.Space = &v
	case keyChannel:
		e.Channel = &v
	case keyTo:
		e.To = &v
	case keyToService:
		e.ToService = &v
	case keyReplyTo:
		e.ReplyTo = v
	case keyContextID:
		e.ContextID = v
	}
	return true
}

// scanner reads the fast path's JSON subset.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next consumes c after optional whitespace.
func (s *scanner) next(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end reports whether only whitespace is left.
func (s *scanner) end() bool {
	s.space()
	return s.i == len(s.b)
}

// token reads a JSON string token, quotes included, and reports whether it holds an escape. A
// token without one is checked here (no control character, valid UTF-8 being the caller's); one
// with escapes is left to encoding/json, which decides what the general decoder would.
func (s *scanner) token() (tok []byte, escaped, ok bool) {
	if !s.next('"') {
		return nil, false, false
	}
	start := s.i - 1
	quote := -1 // the next quote at or after s.i, once found: found once, however many escapes
	for {
		if quote < s.i {
			j := bytes.IndexByte(s.b[s.i:], '"')
			if j < 0 {
				return nil, false, false
			}
			quote = s.i + j
		}
		k := bytes.IndexByte(s.b[s.i:quote], '\\')
		if k < 0 {
			s.i = quote + 1
			break
		}
		escaped = true
		s.i += k + 2 // the backslash and the character it escapes; encoding/json judges the pair
		if s.i > len(s.b) {
			return nil, false, false
		}
	}
	tok = s.b[start:s.i]
	if hasControl(tok) {
		return nil, false, false
	}
	return tok, escaped, true
}

// key reads an object key, which the fast path takes only unescaped, and returns its content
// within s's bytes.
func (s *scanner) key() ([]byte, bool) {
	tok, escaped, ok := s.token()
	if !ok || escaped {
		return nil, false
	}
	return tok[1 : len(tok)-1], true
}

// str reads a string and returns its content.
func (s *scanner) str() (string, bool) {
	tok, escaped, ok := s.token()
	if !ok {
		return "", false
	}
	if !escaped {
		return string(tok[1 : len(tok)-1]), true
	}
	var v string
	if json.Unmarshal(tok, &v) != nil {
		return "", false
	}
	return v, true
}

// skipStr reads a string whose content is not needed, only that it is valid.
func (s *scanner) skipStr() bool {
	tok, escaped, ok := s.token()
	return ok && (!escaped || json.Valid(tok))
}

// integer reads -?(0|[1-9][0-9]*) not followed by a fraction or exponent.
func (s *scanner) integer() ([]byte, bool) {
	s.space()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	n := s.i - digits
	if n == 0 || (n > 1 && s.b[digits] == '0') {
		return nil, false
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return nil, false
	}
	return s.b[start:s.i], true
}

// ref reads a from object of the keys id, name and role, each once.
func (s *scanner) ref() (*refEnvelope, bool) {
	r := &refEnvelope{}
	if !s.next('{') {
		return nil, false
	}
	if s.next('}') {
		return r, true
	}
	var seen [3]bool
	for {
		key, ok := s.key()
		if !ok || !s.next(':') {
			return nil, false
		}
		v, ok := s.str()
		if !ok {
			return nil, false
		}
		switch { // each compared without a copy
		case string(key) == "id" && !seen[0]:
			seen[0], r.ID = true, &v
		case string(key) == "name" && !seen[1]:
			seen[1], r.Name = true, &v
		case string(key) == "role" && !seen[2]:
			seen[2], r.Role = true, v
		default:
			return nil, false
		}
		if s.next('}') {
			return r, true
		}
		if !s.next(',') {
			return nil, false
		}
	}
}

// strings reads an array of strings; empty, it is empty rather than nil, as encoding/json
// decodes it.
func (s *scanner) strings() ([]string, bool) {
	out := []string{}
	ok := s.array(func() bool {
		v, ok := s.str()
		out = append(out, v)
		return ok
	})
	return out, ok
}

// parts reads an array of part objects as their raw bytes. A part in plain text form (see
// plainTextPart) is read as the text part it is in the same pass, and returned in texts at its
// index; texts is nil when no part was.
func (s *scanner) parts() (raws []json.RawMessage, texts []Part, ok bool) {
	raws = []json.RawMessage{}
	ok = s.array(func() bool {
		s.space()
		if text, raw, ok := s.plainText(); ok {
			if texts == nil {
				texts = make([]Part, len(raws), len(raws)+1)
			}
			raws, texts = append(raws, raw), append(texts, Part{Kind: PartText, Text: text})
			return true
		}
		raw, ok := s.object()
		raws = append(raws, raw)
		if texts != nil {
			texts = append(texts, Part{})
		}
		return ok
	})
	return raws, texts, ok
}

// plainText reads a part in plain text form, {"kind":"text","text":"..."} with no space after
// the text, as plainTextPart reads it from the part's bytes; data being valid UTF-8, so is the
// text. Otherwise it reads nothing.
func (s *scanner) plainText() (text string, raw json.RawMessage, ok bool) {
	start := s.i
	if !bytes.HasPrefix(s.b[s.i:], []byte(textPartHead)) {
		return "", nil, false
	}
	s.i += len(textPartHead)
	if text, ok = s.str(); !ok || s.i >= len(s.b) || s.b[s.i] != '}' {
		s.i = start
		return "", nil, false
	}
	s.i++
	return text, s.b[start:s.i], true
}

// array reads [elem, ...] with each element read by elem.
func (s *scanner) array(elem func() bool) bool {
	if !s.next('[') {
		return false
	}
	if s.next(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if s.next(']') {
			return true
		}
		if !s.next(',') {
			return false
		}
	}
}

// object reads an object whose values are escape-free strings or plain integers, and returns its
// bytes as they stand.
func (s *scanner) object() (json.RawMessage, bool) {
	s.space()
	start := s.i
	if !s.next('{') {
		return nil, false
	}
	if s.next('}') {
		return s.b[start:s.i], true
	}
	for {
		if !s.skipStr() || !s.next(':') {
			return nil, false
		}
		s.space()
		if s.i < len(s.b) && s.b[s.i] == '"' {
			if !s.skipStr() {
				return nil, false
			}
		} else if _, ok := s.integer(); !ok {
			return nil, false
		}
		if s.next('}') {
			return s.b[start:s.i], true
		}
		if !s.next(',') {
			return nil, false
		}
	}
}
