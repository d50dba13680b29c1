// Package brokertest runs a bare embedded broker for the tests of packages below a mesh.
package brokertest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/broker"
)

// Start runs a bare open broker (no authentication, nothing provisioned) and returns its URL. It
// stops at cleanup.
func Start(t testing.TB) string {
	t.Helper()
	conf, err := broker.RenderOpen(broker.Config{StoreDir: t.TempDir(), Port: 0})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "server.conf")
	if err := os.WriteFile(path, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := broker.Start(context.Background(), path, nil)
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("stop broker: %v", err)
		}
	})
	return s.ClientURL()
}

// JetStream runs a bare broker (Start) and returns a JetStream context on a connection to it,
// closed at cleanup.
func JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(Start(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
