package run_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocotal/cotal/internal/cli"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
)

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	io, _, out, errOut := iostreams.Test()
	code := cli.Main(t.Context(), io, args)
	return code, out.String(), errOut.String()
}

// TestRunCheck: `cotal run check` prints ok and exits 0 for an accepted program; for a refused
// one it prints FILE:LINE:COL: CODE message per refusal and exits 1; --json prints the report;
// a missing file is a usage error.
func TestRunCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.js")
	bad := filepath.Join(dir, "bad.js")
	os.WriteFile(good, []byte("const x = await sleep(\"1m\")\nlog(x)\n"), 0o600)
	os.WriteFile(bad, []byte("var a = 1\nconst b = a == 2\n"), 0o600)

	if code, out, _ := run(t, "run", "check", good); code != exit.OK || out != "ok\n" {
		t.Errorf("check good: exit %d %q", code, out)
	}
	code, out, _ := run(t, "run", "check", bad)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exit.Failed || len(lines) != 2 || !strings.HasPrefix(lines[0], bad+":1:1: L1003 ") || !strings.HasPrefix(lines[1], bad+":2:13: L1025 ") {
		t.Errorf("check bad: exit %d %q", code, out)
	}
	code, out, _ = run(t, "run", "check", "--json", bad)
	var r struct {
		Accepted    bool `json:"accepted"`
		Diagnostics []struct {
			Code         string `json:"code"`
			Line, Column int
			Message      string `json:"message"`
		} `json:"diagnostics"`
	}
	if code != exit.Failed || json.Unmarshal([]byte(out), &r) != nil || r.Accepted || len(r.Diagnostics) != 2 || r.Diagnostics[1].Code != "L1025" || r.Diagnostics[1].Column != 13 {
		t.Errorf("check --json bad: exit %d %s", code, out)
	}
	if code, out, _ := run(t, "run", "check", "--json", good); code != exit.OK || !strings.Contains(out, `"accepted":true,"diagnostics":[]`) {
		t.Errorf("check --json good: exit %d %s", code, out)
	}
	if code, _, stderr := run(t, "run", "check", filepath.Join(dir, "missing.js")); code != exit.Usage || !strings.Contains(stderr, "missing.js") {
		t.Errorf("check a missing file: exit %d %s", code, stderr)
	}
	binary := filepath.Join(dir, "binary.js")
	os.WriteFile(binary, []byte{0xff, 0xfe, 0x00}, 0o600)
	if code, _, stderr := run(t, "run", "check", binary); code != exit.Usage || !strings.Contains(stderr, "not UTF-8") {
		t.Errorf("check a binary file: exit %d %s", code, stderr)
	}
}
