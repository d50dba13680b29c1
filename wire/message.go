package wire

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// EpochMillis is a time as milliseconds since the Unix epoch, the unit of every time on the wire.
// It decodes from any finite JSON number, since the schema types these fields as number, not
// integer; a fractional value is truncated.
type EpochMillis int64

// MillisOf returns t as EpochMillis.
func MillisOf(t time.Time) EpochMillis { return EpochMillis(t.UnixMilli()) }

// Time returns m as a time.Time.
func (m EpochMillis) Time() time.Time { return time.UnixMilli(int64(m)) }

// UnmarshalJSON implements json.Unmarshaler.
func (m *EpochMillis) UnmarshalJSON(b []byte) error {
	if i, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		*m = EpochMillis(i)
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsInf(f, 0) || f >= math.MaxInt64 || f <= math.MinInt64 {
		return Invalid("time", shorten(string(b)), "must be a JSON number of epoch milliseconds")
	}
	*m = EpochMillis(f)
	return nil
}

// EndpointRef names a message's sender (SPEC §5): ID is the principal dot-form, which must equal
// the subject's sender.
type EndpointRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Role string `json:"role,omitempty"`
}

// MaxNameLength bounds a display name (SPEC §6): names ride the CONNECT line and presence rows.
const MaxNameLength = 128

// Validate checks that ID is a principal dot-form and Name is non-empty and at most MaxNameLength
// characters, returning a *ValidationError.
func (r *EndpointRef) Validate() error {
	if _, err := ParsePrincipal(r.ID); err != nil {
		return Within("id", asField(err, ""))
	}
	return validateName(r.Name)
}

func validateName(name string) error {
	if name == "" {
		return Invalid("name", name, "is required")
	}
	return checkNameLength(name)
}

// ValidateAgentName checks a name that is both an agent's actor and its display name (a spawned
// or issued agent's): the actor grammar and at most MaxNameLength characters.
func ValidateAgentName(name string) error {
	if err := ValidateActor(name); err != nil {
		return err
	}
	return checkNameLength(name)
}

// checkNameLength refuses a name over MaxNameLength UTF-16 units. A receiver checks only this
// much of a sender's name: an empty from.name still decodes, as the schema allows.
func checkNameLength(name string) error {
	if n := utf16Len(name); n > MaxNameLength {
		return Invalidf("name", name, "is %d characters long; the limit is %d", n, MaxNameLength)
	}
	return nil
}

// asField replaces the Field of a *ValidationError, for errors produced by a parser that names its
// own subject ("principal") when the caller knows the real field.
func asField(err error, field string) error {
	if v, ok := err.(*ValidationError); ok {
		out := *v
		out.Field = field
		return &out
	}
	return err
}

// CotalMessage is a delivery message (SPEC §5): a multicast (Channel), a direct message (To) or an
// anycast (ToService). Exactly one routing field is set. The zero value is not a valid message.
// Decoding ignores unknown fields, as receivers must.
type CotalMessage struct {
	ID        string      `json:"id"`
	TS        EpochMillis `json:"ts"`
	Space     string      `json:"space"`
	From      EndpointRef `json:"from"`
	Channel   string      `json:"channel,omitempty"`
	To        string      `json:"to,omitempty"`
	ToService string      `json:"toService,omitempty"`
	Mentions  []string    `json:"mentions,omitempty"`
	Parts     []Part      `json:"parts"`
	ReplyTo   string      `json:"replyTo,omitempty"`
	ContextID string      `json:"contextId,omitempty"`
}

// DefaultMaxPayload is NATS's default max_payload (1 MiB). A message must fit the broker's limit;
// larger content belongs in an artifact.
const DefaultMaxPayload = 1 << 20

// Validate checks m as a publisher must before sending it: a non-empty id, a positive ts, a space,
// a valid sender, exactly one routing field (a concrete channel, a principal, or a role), and
// valid parts. It returns a *ValidationError naming the first bad field.
func (m *CotalMessage) Validate() error {
	switch {
	case m.ID == "":
		return Invalid("id", "", "is required: publishers supply a unique id")
	case m.TS <= 0:
		return Invalid("ts", "", "must be a positive epoch-millisecond time")
	case m.Space == "":
		return Invalid("space", "", "is required")
	}
	if err := m.From.Validate(); err != nil {
		return Within("from", err)
	}
	if err := m.validateRouting(); err != nil {
		return err
	}
	switch {
	case m.Channel != "":
		if err := ValidateChannel(m.Channel); err != nil {
			return err
		}
	case m.To != "":
		if _, err := ParsePrincipal(m.To); err != nil {
			return asField(err, "to")
		}
	case trimSpaceES(m.ToService) == "":
		return Invalid("toService", m.ToService, "must not be blank")
	}
	for i := range m.Parts {
		if err := m.Parts[i].Validate(); err != nil {
			return Within(fmt.Sprintf("parts[%d]", i), err)
		}
	}
	return nil
}

