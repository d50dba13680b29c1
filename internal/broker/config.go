package broker

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/jwt/v2"
)

// DefaultHost is where a broker listens unless told otherwise: loopback, so a mesh is private to
// its machine until someone widens it on purpose.
const DefaultHost = "127.0.0.1"

// DefaultPort is the NATS client port.
const DefaultPort = 4222

// maxControlLine is the longest protocol line the broker accepts. A credential's grant rows ride
// its CONNECT line, and an agent with many channels needs more than the default 4 KiB.
const maxControlLine = 65536

// Config is where and how a broker listens and stores. The zero value is not usable: StoreDir is
// required.
type Config struct {
	// ServerName names the server in logs and monitoring; "cotal" when empty.
	ServerName string
	// Host is the listen address; DefaultHost when empty.
	Host string
	// Port is the client port; 0 picks a free port.
	Port int
	// StoreDir is the JetStream store directory.
	StoreDir string
	// MaxFileStore is the server's JetStream file storage limit in bytes; zero leaves it to the
	// server (three quarters of the free disk). RenderAuth sets it for the accounts it serves.
	MaxFileStore int64
	// TLS, when set, makes the broker require TLS from clients, and from routes in a cluster.
	TLS *TLSConfig
	// Cluster, when set, joins the broker to a NATS cluster; ServerName is then required and
	// must differ on every node.
	Cluster *ClusterConfig
	// MonitorPort, when set, serves the server's own monitoring endpoints (/varz, /jsz,
	// /connz...) on 127.0.0.1 at this port: loopback only, for what they tell of connections.
	MonitorPort int
}

// ClusterConfig joins a broker to a cluster of brokers that serve the same operator and accounts.
// JetStream runs clustered (Raft) across them, and in operator mode the account resolver is
// nats-server's own distributed one, so an account update pushed on one node (a new space, a
// revocation) reaches every node and survives their restarts.
type ClusterConfig struct {
	// Name is the cluster's name, the same on every node.
	Name string
	// Host is where routes are accepted; Config.Host when empty.
	Host string
	// Port is the route port, 1-65535.
	Port int
	// Routes are the seed routes, nats://HOST:PORT each; a node's own may be among them.
	Routes []string
	// User and Password authorize routes, the same on every node: without them anyone who
	// reaches the route port could join the cluster.
	User, Password string
}

// TLSConfig names a server certificate and its key.
type TLSConfig struct {
	CertFile string
	KeyFile  string
}

// Trust is what an authenticated broker trusts: one operator, its system account, and the space
// accounts it serves, each a JWT signed by the operator.
type Trust struct {
	OperatorJWT   string
	SystemAccount string // the system account's JWT
	Accounts      []string
}

// RenderAuth renders a nats-server configuration for an authenticated broker: operator mode with
// the MEMORY resolver preloaded with the system and space accounts. It refuses an account JWT not
// signed by the operator, which would either stop the broker from booting or advertise a space it
// cannot authenticate. The result runs a stock `nats-server -c` as well as the embedded server.
func RenderAuth(c Config, t Trust) ([]byte, error) {
	op, err := jwt.DecodeOperatorClaims(t.OperatorJWT)
	if err != nil {
		return nil, fmt.Errorf("render broker config: operator jwt: %w", err)
	}
	sys, err := decodeAccount(op, t.SystemAccount)
	if err != nil {
		return nil, fmt.Errorf("render broker config: system account: %w", err)
	}
	if op.SystemAccount != sys.Subject {
		return nil, fmt.Errorf("render broker config: the operator names system account %s, not %s", op.SystemAccount, sys.Subject)
	}
	if len(t.Accounts) == 0 {
		return nil, errors.New("render broker config: at least one space account is required")
	}
	preload := make([][2]string, 0, len(t.Accounts)+1)
	preload = append(preload, [2]string{sys.Subject, t.SystemAccount})
	var reserved int64
	for i, a := range t.Accounts {
		ac, err := decodeAccount(op, a)
		if err != nil {
			return nil, fmt.Errorf("render broker config: space account %d: %w", i, err)
		}
		preload = append(preload, [2]string{ac.Subject, a})
		if disk := ac.Limits.JetStreamLimits.DiskStorage; disk > 0 {
			reserved += disk + accountStreamReserve
		}
	}
	if c.Cluster == nil && reserved > 0 {
		// A server alone reserves each account's bounded disk limit against its own store
		// limit, which it takes as three quarters of the disk that is free when it starts:
		// on a fuller disk an account past that gets no JetStream at all, and its clients
		// find no responders. The accounts' limits are what bound the disk here, so the
		// server's own is set to hold them all (or what it would take, if that is more).
		c.MaxFileStore = max(reserved, freeDisk(c.StoreDir)/4*3)
	}
	var b bytes.Buffer
	if err := writeListen(&b, c); err != nil {
		return nil, err
	}
	fmt.Fprintf(&b, "operator: %q\n", t.OperatorJWT)
	fmt.Fprintf(&b, "system_account: %q\n", sys.Subject)
	if c.Cluster == nil {
		b.WriteString("resolver: MEMORY\n")
	} else {
		// The distributed resolver keeps the accounts under the store and shares every update
		// with the other nodes; an account is never deleted through it.
		fmt.Fprintf(&b, "resolver: {\n  type: full\n  dir: %q\n  allow_delete: false\n  interval: \"30s\"\n}\n", ResolverDir(c.StoreDir))
	}
	// Preloaded accounts seed the resolver. The distributed resolver stores a preload as its
	// newest JWT of the account, so an account it already holds is not preloaded: the JWT it
	// holds may carry what another authority node pushed (a revocation) since this node rendered
	// its own, and the preload would undo it across the cluster.
	b.WriteString("resolver_preload: {\n")
	for _, p := range preload {
		if c.Cluster != nil && resolverHolds(c.StoreDir, p[0]) {
			continue
		}
		fmt.Fprintf(&b, "  %s: %q\n", p[0], p[1])
	}
	b.WriteString("}\n")
	return b.Bytes(), nil
}

