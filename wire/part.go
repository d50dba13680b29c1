package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// PartKind is the kind of a message part: one of the core kinds or a reverse-DNS extension kind.
type PartKind string

// The core part kinds (SPEC §5). Every other kind must be a reverse-DNS extension kind such as
// "com.acme.snapshot"; a bare unknown kind is not conformant.
const (
	PartText     PartKind = "text"
	PartData     PartKind = "data"
	PartArtifact PartKind = "artifact"
)

// isExtension reports whether k is a reverse-DNS extension kind:
// ^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$.
func (k PartKind) isExtension() bool {
	s := string(k)
	if !strings.Contains(s, ".") {
		return false
	}
	for seg := range strings.SplitSeq(s, ".") {
		if seg == "" {
			return false
		}
		for i := 0; i < len(seg); i++ {
			if c := seg[i]; c == '_' || !isTokenByte(c) {
				return false
			}
		}
	}
	return true
}

// Part is one piece of a message's content (SPEC §5). Which fields are meaningful depends on
// Kind: Text for text; Data (raw JSON) for data; Name, MediaType, Digest and Size for artifact;
// Extra for an extension kind, whose fields other than "kind" are kept verbatim so a part relayed
// through Go loses nothing.
type Part struct {
	Kind PartKind

	Text string
	Data json.RawMessage

	Name      string
	MediaType string
	Digest    string
	// Size is the publisher's claim of the artifact's size. A receiver must never allocate from it.
	Size int64

	Extra map[string]json.RawMessage
}

// TextPart returns a text part.
func TextPart(text string) Part { return Part{Kind: PartText, Text: text} }

// DataPart returns a data part holding v encoded as JSON. A value JSON cannot represent (NaN, an
// infinity, a channel, a function...) is refused with a *ValidationError whose Field is the path
// to it, such as "data.points[3].y".
func DataPart(v any) (Part, error) {
	b, err := json.Marshal(v)
	if err != nil {
		if path, why := findUnrepresentable(reflect.ValueOf(v), "data", 0); path != "" {
			return Part{}, Invalid(path, "", why)
		}
		return Part{}, Invalidf("data", "", "cannot be encoded as JSON: %v", err)
	}
	return Part{Kind: PartData, Data: b}, nil
}

// ArtifactPart returns an artifact part referencing content held outside the message, or a
// *ValidationError for a malformed digest or a negative size.
func ArtifactPart(name, mediaType, digest string, size int64) (Part, error) {
	p := Part{Kind: PartArtifact, Name: name, MediaType: mediaType, Digest: digest, Size: size}
	if err := p.Validate(); err != nil {
		return Part{}, err
	}
	return p, nil
}

// Validate checks p as a publisher must before sending it, returning a *ValidationError: a known
// or extension kind, JSON data, a sha256 digest and a non-negative size.
func (p *Part) Validate() error {
	switch {
	case p.Kind == PartText:
	case p.Kind == PartData:
		if len(p.Data) == 0 || !json.Valid(p.Data) {
			return Invalid("data", "", "must be a JSON value")
		}
	case p.Kind == PartArtifact:
		if !IsDigest(p.Digest) {
			return Invalid("digest", p.Digest, "must be sha256:<64 lower-case hex digits>")
		}
		if p.Size < 0 {
			return Invalidf("size", strconv.FormatInt(p.Size, 10), "must not be negative")
		}
	case p.Kind.isExtension():
		if _, ok := p.Extra["kind"]; ok {
			return Invalid("kind", "", "an extension part's kind is its Kind field, not an Extra entry")
		}
		for k, v := range p.Extra {
			if !json.Valid(v) {
				return Invalid(k, "", "must be a JSON value")
			}
		}
	default:
		return Invalid("kind", string(p.Kind), `must be "text", "data", "artifact" or a reverse-DNS extension kind such as "com.acme.snapshot"`)
	}
	return nil
}

