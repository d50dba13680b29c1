package manager

import "testing"

// TestTOMLString: what a Codex -c override quotes is a TOML basic string, whatever it holds.
func TestTOMLString(t *testing.T) {
	for in, want := range map[string]string{
		`cotal`:          `"cotal"`,
		`a "b" \c`:       `"a \"b\" \\c"`,
		"bell\a tab\t":   `"bell\u0007 tab\u0009"`,
		"bad\xffutf8":    "\"bad\uFFFDutf8\"",
		"/p/é/cotal bin": `"/p/é/cotal bin"`,
	} {
		if got := tomlString(in); got != want {
			t.Errorf("tomlString(%q) = %s, want %s", in, got, want)
		}
	}
}
