package broker_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/broker"
	"github.com/gocotal/cotal/wire"
)

func trustFor(t *testing.T, dir string, spaces ...string) (*authority.Keyring, broker.Trust) {
	t.Helper()
	kr, err := authority.OpenKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	op, err := kr.OperatorJWT()
	if err != nil {
		t.Fatal(err)
	}
	sys, err := kr.SystemAccountJWT()
	if err != nil {
		t.Fatal(err)
	}
	tr := broker.Trust{OperatorJWT: op, SystemAccount: sys}
	for _, s := range spaces {
		sk, err := kr.Space(wire.Space(s))
		if err != nil {
			t.Fatal(err)
		}
		a, store, err := kr.SpaceAccountJWTs(sk)
		if err != nil {
			t.Fatal(err)
		}
		tr.Accounts = append(tr.Accounts, a, store)
	}
	return kr, tr
}

func TestRenderAuth(t *testing.T) {
	dir := t.TempDir()
	kr, tr := trustFor(t, dir, "main", "other")
	conf, err := broker.RenderAuth(broker.Config{StoreDir: filepath.Join(dir, "js")}, tr)
	if err != nil {
		t.Fatal(err)
	}
	s := string(conf)
	for _, want := range []string{
		`host: "127.0.0.1"`, "port: -1", "max_control_line: 65536", "resolver: MEMORY", "resolver_preload: {",
		`system_account: "` + kr.SystemAccountPublicKey() + `"`, `store_dir: "` + filepath.Join(dir, "js") + `"`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("config lacks %q:\n%s", want, s)
		}
	}
	if n := strings.Count(s, ": \"eyJ"); n != 6 { // operator + system + two spaces and their stores
		t.Errorf("config holds %d JWTs, want 6", n)
	}
	if strings.Contains(s, "tls {") {
		t.Error("no TLS block unless asked")
	}
	// The server's own store limit holds both stores' default 16 GiB, however full the disk: a
	// server alone reserves each account's limit against it.
	var maxStore int64
	for line := range strings.Lines(s) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "max_file_store: "); ok {
			maxStore, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if maxStore < 2*authority.DefaultStorageLimits.Disk {
		t.Errorf("max_file_store %d does not hold two stores of %d", maxStore, authority.DefaultStorageLimits.Disk)
	}
}

func TestRenderAuthRefusesForeignAccount(t *testing.T) {
	_, tr := trustFor(t, t.TempDir(), "main")
	_, foreign := trustFor(t, t.TempDir(), "main")
	tr.Accounts = append(tr.Accounts, foreign.Accounts[0])
	_, err := broker.RenderAuth(broker.Config{StoreDir: t.TempDir()}, tr)
	if err == nil || !strings.Contains(err.Error(), "not by this broker's operator") {
		t.Fatalf("a foreign-signed account must be refused, got %v", err)
	}
	tr.Accounts = nil
	if _, err := broker.RenderAuth(broker.Config{StoreDir: t.TempDir()}, tr); err == nil {
		t.Error("a broker with no space account must be refused")
	}
}

func TestRenderRefusesBadInput(t *testing.T) {
	_, tr := trustFor(t, t.TempDir(), "main")
	tests := []struct {
		name string
		c    broker.Config
		want string
	}{
		{"no store", broker.Config{}, "store directory"},
		{"port range", broker.Config{StoreDir: "/x", Port: 70000}, "outside 0-65535"},
		{"quote in path", broker.Config{StoreDir: `/x"y`}, "quote"},
		{"half TLS", broker.Config{StoreDir: "/x", TLS: &broker.TLSConfig{CertFile: "c"}}, "both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := broker.RenderAuth(tt.c, tr); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("RenderAuth = %v, want an error about %q", err, tt.want)
			}
		})
	}
	if _, err := broker.RenderOpen(broker.Config{StoreDir: "/x", Host: "0.0.0.0"}); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("an open broker on 0.0.0.0 must be refused, got %v", err)
	}
	conf, err := broker.RenderOpen(broker.Config{StoreDir: "/x", TLS: &broker.TLSConfig{CertFile: "c.pem", KeyFile: "k.pem"}})
	if err != nil || !strings.Contains(string(conf), `cert_file: "c.pem"`) || strings.Contains(string(conf), "operator") {
		t.Errorf("RenderOpen = %s, %v", conf, err)
	}
}

func startFrom(t *testing.T, conf []byte) *broker.Server {
	t.Helper()
	path := filepath.Join(t.TempDir(), "server.conf")
	if err := os.WriteFile(path, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := broker.Start(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return s
}

func TestStartOpen(t *testing.T) {
	conf, err := broker.RenderOpen(broker.Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s := startFrom(t, conf)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := wire.CheckServerVersion(nc.ConnectedServerVersion()); err != nil {
		t.Error(err)
	}
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.AccountInfo(); err != nil {
		t.Errorf("JetStream must be on: %v", err)
	}
}

func TestStartAuthRefusesAnonymous(t *testing.T) {
	_, tr := trustFor(t, t.TempDir(), "main")
	conf, err := broker.RenderAuth(broker.Config{StoreDir: t.TempDir()}, tr)
	if err != nil {
		t.Fatal(err)
	}
	s := startFrom(t, conf)
	if nc, err := nats.Connect(s.ClientURL()); err == nil {
		nc.Close()
		t.Fatal("an authenticated broker accepted a connection without credentials")
	}
}

func TestStartPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	conf, err := broker.RenderOpen(broker.Config{StoreDir: t.TempDir(), Port: port})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "server.conf")
	if err := os.WriteFile(path, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := broker.Start(t.Context(), path, nil); !errors.Is(err, broker.ErrPortInUse) {
		t.Fatalf("Start on a taken port = %v, want ErrPortInUse", err)
	}
}