// MarshalJSON implements json.Marshaler, writing only the fields of p's kind.
func (p Part) MarshalJSON() ([]byte, error) {
	switch p.Kind {
	case PartText:
		return appendTextPart(make([]byte, 0, len(textPartHead)+len(p.Text)+3), p.Text), nil
	case PartData:
		data := p.Data
		if len(data) == 0 {
			data = json.RawMessage("null")
		}
		return json.Marshal(struct {
			Kind PartKind        `json:"kind"`
			Data json.RawMessage `json:"data"`
		}{p.Kind, data})
	case PartArtifact:
		return json.Marshal(struct {
			Kind      PartKind `json:"kind"`
			Name      string   `json:"name"`
			MediaType string   `json:"mediaType"`
			Digest    string   `json:"digest"`
			Size      int64    `json:"size"`
		}{p.Kind, p.Name, p.MediaType, p.Digest, p.Size})
	}
	fields := make(map[string]json.RawMessage, len(p.Extra)+1)
	for k, v := range p.Extra {
		fields[k] = v
	}
	kind, err := json.Marshal(p.Kind)
	if err != nil {
		return nil, err
	}
	fields["kind"] = kind
	return json.Marshal(fields)
}

// UnmarshalJSON implements json.Unmarshaler with the schema's rules per kind. A bare unknown kind
// is an error; an extension kind keeps its other fields in Extra; unknown fields of a core kind
// are ignored.
func (p *Part) UnmarshalJSON(data []byte) error {
	if text, ok := plainTextPart(data); ok {
		*p = Part{Kind: PartText, Text: text}
		return nil
	}
	return p.decodeFields(data)
}

// decodeFields is the general decoder of a part, field by field.
func (p *Part) decodeFields(data []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return Invalid("", "", "must be a JSON object")
	}
	var kind string
	if err := json.Unmarshal(fields["kind"], &kind); err != nil || fields["kind"] == nil {
		return Invalid("kind", "", "is required and must be a string")
	}
	out := Part{Kind: PartKind(kind)}
	switch out.Kind {
	case PartText:
		if err := requireString(fields, "text", &out.Text); err != nil {
			return err
		}
	case PartData:
		raw, ok := fields["data"]
		if !ok {
			return Invalid("data", "", "is required")
		}
		out.Data = raw
	case PartArtifact:
		for _, f := range []struct {
			name string
			dst  *string
		}{{"name", &out.Name}, {"mediaType", &out.MediaType}, {"digest", &out.Digest}} {
			if err := requireString(fields, f.name, f.dst); err != nil {
				return err
			}
		}
		size, err := decodeSize(fields["size"])
		if err != nil {
			return err
		}
		out.Size = size
	default:
		if !out.Kind.isExtension() {
			return Invalid("kind", kind, `must be "text", "data", "artifact" or a reverse-DNS extension kind such as "com.acme.snapshot"`)
		}
		delete(fields, "kind")
		if len(fields) > 0 {
			out.Extra = fields
		}
	}
	if err := out.Validate(); err != nil {
		return err
	}
	*p = out
	return nil
}

// textPartHead is how MarshalJSON and the reference's JSON.stringify begin a text part.
const textPartHead = `{"kind":"text","text":`

// plainTextPart recognises the common encoding of a text part, {"kind":"text","text":"..."}, and
// returns its text without decoding the part into a map: a large text part was scanned five
// times on receive. A text with escapes is unquoted by encoding/json. Anything else takes the
// general decoder.
func plainTextPart(data []byte) (string, bool) {
	if !bytes.HasPrefix(data, []byte(textPartHead)) {
		return "", false
	}
	s := &scanner{b: data, i: len(textPartHead)}
	text, ok := s.str()
	if !ok || !utf8.ValidString(text) || s.i != len(data)-1 || data[s.i] != '}' {
		return "", false
	}
	return text, true
}

