package up

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/mesh"
)

// TestMetricsFlag: --metrics takes a host:port to listen on, and anything else is a usage error
// that names the flag and the value.
func TestMetricsFlag(t *testing.T) {
	options := func(addr string) (mesh.Options, error) {
		io, _, _, _ := iostreams.Test()
		var mo mesh.Options
		cmd := NewCmdUp(factory.New(io), func(_ context.Context, o *Options) (err error) {
			mo, err = o.meshOptions()
			return err
		})
		cmd.SetArgs([]string{"--metrics", addr})
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		return mo, cmd.Execute()
	}
	for _, addr := range []string{"127.0.0.1:9464", ":9464", "localhost:9464", "[::1]:9464", "0.0.0.0:65535"} {
		if mo, err := options(addr); err != nil || mo.MetricsAddr != addr {
			t.Errorf("--metrics %s: %q, %v", addr, mo.MetricsAddr, err)
		}
	}
	for _, addr := range []string{"9464", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", "127.0.0.1:http", "a b:9464", "http://127.0.0.1:9464"} {
		_, err := options(addr)
		_, usage := errors.AsType[*exit.UsageError](err)
		if !usage || !strings.Contains(err.Error(), "--metrics") || !strings.Contains(err.Error(), addr) {
			t.Errorf("--metrics %q: %v, want a usage error naming it", addr, err)
		}
	}
}
