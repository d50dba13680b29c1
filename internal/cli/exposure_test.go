package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/meshtest"
)

// TestUpExposure checks what `cotal up` and `cotal status` say about who can reach the broker:
// nothing to warn about on loopback, and a warning naming the risk, without refusing to start,
// on every interface without TLS. Binding 0.0.0.0 is safe here: the test's clients reach it over
// loopback and send nothing to another address.
func TestUpExposure(t *testing.T) {
	tests := []struct {
		name     string
		host     []string
		warn     bool
		exposure string // the status line, up to the port
		loopback bool
	}{
		{"loopback", nil, false, "exposure: loopback only (127.0.0.1:", true},
		{"every interface without TLS", []string{"--host", "0.0.0.0"}, true, "exposure: listening on 0.0.0.0:", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			_, upErr, stopUp := background(t, append([]string{"up", "--dir", dir, "--port", "0"}, tt.host...)...)
			st := waitUp(t, dir, nil)

			code, out, stderr := run(t, "status", "--dir", dir)
			if code != exit.OK {
				t.Fatalf("status exit %d: %s", code, stderr)
			}
			var line string
			for l := range strings.Lines(out) {
				if strings.HasPrefix(l, "exposure: ") {
					line = strings.TrimSuffix(l, "\n")
				}
			}
			if !strings.HasPrefix(line, tt.exposure) {
				t.Errorf("status shows %q, want a line starting %q\n%s", line, tt.exposure, out)
			}
			if tt.warn && !strings.HasSuffix(line, " without TLS (reachable from the network, traffic in clear)") {
				t.Errorf("status does not say the traffic is in clear: %q", line)
			}

			code, out, stderr = run(t, "status", "--dir", dir, "--json")
			var rep struct {
				Exposure struct {
					Listen   string
					Loopback bool
					TLS      bool
				}
			}
			if code != exit.OK || json.Unmarshal([]byte(out), &rep) != nil {
				t.Fatalf("status --json exit %d: %q %s", code, out, stderr)
			}
			if rep.Exposure.Loopback != tt.loopback || rep.Exposure.TLS || rep.Exposure.Listen != st.Listen {
				t.Errorf("status --json exposure = %+v, state listens on %q", rep.Exposure, st.Listen)
			}

			if tt.warn {
				meshtest.Eventually(t, 20*time.Second, "up's exposure warning", func() bool {
					return strings.Contains(upErr.String(), "warning: the broker listens on "+st.Listen+" without TLS, reachable from the network.")
				})
				for _, want := range []string{"read and alter every message", "Seeds never cross the wire", "--tls-cert"} {
					if !strings.Contains(upErr.String(), want) {
						t.Errorf("the warning does not say %q:\n%s", want, upErr)
					}
				}
			}
			if code := stopUp(); code != exit.OK {
				t.Errorf("up exit %d: %s", code, upErr)
			}
			if !tt.warn && strings.Contains(upErr.String(), "warning: the broker listens") {
				t.Errorf("up warned about a loopback listener:\n%s", upErr)
			}
		})
	}
}
