package devidp

import (
	"strings"
	"testing"
)

func TestUserCodes(t *testing.T) {
	for range 100 {
		c, err := newUserCode()
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := normaliseUserCode(formatUserCode(c)); !ok || got != c {
			t.Fatalf("code %q does not round trip: %q %v", c, got, ok)
		}
	}
}

func FuzzNormaliseUserCode(f *testing.F) {
	// Seeds: a formatted code, loose typing, a vowel (never in a code), and a multi-byte rune.
	f.Add("BCDF-GHJK")
	f.Add(" bcdf ghjk ")
	f.Add("ABCD-EFGH")
	f.Add("BCDF-GHJ\u00df")
	f.Fuzz(func(t *testing.T, in string) {
		c, ok := normaliseUserCode(in)
		if !ok {
			return
		}
		if len(c) != 8 || strings.Trim(c, userCodeAlphabet) != "" {
			t.Fatalf("normaliseUserCode(%q) = %q", in, c)
		}
	})
}
