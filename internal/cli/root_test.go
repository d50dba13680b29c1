package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/wire"
)

func TestMainExitCodes(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{name: "version", args: []string{"version"}, code: exit.OK, stdout: "protocol " + wire.ProtocolVersion},
		{name: "no args prints help", args: nil, code: exit.OK, stdout: "Usage:"},
		{name: "unknown command", args: []string{"bogus"}, code: exit.Usage, stderr: `unknown command "bogus"`},
		{name: "unknown flag", args: []string{"version", "--nope"}, code: exit.Usage, stderr: "unknown flag: --nope"},
		{name: "extra argument", args: []string{"version", "x"}, code: exit.Usage, stderr: `unknown command "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			io, _, out, errOut := iostreams.Test()
			code := Main(t.Context(), io, tt.args)
			if code != tt.code {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tt.code, errOut)
			}
			if !strings.Contains(out.String(), tt.stdout) {
				t.Errorf("stdout %q does not contain %q", out, tt.stdout)
			}
			if !strings.Contains(errOut.String(), tt.stderr) {
				t.Errorf("stderr %q does not contain %q", errOut, tt.stderr)
			}
		})
	}
}

func TestVersionJSON(t *testing.T) {
	io, _, out, _ := iostreams.Test()
	if code := Main(t.Context(), io, []string{"version", "--json"}); code != exit.OK {
		t.Fatalf("exit code %d", code)
	}
	var got map[string]string
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	if got["protocolVersion"] != wire.ProtocolVersion || got["version"] == "" || !strings.HasPrefix(got["go"], "go") {
		t.Errorf("--json = %v", got)
	}
}
