package warden

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// objectFields calls field with the key and raw value of each member of the JSON object body, in
// order, and reports whether body is a valid JSON object. It decodes nothing but the keys: the
// warden reads every message the space stores, and decoding each into a map was most of its
// cost.
func objectFields(body []byte, field func(key string, value []byte)) bool {
	if !json.Valid(body) {
		return false
	}
	// body is valid JSON from here on, so the scan needs no checks of its own.
	i := skipSpace(body, 0)
	if body[i] != '{' {
		return false
	}
	i = skipSpace(body, i+1)
	for body[i] != '}' {
		if body[i] == ',' {
			i = skipSpace(body, i+1)
		}
		end := stringEnd(body, i)
		key := body[i:end]
		i = skipSpace(body, skipSpace(body, end)+1) // past the colon
		vend := valueEnd(body, i)
		field(unquote(key), body[i:vend])
		i = skipSpace(body, vend)
	}
	return true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the string that opens at b[i].
func stringEnd(b []byte, i int) int {
	for i++; b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	return i + 1
}

// valueEnd returns the index just past the value that begins at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i
}

// unquote returns the text of the JSON string literal s, as decoding it would: escapes undone
// and invalid UTF-8 replaced.
func unquote(s []byte) string {
	text := s[1 : len(s)-1]
	if bytes.IndexByte(text, '\\') < 0 && utf8.Valid(text) {
		return string(text)
	}
	var out string
	_ = json.Unmarshal(s, &out) // a valid literal always decodes
	return out
}