// ResolverDir is where a clustered broker's distributed resolver keeps the account JWTs: beside
// the JetStream store.
func ResolverDir(storeDir string) string {
	return filepath.Join(filepath.Dir(filepath.Clean(storeDir)), "jwt")
}

// resolverHolds reports whether the distributed resolver under storeDir holds a JWT of account.
func resolverHolds(storeDir, account string) bool {
	_, err := os.Stat(filepath.Join(ResolverDir(storeDir), account+".jwt"))
	return err == nil
}

// RenderOpen renders a nats-server configuration with no authentication. Anyone who can connect
// can do anything, so it refuses any host that is not a loopback address and any cluster.
func RenderOpen(c Config) ([]byte, error) {
	if c.Cluster != nil {
		return nil, errors.New("render broker config: an open (no-auth) broker cannot join a cluster")
	}
	host := c.Host
	if host == "" {
		host = DefaultHost
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("render broker config: an open (no-auth) broker listens on loopback only, not %q", host)
	}
	var b bytes.Buffer
	if err := writeListen(&b, c); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// decodeAccount decodes an account JWT and checks that op signed it.
func decodeAccount(op *jwt.OperatorClaims, token string) (*jwt.AccountClaims, error) {
	ac, err := jwt.DecodeAccountClaims(token)
	if err != nil {
		return nil, err
	}
	if ac.Issuer != op.Subject && !op.SigningKeys.Contains(ac.Issuer) {
		return nil, fmt.Errorf("account %s (%q) is signed by %s, not by this broker's operator %s", ac.Subject, ac.Name, ac.Issuer, op.Subject)
	}
	return ac, nil
}

// writeListen writes the settings both modes share.
func writeListen(b *bytes.Buffer, c Config) error {
	name := c.ServerName
	if name == "" {
		name = "cotal"
	}
	host := c.Host
	if host == "" {
		host = DefaultHost
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("render broker config: port %d is outside 0-65535", c.Port)
	}
	port := c.Port
	if port == 0 {
		port = -1 // nats-server picks a free port
	}
	if c.StoreDir == "" {
		return errors.New("render broker config: a JetStream store directory is required")
	}
	for _, v := range []struct{ what, s string }{{"server name", name}, {"host", host}, {"store dir", c.StoreDir}} {
		if err := confString(v.what, v.s); err != nil {
			return err
		}
	}
	b.WriteString("# Written by cotal; `cotal up` rewrites it.\n")
	fmt.Fprintf(b, "server_name: %q\n", name)
	fmt.Fprintf(b, "host: %q\n", host)
	fmt.Fprintf(b, "port: %d\n", port)
	fmt.Fprintf(b, "max_control_line: %d\n", maxControlLine)
	if c.MonitorPort != 0 {
		if c.MonitorPort < 1 || c.MonitorPort > 65535 || c.MonitorPort == c.Port {
			return fmt.Errorf("render broker config: monitor port %d must be 1-65535 and not the client port", c.MonitorPort)
		}
		fmt.Fprintf(b, "http: \"127.0.0.1:%d\"\n", c.MonitorPort)
	}
	// strict is the server's default; it is pinned because it is a security property here: were
	// an acknowledgement a client aims at a $JS.API subject through its reply subject ever taken
	// as a request, it carries fields no request has, and a strict server refuses to act on it.
	fmt.Fprintf(b, "jetstream {\n  store_dir: %q\n  strict: true\n", c.StoreDir)
	if c.MaxFileStore > 0 {
		fmt.Fprintf(b, "  max_file_store: %d\n", c.MaxFileStore)
	}
	b.WriteString("}\n")
	if c.TLS != nil {
		if c.TLS.CertFile == "" || c.TLS.KeyFile == "" {
			return errors.New("render broker config: TLS needs both a certificate and a key file")
		}
		for _, v := range []struct{ what, s string }{{"TLS certificate", c.TLS.CertFile}, {"TLS key", c.TLS.KeyFile}} {
			if err := confString(v.what, v.s); err != nil {
				return err
			}
		}
		fmt.Fprintf(b, "tls {\n  cert_file: %q\n  key_file: %q\n}\n", c.TLS.CertFile, c.TLS.KeyFile)
	}
	if c.Cluster != nil {
		return writeCluster(b, c, host)
	}
	return nil
}

// writeCluster writes the cluster block: the route listener, its authorization, the seed routes
// (carrying the route credentials) and, with TLS, route TLS on the same certificate.
func writeCluster(b *bytes.Buffer, c Config, host string) error {
	cl := c.Cluster
	if c.ServerName == "" {
		return errors.New("render broker config: a cluster node needs a server name of its own")
	}
	if cl.Name == "" || strings.ContainsAny(cl.Name, " \t.*>") {
		return fmt.Errorf("render broker config: cluster name %q: must be a non-empty name without spaces, dots or wildcards", cl.Name)
	}
	if cl.Port < 1 || cl.Port > 65535 {
		return fmt.Errorf("render broker config: cluster port %d is outside 1-65535", cl.Port)
	}
	if cl.User == "" || cl.Password == "" {
		return errors.New("render broker config: a cluster needs a route user and password")
	}
	if cl.Host != "" {
		host = cl.Host
	}
	for _, v := range []struct{ what, s string }{{"cluster name", cl.Name}, {"cluster host", host}, {"route user", cl.User}, {"route password", cl.Password}} {
		if err := confString(v.what, v.s); err != nil {
			return err
		}
	}
	scheme := "nats"
	if c.TLS != nil {
		scheme = "tls"
	}
	routes := make([]string, 0, len(cl.Routes))
	for _, r := range cl.Routes {
		u, err := url.Parse(r)
		if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Hostname() == "" || u.Port() == "" || u.User != nil || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("render broker config: route %q: must be nats://HOST:PORT", r)
		}
		u.Scheme, u.User, u.Path = scheme, url.UserPassword(cl.User, cl.Password), ""
		if err := confString("route", u.String()); err != nil {
			return err
		}
		routes = append(routes, u.String())
	}
	fmt.Fprintf(b, "cluster {\n  name: %q\n  host: %q\n  port: %d\n", cl.Name, host, cl.Port)
	fmt.Fprintf(b, "  authorization {\n    user: %q\n    password: %q\n  }\n", cl.User, cl.Password)
	if c.TLS != nil {
		fmt.Fprintf(b, "  tls {\n    cert_file: %q\n    key_file: %q\n  }\n", c.TLS.CertFile, c.TLS.KeyFile)
	}
	b.WriteString("  routes: [\n")
	for _, r := range routes {
		fmt.Fprintf(b, "    %q\n", r)
	}
	b.WriteString("  ]\n}\n")
	return nil
}

// confString refuses a value the configuration file cannot carry verbatim in double quotes: the
// nats-server parser does not share Go's escape syntax, so such a value is refused, not escaped.
func confString(what, s string) error {
	if strings.ContainsAny(s, "\"\\\n\r\x00") || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 }) {
		return fmt.Errorf("render broker config: %s %q contains a quote, backslash or control character", what, s)
	}
	return nil
}
