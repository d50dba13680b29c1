package mesh

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/broker"
	"github.com/gocotal/cotal/wire"
)

// State records a running mesh in its directory, so that other commands find and stop it. The
// field names are a stable interface (`cotal status --json` prints them).
type State struct {
	PID int `json:"pid"`
	// ProcessStart is when the kernel started PID (Linux's clock ticks since boot), so that a pid
	// reused by another process after a crash is not taken for the mesh's; empty where the
	// kernel does not show it.
	ProcessStart string       `json:"processStart,omitempty"`
	URL          string       `json:"url"`
	Spaces       []wire.Space `json:"spaces"`
	Open         bool         `json:"open"`
	StartedAt    time.Time    `json:"startedAt"`
	// Listen is the address the client port is bound to, such as 127.0.0.1:4222 or 0.0.0.0:4222.
	// A record written before it was kept lacks it; Exposure then reads the URL.
	Listen string `json:"listen,omitempty"`
	// TLS reports whether clients must connect with TLS.
	TLS bool `json:"tls,omitempty"`
	// ExchangeURL is the auth service's public face in user-auth mode: what `cotal login
	// --mesh` and `cotal supervise --mesh` take on another machine.
	ExchangeURL string `json:"exchangeUrl,omitempty"`
	// Cluster names the NATS cluster this node belongs to; empty for a mesh of one node.
	Cluster string `json:"cluster,omitempty"`
	// Keyless marks a cluster node started from a bundle: it holds no keys, so it provisions,
	// issues and runs nothing but its broker.
	Keyless bool `json:"keyless,omitempty"`
	// NodeDown marks a state read while this node is down, its cluster reached through the other
	// nodes (ThroughPeers): no process runs here, and URL lists the others.
	NodeDown bool `json:"nodeDown,omitempty"`
	// Creds is set for a mesh reached through the registry by its server and a credential file
	// (Registered names it): commands act as that credential, and issue none of their own. It is
	// never written to the state file.
	Creds      string `json:"-"`
	Registered string `json:"-"`
}

// Exposure is who can reach a mesh's broker and whether what it carries is encrypted. The field
// names are a stable interface (`cotal status --json` prints them).
type Exposure struct {
	// Listen is the host:port the broker listens on.
	Listen string `json:"listen"`
	// Loopback is true when only this machine can connect: the host is 127.0.0.0/8, ::1 or
	// localhost. 0.0.0.0 and :: are every interface, and so not loopback.
	Loopback bool `json:"loopback"`
	// TLS is true when clients must connect with TLS.
	TLS bool `json:"tls"`
}

// Exposure classifies where st's broker listens.
func (st State) Exposure() Exposure {
	e := Exposure{Listen: st.Listen, TLS: st.TLS}
	if e.Listen == "" { // a record from before Listen and TLS were kept: the URL carries both
		if u, err := url.Parse(st.URL); err == nil {
			e.Listen, e.TLS = u.Host, u.Scheme == "tls"
		}
	}
	if host, _, err := net.SplitHostPort(e.Listen); err == nil {
		e.Loopback = loopbackHost(host)
	}
	return e
}

// String describes e in the words `cotal status` prints after "exposure: ".
func (e Exposure) String() string {
	switch {
	case e.Loopback && e.TLS:
		return "loopback only (" + e.Listen + "), with TLS"
	case e.Loopback:
		return "loopback only (" + e.Listen + ")"
	case e.TLS:
		return "listening on " + e.Listen + " with TLS (reachable from the network, traffic encrypted)"
	default:
		return "listening on " + e.Listen + " without TLS (reachable from the network, traffic in clear)"
	}
}

// listenAddr is the host:port a broker asked to listen on host is bound to: the host as asked
// (broker.DefaultHost when empty), since a listener on 0.0.0.0 reports itself as [::], and the
// port as bound, which a request for any free port leaves to the kernel.
func listenAddr(host string, bound net.Addr) string {
	if host == "" {
		host = broker.DefaultHost
	}
	tcp, ok := bound.(*net.TCPAddr)
	if !ok {
		return bound.String()
	}
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}

// loopbackHost reports whether a listen host reaches this machine only: "localhost", or an
// address in 127.0.0.0/8 or ::1 (an IPv4-mapped one too). The unspecified addresses listen on
// every interface, and any other name may resolve to one that faces the network.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.WithZone("").IsLoopback()
}

// ErrNotRunning is returned by ReadState when no mesh is recorded as running.
var ErrNotRunning = errors.New("no mesh is running")

// ReadState returns the recorded state of the mesh in d. It returns ErrNotRunning when none is
// recorded or the recorded process is gone or is not the one that wrote the record (a stale
// record, which it removes).
func (d Dir) ReadState() (*State, error) {
	raw, err := os.ReadFile(d.StatePath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotRunning
	}
	if err != nil {
		return nil, fmt.Errorf("read mesh state: %w", err)
	}
	var st State
	if err := json.Unmarshal(raw, &st); err != nil || st.PID <= 0 || st.URL == "" {
		return nil, fmt.Errorf("mesh state %s is not valid (remove it if no mesh is running): %v", d.StatePath(), err)
	}
	if !st.ownsProcess() {
		_ = os.Remove(d.StatePath()) // stale: its process is gone; a failed remove is retried next time
		return nil, ErrNotRunning
	}
	return &st, nil
}

func (d Dir) writeState(st *State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode mesh state: %w", err)
	}
	return atomicfile.Write(d.StatePath(), append(b, '\n'), 0o600)
}

// clearState removes the state file if it still names pid.
func (d Dir) clearState(pid int) { removeIfPID(d.StatePath(), pid) }

// removeIfPID removes the record at path (a JSON object with a "pid") if it still names pid: a
// process clearing its own record on exit leaves a successor's alone. It is best effort: a
// reader treats a record whose process is gone as stale.
func removeIfPID(path string, pid int) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var rec struct {
		PID int `json:"pid"`
	}
	if json.Unmarshal(raw, &rec) == nil && rec.PID == pid {
		_ = os.Remove(path)
	}
}
