package cotal_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// goList runs `go list` with args and returns its lines; it skips the test when no go command is
// on PATH (the guard needs the toolchain, not the package).
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	return strings.Fields(string(out))
}

// TestSDKStaysAClient keeps the SDK a client library: a program that imports it must not pull
// in a broker, a CLI framework, an MCP server or any of the mesh's daemons.
func TestSDKStaysAClient(t *testing.T) {
	banned := map[string]string{
		"github.com/nats-io/nats-server":           "the broker belongs to cotal up, not to clients",
		"github.com/spf13/cobra":                   "the CLI framework belongs to cmd/cotal",
		"github.com/modelcontextprotocol/go-sdk":   "the MCP server belongs to cotal mcp",
		"github.com/gocotal/cotal/internal/cli":    "the CLI",
		"github.com/gocotal/cotal/internal/mesh":   "the mesh directory and its daemons",
		"github.com/gocotal/cotal/internal/broker": "the embedded broker",
	}
	for _, daemon := range []string{"authority", "delivery", "manager", "liveness", "journal", "space", "warden", "mcptools", "bench"} {
		banned["github.com/gocotal/cotal/internal/"+daemon] = "a plane of the mesh, not of the client"
	}
	for _, dep := range goList(t, "-deps", "github.com/gocotal/cotal") {
		for prefix, why := range banned {
			if dep == prefix || strings.HasPrefix(dep, prefix+"/") {
				t.Errorf("the SDK depends on %s: %s", dep, why)
			}
		}
	}
}

// TestPublicSurface holds the importable packages to the product: the SDK, its test harness, the
// wire contract and Cotal Lang (a Go program embedding workflows with its own effect handler is
// a use of its own). Everything else lives under internal/ (and the binary under cmd/).
func TestPublicSurface(t *testing.T) {
	var public []string
	for _, p := range goList(t, "github.com/gocotal/cotal/...") {
		if strings.Contains(p, "/internal/") || strings.Contains(p, "/cmd/") {
			continue
		}
		public = append(public, p)
	}
	want := []string{"github.com/gocotal/cotal", "github.com/gocotal/cotal/cotaltest", "github.com/gocotal/cotal/lang", "github.com/gocotal/cotal/wire"}
	if !slices.Equal(public, want) {
		t.Errorf("public packages = %q, want %q", public, want)
	}
}
