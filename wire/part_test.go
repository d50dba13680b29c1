package wire

import (
	"encoding/json"
	"testing"
)

// TestDecodeString checks the unescaped fast path against encoding/json for every shape of
// string value, including the ones that must take the slow path.
func TestDecodeString(t *testing.T) {
	for _, raw := range []string{`"plain"`, `""`, `"tab\tand \"quote\""`, `"\u00e9t\u00e9"`, `"été"`, "\"bad \xff utf-8\"", `null`, `5`, `["x"]`} {
		var got, want string
		ok := decodeString(json.RawMessage(raw), &got)
		wantOK := json.Unmarshal([]byte(raw), &want) == nil && raw != "null"
		if ok != wantOK || got != want {
			t.Errorf("decodeString(%s) = %q, %v; encoding/json gives %q, %v", raw, got, ok, want, wantOK)
		}
	}
}
