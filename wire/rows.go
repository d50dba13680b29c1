package wire

import (
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

// checkForeignRow returns a *ValidationError when data is not a JSON object or carries a field
// of another stored shape (foreignFields); the error names the field. It does not validate the
// row's own fields.
func checkForeignRow(what string, data []byte) error {
	return checkForeignFields(what, data, foreignFields)
}

// checkForeignFields is checkForeignRow with the list of foreign fields given: a row type that
// owns one of foreignFields passes the others.
func checkForeignFields(what string, data []byte, foreign []string) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return Invalid(what, "", "must be a JSON object")
	}
	for _, f := range foreign {
		if _, ok := fields[f]; ok {
			return Invalidf(what, f, "carries %q, a field of another stored shape: it is a copy, not a row", f)
		}
	}
	return nil
}
