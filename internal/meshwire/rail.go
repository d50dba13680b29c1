package meshwire

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/gocotal/cotal/wire"
)

// A session rail's envelope (SPEC §13.6): every message on a session's in and out rails is one
// of three JSON objects. {"t":"f","seq":S,"data":D,"ack":A} carries one opaque data value D,
// numbered S from 1 per rail, with the sender's receive watermark A on the other rail when it is
// above 0; {"t":"credit","ack":A} advertises that watermark alone; {"t":"close"} is the sender's
// advisory close. Credit and close are control frames, outside the flow window.

// RailKind is a rail frame's type, its "t" member.
type RailKind string

// The rail frame types.
const (
	RailData   RailKind = "f"
	RailCredit RailKind = "credit"
	RailClose  RailKind = "close"
)

// Session flow windows: the most data frames a rail's sender may have unacknowledged, as a
// session grant declares it.
const (
	SessionWindowDefault = 64
	SessionWindowMax     = 1024
)

// MaxSafeInteger is the largest integer every JSON party reads exactly, 2^53-1.
const MaxSafeInteger = 1<<53 - 1

// RailFrame is one decoded rail frame.
type RailFrame struct {
	Kind RailKind
	// Seq is a data frame's sequence number, from 1.
	Seq int64
	// Data is a data frame's value, as the JSON text it arrived as.
	Data json.RawMessage
	// Ack is a credit's watermark, or a data frame's when HasAck: the count of data frames the
	// sender has taken in order on the other rail.
	Ack    int64
	HasAck bool
}

// Encode returns the frame's JSON, members in the order t, seq, data, ack. Data must be compact
// JSON for the bytes to match another implementation's.
func (f *RailFrame) Encode() []byte {
	var b []byte
	switch f.Kind {
	case RailData:
		b = append(b, `{"t":"f","seq":`...)
		b = strconv.AppendInt(b, f.Seq, 10)
		b = append(b, `,"data":`...)
		if len(f.Data) == 0 {
			b = append(b, "null"...) // data is always present
		}
		b = append(b, f.Data...)
		if f.HasAck {
			b = append(b, `,"ack":`...)
			b = strconv.AppendInt(b, f.Ack, 10)
		}
		return append(b, '}')
	case RailCredit:
		b = append(b, `{"t":"credit","ack":`...)
		b = strconv.AppendInt(b, f.Ack, 10)
		return append(b, '}')
	default:
		return append(b, `{"t":"close"}`...)
	}
}

// DecodeRailFrame decodes one rail frame: UTF-8 JSON, one object with exactly its type's
// members, a data frame's seq a positive safe integer and its data present, an ack a
// non-negative safe integer. Anything else is refused with a *wire.ValidationError.
func DecodeRailFrame(raw []byte) (*RailFrame, error) {
	o, err := DecodeClosed(raw, "rail frame", "t", "seq", "data", "ack")
	if err != nil {
		return nil, err
	}
	var kind string
	if err := json.Unmarshal(o["t"], &kind); err != nil || o["t"] == nil {
		return nil, wire.Invalid("t", string(o["t"]), `must be "f", "credit" or "close"`)
	}
	f := &RailFrame{Kind: RailKind(kind)}
	switch f.Kind {
	case RailData:
		if err := OnlyMembers(o, "data frame", "t", "seq", "data", "ack"); err != nil {
			return nil, err
		}
		if f.Seq, err = SafeInteger(o["seq"], "seq", 1); err != nil {
			return nil, err
		}
		if o["data"] == nil {
			return nil, wire.Invalid("data", "", "a data frame must carry data")
		}
		f.Data = o["data"]
		if a, ok := o["ack"]; ok {
			if f.Ack, err = SafeInteger(a, "ack", 0); err != nil {
				return nil, err
			}
			f.HasAck = true
		}
	case RailCredit:
		if err := OnlyMembers(o, "credit frame", "t", "ack"); err != nil {
			return nil, err
		}
		if f.Ack, err = SafeInteger(o["ack"], "ack", 0); err != nil {
			return nil, err
		}
	case RailClose:
		if err := OnlyMembers(o, "close frame", "t"); err != nil {
			return nil, err
		}
	default:
		return nil, wire.Invalid("t", kind, `must be "f", "credit" or "close"`)
	}
	return f, nil
}

// DecodeClosed decodes raw as one UTF-8 JSON object whose member names are all in allowed,
// matched exactly (encoding/json alone would match them without regard to case). It returns the
// members by name, or a *wire.ValidationError.
func DecodeClosed(raw []byte, what string, allowed ...string) (map[string]json.RawMessage, error) {
	if !utf8.Valid(raw) {
		return nil, wire.Invalid(what, "", "must be UTF-8 JSON")
	}
	var o map[string]json.RawMessage
	if err := json.Unmarshal(raw, &o); err != nil || o == nil {
		return nil, wire.Invalid(what, string(raw), "must be one JSON object")
	}
	return o, OnlyMembers(o, what, allowed...)
}

// OnlyMembers refuses a member of o not in allowed, with a *wire.ValidationError naming it.
func OnlyMembers(o map[string]json.RawMessage, what string, allowed ...string) error {
	for k := range o {
		known := false
		for _, a := range allowed {
			known = known || k == a
		}
		if !known {
			return wire.Invalidf(k, "", "a %s has no member %q", what, k)
		}
	}
	return nil
}

// SafeInteger reads a JSON number that is an integer from least to MaxSafeInteger: written as
// 64, 64.0 or 6.4e1 alike, as every JSON party reads them; anything else is a
// *wire.ValidationError naming field.
func SafeInteger(raw json.RawMessage, field string, least int64) (int64, error) {
	var f float64
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) || json.Unmarshal(raw, &f) != nil || f != math.Trunc(f) || f < float64(least) || f > MaxSafeInteger {
		return 0, wire.Invalidf(field, string(raw), "must be an integer from %d to 2^53-1", least)
	}
	return int64(f), nil
}
