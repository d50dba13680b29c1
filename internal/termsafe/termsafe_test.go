package termsafe

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// displayVectors are Sanitize's cases: what a peer might put in a display name or an
// activity, and what a terminal must be shown instead.
var displayVectors = []struct {
	name, in, want string
}{
	{"plain", "alice", "alice"},
	{"empty", "", ""},
	{"spaces and punctuation kept", "Alice Smith (QA), #2!", "Alice Smith (QA), #2!"},
	{"latin accents", "Ålice Ünïcodé", "Ålice Ünïcodé"},
	{"cyrillic", "Алиса", "Алиса"},
	{"han and kana", "爱丽丝 アリス", "爱丽丝 アリス"},
	{"arabic, right to left by itself", "محمد", "محمد"},
	{"hebrew", "עברית", "עברית"},
	{"devanagari with its marks", "हिन्दी", "हिन्दी"},
	{"combining accent", "e\u0301", "e\u0301"},
	{"emoji", "🎉 party", "🎉 party"},
	{"SGR colour", "\x1b[31mred\x1b[0m", "red"},
	{"SGR with many parameters", "\x1b[1;38;2;255;0;0mbold", "bold"},
	{"private CSI hides the cursor", "\x1b[?25lbob", "bob"},
	{"CSI with an intermediate byte", "\x1b[1 qbob", "bob"},
	{"CSI clears the screen", "\x1b[2J\x1b[Hbob", "bob"},
	{"unfinished CSI at the end", "bob\x1b[31", "bob"},
	{"CSI broken by a letter outside it", "\x1b[3é", "é"},
	{"8-bit CSI", "\u009b31mred", "red"},
	{"OSC title ended by BEL", "\x1b]0;pwned\x07alice", "alice"},
	{"OSC hyperlink ended by ESC backslash", "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\", "click"},
	{"8-bit OSC ended by 8-bit ST", "\u009d0;x\u009cok", "ok"},
	{"unterminated OSC swallows the rest", "bob\x1b]0;title", "bob"},
	{"OSC cut short by another escape", "\x1b]0;x\x1b[31mred", "red"},
	{"DCS", "\x1bPq#0;2;0;0;0\x1b\\ok", "ok"},
	{"APC", "\x1b_payload\x07ok", "ok"},
	{"two-byte escape: reset", "\x1bcok", "ok"},
	{"designate a character set", "\x1b(Bok", "ok"},
	{"lone ESC at the end", "alice\x1b", "alice"},
	{"ESC before a non-ASCII letter", "\x1bé", "é"},
	{"C0 controls", "a\tb\nc\rd\x00e\x07f\x08g", "abcdefg"},
	{"DEL", "a\x7fb", "ab"},
	{"C1 NEL", "a\u0085b", "ab"},
	{"RLO reverses an extension", "invoice\u202efdp.exe", "invoicefdp.exe"},
	{"bidi isolates", "\u2066a\u2067b\u2068c\u2069", "abc"},
	{"bidi marks", "\u200ea\u200fb\u061cc", "abc"},
	{"bidi embeddings and overrides", "\u202aa\u202bb\u202cc\u202dd", "abcd"},
	{"zero-width characters", "a\u200bd\u200cm\u200di\u2060n\ufeff", "admin"},
	{"soft hyphen", "ad\u00admin", "admin"},
	{"tag characters", "x\U000E0041\U000E007F", "x"},
	{"line and paragraph separators", "a\u2028b\u2029c", "abc"},
	{"Hangul fillers", "\u3164\u115f\u1160\uffa0", ""},
	{"invalid UTF-8", "a\xffb", "a\ufffdb"},
	{"a raw 0x9b byte is not a C1 in UTF-8", "a\x9b31mb", "a\ufffd31mb"},
	{"a name posing as another", "\x1b[31mmallory\u202e\x1b[0m", "mallory"},
}

func TestSanitize(t *testing.T) {
	for _, tt := range displayVectors {
		t.Run(tt.name, func(t *testing.T) {
			if got := Sanitize(tt.in); got != tt.want {
				t.Errorf("Sanitize(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestSanitizeRemovesEachListedRune checks every rune the doc comment names one by one, so
// a change to the category test cannot quietly let one through.
func TestSanitizeRemovesEachListedRune(t *testing.T) {
	var listed []rune
	for r := rune(0); r < 0x20; r++ {
		listed = append(listed, r)
	}
	for r := rune(0x7f); r <= 0x9f; r++ {
		listed = append(listed, r)
	}
	listed = append(listed, 0x061c, 0x200b, 0x200c, 0x200d, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c,
		0x202d, 0x202e, 0x2060, 0x2066, 0x2067, 0x2068, 0x2069, 0xfeff)
	for _, r := range listed {
		in := "a" + string(r) + "b"
		got := Sanitize(in)
		switch r {
		case 0x1b, 0x90, 0x98, 0x9b, 0x9d, 0x9e, 0x9f:
			// An introducer takes what follows into its sequence, b included.
			if got != "a" {
				t.Errorf("Sanitize(%q) = %q, want %q", in, got, "a")
			}
		default:
			if got != "ab" {
				t.Errorf("Sanitize(%q) = %q, want %q", in, got, "ab")
			}
		}
	}
}

func TestSanitizeKeepsSafeText(t *testing.T) {
	s := "plain name"
	if got := Sanitize(s); got != s {
		t.Fatalf("Sanitize(%q) = %q", s, got)
	}
	if n := testing.AllocsPerRun(100, func() { Sanitize(s) }); n != 0 {
		t.Errorf("a safe string costs %v allocations, want 0", n)
	}
}

// forbiddenOnTerminal is the fuzz test's own statement of what Sanitize must never
// return, written apart from the implementation so the two check each other.
func forbiddenOnTerminal(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, 0x80 <= r && r <= 0x9f: // C0, DEL, C1 (ESC and CSI among them)
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, 0x202a <= r && r <= 0x202e, 0x2066 <= r && r <= 0x2069: // bidi
		return true
	case 0x200b <= r && r <= 0x200d, r == 0x2060, r == 0xfeff: // zero width
		return true
	case r == 0x2028, r == 0x2029:
		return true
	}
	return unicode.Is(unicode.Cf, r)
}

func FuzzSanitize(f *testing.F) {
	for _, v := range displayVectors {
		f.Add(v.in)
	}
	// Seeds at the edges of the escape parser:
	f.Add("\x1b")                       // an introducer with nothing after it
	f.Add("\x1b[")                      // a CSI with no final byte
	f.Add("\x1b]")                      // a control string with no terminator
	f.Add("\x1b]\x1b")                  // a control string ended by a lone ESC at the very end
	f.Add("\x1b]x\x1b\\\x1b[0m")        // ST as ESC backslash, then a CSI straight after
	f.Add("\x1b\x1b[31m")               // ESC ESC: the first stands alone, the second starts a CSI
	f.Add("\u009b\u009d\u009c")         // 8-bit introducers back to back
	f.Add("\xc2")                       // the first byte of a C1's encoding, cut short
	f.Add("\x1b[\xe2\x80\xae")          // a CSI broken by an RLO
	f.Add(strings.Repeat("\u202e", 64)) // nothing but format characters
	f.Fuzz(func(t *testing.T, s string) {
		out := Sanitize(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Sanitize(%q) = %q, not valid UTF-8", s, out)
		}
		for _, r := range out {
			if forbiddenOnTerminal(r) {
				t.Fatalf("Sanitize(%q) = %q, which keeps %U", s, out, r)
			}
		}
		if again := Sanitize(out); again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, out, again)
		}
		if len(out) > len(s)*3 {
			t.Fatalf("Sanitize(%q) grew to %d bytes", s, len(out)) // only U+FFFD may grow a byte to three
		}
		clean := utf8.ValidString(s) && !strings.ContainsFunc(s, forbiddenOnTerminal)
		if clean && !strings.ContainsAny(s, "\u115f\u1160\u3164\uffa0") && out != s {
			t.Fatalf("Sanitize(%q) = %q, but it holds nothing to remove", s, out)
		}
	})
}

func TestCut(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"a longer line", 8, "a longer…"},
		{"héllo", 2, "h…"}, // the é is two bytes: no half of it is kept
	} {
		if got := Cut(tt.s, tt.n); got != tt.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}