// hasControl reports whether b holds a byte below 0x20, which a JSON string must escape. It
// tests eight bytes at a time, 32 to a branch: a word has a byte below n (n <= 128) exactly when
// (w - n*0x0101...) &^ w & 0x8080... is not zero.
func hasControl(b []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	below := func(w uint64) uint64 { return (w - 0x20*ones) &^ w }
	for len(b) >= 32 {
		w0, w1 := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
		w2, w3 := binary.LittleEndian.Uint64(b[16:]), binary.LittleEndian.Uint64(b[24:])
		if (below(w0)|below(w1)|below(w2)|below(w3))&highs != 0 {
			return true
		}
		b = b[32:]
	}
	for len(b) >= 8 {
		w := binary.LittleEndian.Uint64(b)
		if (w-0x20*ones)&^w&highs != 0 {
			return true
		}
		b = b[8:]
	}
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}

func requireString(fields map[string]json.RawMessage, name string, dst *string) error {
	raw, ok := fields[name]
	if !ok || !decodeString(raw, dst) {
		return Invalid(name, "", "is required and must be a string")
	}
	return nil
}

// decodeString decodes raw into dst if it is a JSON string. raw must be valid JSON (a value cut
// from a decoded document), so a string with no backslash holds no escape, quote or control
// character: in valid UTF-8 it is its own content between the quotes, and takes no second pass
// of the JSON scanner, which dominated receiving a large text part.
func decodeString(raw json.RawMessage, dst *string) bool {
	if n := len(raw); n >= 2 && raw[0] == '"' {
		if body := raw[1 : n-1]; bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
			*dst = string(body)
			return true
		}
	}
	return json.Unmarshal(raw, dst) == nil && string(raw) != "null"
}

// maxExactInteger is 2^53, beyond which a JSON number no longer names one integer in the
// reference's float64 arithmetic.
const maxExactInteger = 1 << 53

// decodeSize reads an artifact size: a JSON integer ≥ 0. 1.0 is an integer to JSON Schema, so an
// integral float is accepted too.
func decodeSize(raw json.RawMessage) (int64, error) {
	if raw == nil {
		return 0, Invalid("size", "", "is required")
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		if n < 0 {
			return 0, Invalid("size", string(raw), "must not be negative")
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f != math.Trunc(f) || f < 0 || f > maxExactInteger {
		return 0, Invalid("size", shorten(string(raw)), "must be a non-negative integer")
	}
	return int64(f), nil
}

// maxReflectDepth stops findUnrepresentable on a cyclic value; json.Marshal reports the cycle.
const maxReflectDepth = 1000

// findUnrepresentable walks a Go value the way encoding/json does and returns the path of the
// first value JSON cannot represent, with the reason, or "" when it finds none.
func findUnrepresentable(v reflect.Value, path string, depth int) (string, string) {
	if depth > maxReflectDepth {
		return path, "nests too deeply (a cycle?)"
	}
	if !v.IsValid() {
		return "", ""
	}
	if v.Type().Implements(reflect.TypeFor[json.Marshaler]()) {
		if v.Kind() == reflect.Pointer && v.IsNil() {
			return "", ""
		}
		if _, err := v.Interface().(json.Marshaler).MarshalJSON(); err != nil {
			return path, fmt.Sprintf("cannot be encoded as JSON: %v", err)
		}
		return "", ""
	}
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return path, fmt.Sprintf("is %v, which JSON cannot represent", f)
		}
	case reflect.Complex64, reflect.Complex128, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return path, fmt.Sprintf("is a %s, which JSON cannot represent", v.Kind())
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return findUnrepresentable(v.Elem(), path, depth+1)
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return "", "" // []byte encodes as base64
		}
		for i := range v.Len() {
			if p, why := findUnrepresentable(v.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1); p != "" {
				return p, why
			}
		}
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		for _, k := range keys {
			if p, why := findUnrepresentable(v.MapIndex(k), fmt.Sprintf("%s.%v", path, k), depth+1); p != "" {
				return p, why
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if p, why := findUnrepresentable(v.Field(i), path+"."+name, depth+1); p != "" {
				return p, why
			}
		}
	}
	return "", ""
}
