package manager

import (
	"slices"
	"testing"
)

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

// TestResume: Claude Code and OpenCode reopen their latest session or one by id, with their own
// flags; every other harness, and a malformed id, is refused.
func TestResume(t *testing.T) {
	m := Material{Space: "main", Principal: "local.ann", MCPServers: map[string]MCPServer{"cotal": {Command: "cotal", Args: []string{"mcp"}}}}
	for _, tc := range []struct {
		h      Harness
		resume string
		want   []string
	}{
		{HarnessClaude, ResumeLast, []string{"--continue"}},
		{HarnessClaude, "abc-123", []string{"--resume", "abc-123"}},
		{HarnessOpenCode, ResumeLast, []string{"--continue"}},
		{HarnessOpenCode, "ses_1", []string{"--session", "ses_1"}},
	} {
		sp := Spec{Name: "ann", Agent: tc.h, Resume: tc.resume}
		if err := sp.Agent.resumes(sp.Resume); err != nil {
			t.Fatalf("%s resume %s: %v", tc.h, tc.resume, err)
		}
		argv, _, err := tc.h.command(m, t.TempDir(), sp)
		if err != nil || !containsRun(argv, tc.want) {
			t.Errorf("%s resume %s: argv %q (%v), want %q in it", tc.h, tc.resume, argv, err, tc.want)
		}
	}
	for _, tc := range []struct {
		h      Harness
		resume string
	}{{HarnessCodex, ResumeLast}, {HarnessCotal, ResumeLast}, {"", ResumeLast}, {HarnessClaude, "../x"}, {HarnessClaude, "a b"}} {
		if err := tc.h.resumes(tc.resume); err == nil {
			t.Errorf("%q resume %q was accepted", tc.h, tc.resume)
		}
	}
}

// containsRun reports whether want appears in argv as consecutive items.
func containsRun(argv, want []string) bool {
	for i := 0; i+len(want) <= len(argv); i++ {
		if slices.Equal(argv[i:i+len(want)], want) {
			return true
		}
	}
	return false
}
