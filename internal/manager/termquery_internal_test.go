package manager

import (
	"strings"
	"testing"
)

// TestQueryScanner: the queries a chunk ends are answered once each, in the order asked, a query
// split across chunks included; other escapes are not; a run's answers are bounded.
func TestQueryScanner(t *testing.T) {
	var s queryScanner
	osc11 := "\x1b]11;rgb:0000/0000/0000\x1b\\"
	for _, tc := range []struct{ chunk, want string }{
		{"hello \x1b]11;?\x1b\\ and \x1b[6n", osc11 + "\x1b[1;1R"},
		{"\x1b[6", ""},
		{"n then \x1b]1", "\x1b[1;1R"},
		{"0;?\x07", "\x1b]10;rgb:ffff/ffff/ffff\x07"},
		{"\x1b[31mred\x1b[0m \x1b]0;title\x07", ""},
	} {
		if got := string(s.answers([]byte(tc.chunk))); got != tc.want {
			t.Errorf("answers(%q) = %q, want %q", tc.chunk, got, tc.want)
		}
	}
	var flood queryScanner
	if got := flood.answers([]byte(strings.Repeat("\x1b[6n", 3*maxAnswers))); len(got) != maxAnswers*len("\x1b[1;1R") {
		t.Errorf("a flood of queries got %d bytes of answers, want %d", len(got), maxAnswers*len("\x1b[1;1R"))
	}
}
