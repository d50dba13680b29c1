package wire

import (
	"bytes"
	"encoding/json"
	"strings"
	"unsafe"
)

// decodeEnvelopeFast decodes the common shape of a message in one pass without reflection. That
// shape is a JSON object holding only the envelope's keys, each once and spelled exactly. ts
// and numbers in parts are plain integers, from holds only strings, mentions only strings, and
// parts only flat objects of strings and integers. Cotal clients write this shape for text and
// artifact parts; a data part's nested value falls back. A string with escapes is decoded by
// encoding/json itself. ok is false for anything else, and the caller then decodes with
// encoding/json, so the fast path never decides what the general decoder would decide
// differently (FuzzEnvelopeFast holds it to that). data must be valid UTF-8.
//
// The decoded strings share one copy of data, or data itself when owned (the caller gives it
// away and never changes it), and the envelope's fields point into its own storage, so a message
// costs a handful of allocations rather than one per field. The strings a receiver keeps past
// the message (its id, replyTo and contextId, as de-duplication and correlation keys) are copied
// on their own, so that keeping them does not pin the payload.
func decodeEnvelopeFast(data []byte, owned bool) (e *envelope, ok bool) {
	src := unsafe.String(unsafe.SliceData(data), len(data))
	if !owned {
		src = string(data)
	}
	s := &scanner{b: data, src: src}
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
		if e.own.ts.UnmarshalJSON(raw) != nil {
			return false
		}
		e.TS = &e.own.ts
		return true
	case keyFrom:
		e.From, ok = &e.own.from, s.ref(&e.own.from, &e.own.fromID, &e.own.fromName)
		return ok
	case keyMentions:
		e.Mentions, ok = s.strings()
		return ok
	case keyParts:
		e.Parts, e.texts, ok = s.parts(e.own.parts[:0], e.own.texts[:0])
		return ok
	}
	v, ok := s.str()
	if !ok {
		return false
	}
	switch key {
	case keyID:
		e.own.id = strings.Clone(v)
		e.ID = &e.own.id
	case keySpace:
		e.own.space = v
		e.Space = &e.own.space
	case keyChannel:
		e.own.channel = v
		e.Channel = &e.own.channel
	case keyTo:
		e.own.to = v
		e.To = &e.own.to
	case keyToService:
		e.own.toService = v
		e.ToService = &e.own.toService
	case keyReplyTo:
		e.ReplyTo = strings.Clone(v)
	case keyContextID:
		e.ContextID = strings.Clone(v)
	}
	return true
}

// ownValues is the storage the one-pass decoder points an envelope's fields into, held in the
// envelope itself; room for one part, the common case, before the parts need their own.
type ownValues struct {
	id, space, channel, to, toService string
	ts                                EpochMillis
	from                              refEnvelope
	fromID, fromName                  string
	parts                             [1]json.RawMessage
	texts                             [1]Part
}

// scanner reads the fast path's JSON subset.
type scanner struct {
	b []byte
	i int
	// src, when set, is b as a string: unescaped strings are cut from it rather than copied.
	src string
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
		if s.src != "" { // tok ends at s.i
			return s.src[s.i-len(tok)+1 : s.i-1], true
		}
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

// ref reads a from object of the keys id, name and role, each once, into r, pointing its id and
// name at id and name.
func (s *scanner) ref(r *refEnvelope, id, name *string) bool {
	if !s.next('{') {
		return false
	}
	if s.next('}') {
		return true
	}
	var seen [3]bool
	for {
		key, ok := s.key()
		if !ok || !s.next(':') {
			return false
		}
		v, ok := s.str()
		if !ok {
			return false
		}
		switch { // each compared without a copy
		case string(key) == "id" && !seen[0]:
			seen[0], *id, r.ID = true, v, id
		case string(key) == "name" && !seen[1]:
			seen[1], *name, r.Name = true, v, name
		case string(key) == "role" && !seen[2]:
			seen[2], r.Role = true, v
		default:
			return false
		}
		if s.next('}') {
			return true
		}
		if !s.next(',') {
			return false
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

// parts reads an array of part objects as their raw bytes, appended to raws (empty, not nil). A
// part in plain text form (see plainTextPart) is read as the text part it is in the same pass,
// and its Part appended to texts (empty) at its index; texts is empty when no part was.
func (s *scanner) parts(raws []json.RawMessage, texts []Part) ([]json.RawMessage, []Part, bool) {
	ok := s.array(func() bool {
		s.space()
		if text, raw, ok := s.plainText(); ok {
			for len(texts) < len(raws) {
				texts = append(texts, Part{})
			}
			raws, texts = append(raws, raw), append(texts, Part{Kind: PartText, Text: text})
			return true
		}
		raw, ok := s.object()
		raws = append(raws, raw)
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