func (m *CotalMessage) validateRouting() error {
	n := 0
	for _, f := range [...]string{m.Channel, m.To, m.ToService} {
		if f != "" {
			n++
		}
	}
	if n != 1 {
		return Invalidf("routing", "", "exactly one of channel, to and toService must be set; %d are", n)
	}
	return nil
}

// EncodeMessage validates m and encodes it as JSON, refusing an encoding larger than maxPayload
// bytes (DefaultMaxPayload when maxPayload ≤ 0) with a *ValidationError that says to move the
// content into an artifact.
func EncodeMessage(m *CotalMessage, maxPayload int) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	b, err := marshalMessage(m)
	if err != nil {
		return nil, fmt.Errorf("encode message %s: %w", m.ID, err)
	}
	if maxPayload <= 0 {
		maxPayload = DefaultMaxPayload
	}
	if len(b) > maxPayload {
		return nil, Invalidf("message", m.ID, "encodes to %d bytes, over the broker's max_payload of %d; move the content into an artifact part", len(b), maxPayload)
	}
	return b, nil
}

// partsNull is how json.Marshal writes a message's absent parts: the key and a null.
var partsNull = []byte(`"parts":null`)

// marshalMessage returns json.Marshal(m), byte for byte, without the cost of Part's MarshalJSON
// inside it: encoding/json re-scans what a MarshalJSON method returns to compact it, which was
// two thirds of encoding a large text part. The message is encoded without its parts, whose
// "parts":null (no string value can hold it: a quote inside a string is escaped) is replaced by
// the parts encoded on their own. TestMarshalMessage holds it to json.Marshal.
func marshalMessage(m *CotalMessage) ([]byte, error) {
	bare := *m
	bare.Parts = nil
	head, err := json.Marshal(&bare)
	if err != nil {
		return nil, err
	}
	at := bytes.Index(head, partsNull)
	if m.Parts == nil || at < 0 {
		return head, nil
	}
	key := len(partsNull) - len("null")
	out := append(make([]byte, 0, len(head)+partsSize(m.Parts)), head[:at+key]...)
	if out, err = appendParts(out, m.Parts); err != nil {
		return nil, err
	}
	return append(out, head[at+len(partsNull):]...), nil
}

// partsSize estimates the bytes parts encode to, so that a message is encoded into one buffer.
func partsSize(parts []Part) int {
	n := 2
	for _, p := range parts {
		n += len(textPartHead) + len(p.Text) + len(p.Data) + 64
	}
	return n
}

// appendParts appends parts as a JSON array, each text part written directly and any other by
// its MarshalJSON.
func appendParts(out []byte, parts []Part) ([]byte, error) {
	out = append(out, '[')
	for i, p := range parts {
		if i > 0 {
			out = append(out, ',')
		}
		if p.Kind == PartText {
			out = appendTextPart(out, p.Text)
			continue
		}
		b, err := p.MarshalJSON()
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return append(out, ']'), nil
}

// envelope is a message as decoded, with pointers so that an absent required field can be told
// from an empty one (an absent id is malformed; an empty id is legal on receive).
type envelope struct {
	ID        *string           `json:"id"`
	TS        *EpochMillis      `json:"ts"`
	Space     *string           `json:"space"`
	From      *refEnvelope      `json:"from"`
	Channel   *string           `json:"channel"`
	To        *string           `json:"to"`
	ToService *string           `json:"toService"`
	Mentions  []string          `json:"mentions"`
	Parts     []json.RawMessage `json:"parts"`
	ReplyTo   string            `json:"replyTo"`
	ContextID string            `json:"contextId"`
	// texts holds, by index, the parts the one-pass decoder read as plain text parts (see
	// plainTextPart) while it scanned them; the zero Part where it did not. Decoding the part
	// again from Parts gives the same Part.
	texts []Part
	// own is what the one-pass decoder points the fields above at.
	own ownValues
}

type refEnvelope struct {
	ID   *string `json:"id"`
	Name *string `json:"name"`
	Role string  `json:"role"`
}

// decodeEnvelope decodes data as a JSON object, refusing invalid UTF-8 (which encoding/json would
// silently replace) and type mismatches in known fields. With owned, data is the caller's to give
// away: the decoded strings may share its memory rather than a copy of it.
func decodeEnvelope(data []byte, owned bool) (*envelope, error) {
	if !utf8.Valid(data) {
		return nil, Invalid("message", "", "is not valid UTF-8")
	}
	if e, ok := decodeEnvelopeFast(data, owned); ok {
		return e, nil
	}
	return decodeEnvelopeJSON(data)
}

// decodeEnvelopeJSON is the general decoder of an envelope, through encoding/json.
func decodeEnvelopeJSON(data []byte) (*envelope, error) {
	var e envelope
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, Invalidf("message", "", "is not a JSON message object: %v", err)
	}
	return &e, nil
}

