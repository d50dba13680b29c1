package status

import (
	"strings"
	"testing"

	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/mesh"
)

// TestExposure classifies where a mesh listens, as `cotal status` and `cotal up` read it from the
// mesh's recorded state.
func TestExposure(t *testing.T) {
	tests := []struct {
		name     string
		st       mesh.State
		loopback bool
		tls      bool
		line     string
	}{
		{"default loopback", mesh.State{URL: "nats://127.0.0.1:4222", Listen: "127.0.0.1:4222"}, true, false,
			"loopback only (127.0.0.1:4222)"},
		{"all of 127.0.0.0/8", mesh.State{Listen: "127.45.6.7:4222"}, true, false, "loopback only (127.45.6.7:4222)"},
		{"IPv6 loopback", mesh.State{Listen: "[::1]:4222"}, true, false, "loopback only ([::1]:4222)"},
		{"IPv4-mapped loopback", mesh.State{Listen: "[::ffff:127.0.0.1]:4222"}, true, false, "loopback only ([::ffff:127.0.0.1]:4222)"},
		{"localhost", mesh.State{Listen: "localhost:4222"}, true, false, "loopback only (localhost:4222)"},
		{"loopback with TLS", mesh.State{Listen: "127.0.0.1:4222", TLS: true}, true, true, "loopback only (127.0.0.1:4222), with TLS"},
		{"every IPv4 interface", mesh.State{Listen: "0.0.0.0:4222"}, false, false,
			"listening on 0.0.0.0:4222 without TLS (reachable from the network, traffic in clear)"},
		{"every IPv6 interface", mesh.State{Listen: "[::]:4222"}, false, false,
			"listening on [::]:4222 without TLS (reachable from the network, traffic in clear)"},
		{"a LAN address", mesh.State{Listen: "192.168.1.20:4222"}, false, false,
			"listening on 192.168.1.20:4222 without TLS (reachable from the network, traffic in clear)"},
		{"a host name may face the network", mesh.State{Listen: "mesh.example.com:4222"}, false, false,
			"listening on mesh.example.com:4222 without TLS (reachable from the network, traffic in clear)"},
		{"network with TLS", mesh.State{Listen: "0.0.0.0:4222", TLS: true}, false, true,
			"listening on 0.0.0.0:4222 with TLS (reachable from the network, traffic encrypted)"},
		{"a record from before listen was kept", mesh.State{URL: "nats://0.0.0.0:4222"}, false, false,
			"listening on 0.0.0.0:4222 without TLS (reachable from the network, traffic in clear)"},
		{"an old record of a TLS mesh", mesh.State{URL: "tls://127.0.0.1:4222"}, true, true, "loopback only (127.0.0.1:4222), with TLS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.st.Exposure()
			if e.Loopback != tt.loopback || e.TLS != tt.tls {
				t.Errorf("Exposure() = %+v, want loopback %v, TLS %v", e, tt.loopback, tt.tls)
			}
			if got := e.String(); got != tt.line {
				t.Errorf("Exposure().String() = %q, want %q", got, tt.line)
			}
		})
	}
}

func TestRenderShowsExposure(t *testing.T) {
	io, _, out, _ := iostreams.Test()
	e := (mesh.State{Listen: "0.0.0.0:4222"}).Exposure()
	rep := &Report{Running: true, URL: "nats://0.0.0.0:4222", PID: 7, Exposure: &e}
	if err := render(&Options{Factory: factory.New(io)}, rep); err != nil {
		t.Fatal(err)
	}
	want := "mesh up at nats://0.0.0.0:4222 (authenticated, pid 7)\n" +
		"exposure: listening on 0.0.0.0:4222 without TLS (reachable from the network, traffic in clear)\n"
	if !strings.HasPrefix(out.String(), want) {
		t.Errorf("status printed %q, want it to start %q", out.String(), want)
	}

	io, _, out, _ = iostreams.Test()
	if err := render(&Options{Factory: factory.New(io), JSON: true}, rep); err != nil {
		t.Fatal(err)
	}
	if want := `"exposure":{"listen":"0.0.0.0:4222","loopback":false,"tls":false}`; !strings.Contains(out.String(), want) {
		t.Errorf("status --json printed %s, want it to hold %s", out.String(), want)
	}
}
