package wire

import (
	"bytes"
	"encoding/json"
	"slices"
)

// Every stream and bucket of a space can be made to store bytes nobody meant for it: NATS checks
// the subject a client publishes to, never the reply subject it names, and JetStream publishes
// its acknowledgements, API responses and consumer deliveries to that reply subject. So a bucket
// row is judged by its shape before anyone takes it as the key's value: a row of the mesh's own
// buckets must hold exactly its type's fields, and a row of a bucket that clients of other
// implementations write must at least not carry the fields of another stored shape.

// foreignFields are top-level fields that only other shapes a space stores carry: a message
// (from, parts), a presence row (card), a JetStream publish acknowledgement (stream, seq) and a
// JetStream API response (type, error). A channel-registry row that carries one is a copy of
// something else, never a row.
var foreignFields = []string{"from", "parts", "card", "stream", "seq", "type", "error"}

// presenceForeignFields are foreignFields less the presence row's own card.
var presenceForeignFields = slices.DeleteFunc(slices.Clone(foreignFields), func(f string) bool { return f == "card" })

// CheckForeignRow returns a *ValidationError when data is not a JSON object or carries a field
// of another stored shape (foreignFields); the error names the field. It does not validate the
// row's own fields.
func CheckForeignRow(what string, data []byte) error {
	return checkForeignFields(what, data, foreignFields)
}

// checkForeignFields is CheckForeignRow with the list of foreign fields given: a row type that
// owns one of foreignFields passes the others.
func checkForeignFields(what string, data []byte, foreign []string) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return invalid(what, "", "must be a JSON object")
	}
	for _, f := range foreign {
		if _, ok := fields[f]; ok {
			return invalidf(what, f, "carries %q, a field of another stored shape: it is a copy, not a row", f)
		}
	}
	return nil
}

// DecodeRowStrict decodes a row of one of the mesh's own buckets into v: one JSON object with
// only v's fields and nothing after it. It returns a *ValidationError naming what is wrong.
func DecodeRowStrict(what string, data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalidf(what, "", "is not a valid row: %v", err)
	}
	if dec.More() {
		return invalid(what, "", "has data after the row")
	}
	return nil
}

// DecodeACLRow decodes an ACL-bucket row strictly: exactly ACLRow's fields, every channel
// pattern in the channel grammar.
func DecodeACLRow(data []byte) (*ACLRow, error) {
	var r ACLRow
	if err := DecodeRowStrict("acl row", data, &r); err != nil {
		return nil, err
	}
	for _, p := range append(slices.Clip(r.AllowSubscribe), r.IssuedAllowSubscribe...) {
		if err := ValidateChannelPattern(p); err != nil {
			return nil, within("allowSubscribe", err)
		}
	}
	return &r, nil
}

// DecodeMemberRow decodes a members-bucket row strictly and checks it against its key: the key
// must be the MemberKey of the row's channel and lifecycle.
func DecodeMemberRow(key string, data []byte) (*MemberRow, error) {
	var r MemberRow
	if err := DecodeRowStrict("member row", data, &r); err != nil {
		return nil, err
	}
	p, err := ParsePrincipal(r.Owner)
	if err != nil {
		return nil, within("owner", err)
	}
	want, err := MemberKey(r.Channel, Lifecycle{Principal: p, UID: r.LifecycleUID})
	if err != nil {
		return nil, err
	}
	if want != key {
		return nil, invalidf("member row", key, "is stored under a key other than its own %q", want)
	}
	switch r.State {
	case MemberDurableActive, MemberLiveConfirmed:
	default:
		return nil, invalidf("state", r.State, "must be %q or %q", MemberDurableActive, MemberLiveConfirmed)
	}
	return &r, nil
}

// DecodeDeliveryLease decodes a lease row of the delivery or manager bucket strictly: exactly
// DeliveryLease's fields, with a holder in principal form.
func DecodeDeliveryLease(data []byte) (*DeliveryLease, error) {
	var r DeliveryLease
	if err := DecodeRowStrict("lease row", data, &r); err != nil {
		return nil, err
	}
	if _, err := ParsePrincipal(r.Holder); err != nil {
		return nil, within("holder", err)
	}
	if r.Incarnation == "" {
		return nil, invalid("incarnation", "", "is required")
	}
	return &r, nil
}
