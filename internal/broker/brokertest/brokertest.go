// Package brokertest runs a bare embedded broker for the tests of packages below a mesh.
package brokertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	return JetStreamAt(t, Start(t))
}

// JetStreamAt returns a JetStream context on a connection of its own to the broker at url, closed
// at cleanup.
func JetStreamAt(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
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

// Cluster runs a bare cluster of n open brokers with JetStream on loopback and returns their
// client URLs once a stream of n replicas can be placed on it. It stops at cleanup.
func Cluster(t testing.TB, n int) []string {
	t.Helper()
	ports := FreePorts(t, 2*n)
	routes := make([]string, n)
	for i := range n {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", ports[n+i])
	}
	confs := make([]string, n)
	for i := range n {
		confs[i] = filepath.Join(t.TempDir(), "server.conf")
		conf := fmt.Sprintf("server_name: n%d\nlisten: 127.0.0.1:%d\njetstream { store_dir: %q }\ncluster { name: test, listen: 127.0.0.1:%d, routes: [%s] }\n",
			i, ports[i], t.TempDir(), ports[n+i], strings.Join(routes, ", "))
		if err := os.WriteFile(confs[i], []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	urls := make([]string, n)
	servers := make([]*broker.Server, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			s, err := broker.Start(context.Background(), confs[i], nil)
			servers[i] = s
			errs <- err
		}()
	}
	var failed error
	for range n {
		if err := <-errs; err != nil {
			failed = err
		}
	}
	for i, s := range servers {
		if s == nil {
			continue
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = s.Shutdown(ctx) // the test is over
		})
		urls[i] = s.ClientURL()
	}
	if failed != nil {
		t.Fatalf("start a cluster node: %v", failed)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range servers {
		for st := s.Cluster(); st.MetaLeader == "" || st.Size != n; st = s.Cluster() {
			if time.Now().After(deadline) {
				t.Fatalf("the cluster did not form: %+v", st)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// A leader elected is not yet every peer placeable: a stream of n replicas is created (and
	// deleted) once the meta layer sees them all online.
	js := JetStreamAt(t, urls[0])
	probe := jetstream.StreamConfig{Name: "BROKERTEST_READY", Subjects: []string{"brokertest.ready"}, Replicas: n, Storage: jetstream.MemoryStorage}
	for {
		_, err := js.CreateStream(t.Context(), probe)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster cannot place a stream on its %d nodes: %v", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := js.DeleteStream(t.Context(), probe.Name); err != nil {
		t.Fatal(err)
	}
	return urls
}