// message checks the envelope's shape against the schema, and from.name against MaxNameLength,
// and builds the message. Unknown fields were already dropped; the from check is the caller's,
// since a missing from is a sender mismatch rather than a malformed message.
func (e *envelope) message() (*CotalMessage, error) {
	switch {
	case e.ID == nil:
		return nil, Invalid("id", "", "is required and must be a string")
	case e.TS == nil:
		return nil, Invalid("ts", "", "is required and must be a number")
	case e.Space == nil:
		return nil, Invalid("space", "", "is required and must be a string")
	case e.From == nil || e.From.ID == nil || e.From.Name == nil:
		return nil, Invalid("from", "", "is required with string id and name")
	case e.Parts == nil:
		return nil, Invalid("parts", "", "is required and must be an array")
	}
	// A name longer than any sender may write is refused here too, so no receiver surfaces it.
	if err := checkNameLength(*e.From.Name); err != nil {
		return nil, Within("from", err)
	}
	m := &CotalMessage{
		ID: *e.ID, TS: *e.TS, Space: *e.Space,
		From:     EndpointRef{ID: *e.From.ID, Name: *e.From.Name, Role: e.From.Role},
		Channel:  deref(e.Channel),
		To:       deref(e.To),
		Mentions: e.Mentions, ReplyTo: e.ReplyTo, ContextID: e.ContextID,
		ToService: deref(e.ToService),
	}
	n := 0
	for _, f := range [...]*string{e.Channel, e.To, e.ToService} {
		if f != nil {
			n++
		}
	}
	if n != 1 {
		return nil, Invalidf("routing", "", "exactly one of channel, to and toService must be present; %d are", n)
	}
	if e.allText() {
		m.Parts = e.texts[:len(e.texts):len(e.texts)] // read already, in the decoder's own pass
		return m, nil
	}
	m.Parts = make([]Part, len(e.Parts))
	for i, raw := range e.Parts {
		if i < len(e.texts) && e.texts[i].Kind == PartText {
			m.Parts[i] = e.texts[i]
			continue
		}
		if err := m.Parts[i].UnmarshalJSON(raw); err != nil {
			return nil, Within(fmt.Sprintf("parts[%d]", i), err)
		}
	}
	return m, nil
}

// allText reports whether the one-pass decoder read every part as a text part.
func (e *envelope) allText() bool {
	if len(e.Parts) == 0 || len(e.texts) != len(e.Parts) {
		return false
	}
	for _, p := range e.texts {
		if p.Kind != PartText {
			return false
		}
	}
	return true
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// UnmarshalJSON implements json.Unmarshaler with the schema's shape rules: the required fields
// present with their types, exactly one routing field, and valid parts; and a from.name of at
// most MaxNameLength. Unknown fields are ignored. The decoded strings may share one copy of data,
// except the id, replyTo and contextId, which are copies of their own so that keeping them (as
// de-duplication or correlation keys) does not keep the whole message.
func (m *CotalMessage) UnmarshalJSON(data []byte) error {
	dec, err := DecodeMessage(data)
	if err != nil {
		return err
	}
	*m = *dec
	return nil
}

// DecodeMessage decodes a delivery message payload, returning a *ValidationError naming the field
// that breaks the schema or a from.name over MaxNameLength. It does not compare the sender with a
// subject; Guard does. Its strings are held as UnmarshalJSON holds them.
func DecodeMessage(data []byte) (*CotalMessage, error) {
	e, err := decodeEnvelope(data, false)
	if err != nil {
		return nil, err
	}
	return e.message()
}

// NewMessageID returns a fresh message id: a UUID version 7 (RFC 9562), time-ordered, as the
// SPEC's sample messages use.
func NewMessageID() string {
	var u [16]byte
	_, _ = rand.Read(u[6:]) // crypto/rand.Read never returns an error since Go 1.24
	ms := uint64(time.Now().UnixMilli())
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	u[6] = u[6]&0x0f | 0x70 // version 7
	u[8] = u[8]&0x3f | 0x80 // variant 10
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}
