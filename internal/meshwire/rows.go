package meshwire

import (
	"bytes"
	"encoding/json"

	"github.com/gocotal/cotal/wire"
)

// decodeRowStrict decodes a row of one of the mesh's own buckets into v: one JSON object with
// only v's fields and nothing after it, so a copy of another stored shape (which a reply subject
// can make a bucket store) is never taken for a row. It returns a *wire.ValidationError naming
// what is wrong.
func decodeRowStrict(what string, data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return wire.Invalidf(what, "", "is not a valid row: %v", err)
	}
	if dec.More() {
		return wire.Invalid(what, "", "has data after the row")
	}
	return nil
}
