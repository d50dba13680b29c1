package wire

import (
	"bytes"
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

// TestHasControl holds the word-at-a-time test to a byte-by-byte one: every byte value, at
// every position of inputs that span whole words and a tail.
func TestHasControl(t *testing.T) {
	naive := func(b []byte) bool {
		for _, c := range b {
			if c < 0x20 {
				return true
			}
		}
		return false
	}
	// Every length to 19 (the eight-byte loop and the tail), and lengths around the 32-byte one.
	var lengths []int
	for n := 1; n <= 19; n++ {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 31, 32, 33, 39, 40, 63, 64, 65, 71)
	for _, n := range lengths {
		for pos := range n {
			for c := range 256 {
				for _, fill := range []byte{'a', 0x20, 0x7f, 0x80, 0xff} {
					b := bytes.Repeat([]byte{fill}, n)
					b[pos] = byte(c)
					if got, want := hasControl(b), naive(b); got != want {
						t.Fatalf("hasControl(%x) = %v, want %v", b, got, want)
					}
				}
			}
		}
	}
}
