package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

// jsonStringSeeds cover each escape, each at a word's edges, and the runes that take a path of
// their own: invalid UTF-8, U+2028 and U+2029, and plain multi-byte runes.
var jsonStringSeeds = []string{
	"", "plain ascii text, longer than a word", `"`, `\`, "<>&", "\b\f\n\r\t\x00\x1f\x7f",
	"1234567\n", "12345678\n", "\n12345678", "é", "naïve café 🚀 done", "\u2028x\u2029",
	"\xff", "abc\xe2\x80", "1234567\xc3", strings.Repeat("x", 4096) + `"`,
}

// FuzzAppendJSONString holds appendJSONString to json.Marshal, byte for byte.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range jsonStringSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s) // a string always encodes
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Fatalf("appendJSONString(%q) = %s, json.Marshal writes %s", s, got, want)
		}
		// The text part's bytes are held to encoding/json on a plain struct, not to
		// Part.MarshalJSON, which itself writes through appendTextPart.
		want, _ = json.Marshal(struct {
			Kind string `json:"kind"`
			Text string `json:"text"`
		}{"text", s})
		if got := appendTextPart(nil, s); string(got) != string(want) {
			t.Fatalf("appendTextPart(%q) = %s, json.Marshal writes %s", s, got, want)
		}
	})
}

// TestPlainWord checks the eight-byte test against the one-byte one for each byte at each place.
func TestPlainWord(t *testing.T) {
	for pos := range 8 {
		for b := range 256 {
			w := []byte("abcdefgh")
			w[pos] = byte(b)
			want := b < 0x80 && plainByte(byte(b))
			if got := plainWord(word(string(w))); got != want {
				t.Fatalf("byte %#x at %d: plainWord = %v, want %v", b, pos, got, want)
			}
		}
	}
}

// BenchmarkAppendJSONString encodes a large plain text and one with escapes throughout.
func BenchmarkAppendJSONString(b *testing.B) {
	for name, s := range map[string]string{
		"plain":   strings.Repeat("x", 4096),
		"escapes": strings.Repeat("line \"one\"\n\tcafé <b>\n", 186),
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			buf := make([]byte, 0, 2*len(s))
			for b.Loop() {
				buf = appendJSONString(buf[:0], s)
			}
		})
	}
}
