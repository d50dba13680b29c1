package broker_test

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/gocotal/cotal/internal/broker"
)

// TestMonitorPort: with a monitor port the broker serves its own monitoring endpoints on
// loopback, and a port out of range or equal to the client port is refused.
func TestMonitorPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	conf, err := broker.RenderOpen(broker.Config{StoreDir: t.TempDir(), MonitorPort: port})
	if err != nil || !strings.Contains(string(conf), `http: "127.0.0.1:`+strconv.Itoa(port)+`"`) {
		t.Fatalf("RenderOpen = %s, %v", conf, err)
	}
	startFrom(t, conf)
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/varz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var varz struct {
		ServerName string `json:"server_name"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&varz); err != nil || resp.StatusCode != http.StatusOK || varz.ServerName != "cotal" {
		t.Fatalf("/varz: HTTP %d, %+v, %v", resp.StatusCode, varz, err)
	}
	for _, c := range []broker.Config{{StoreDir: "/x", MonitorPort: 70000}, {StoreDir: "/x", Port: 4222, MonitorPort: 4222}, {StoreDir: "/x", MonitorPort: -1}} {
		if _, err := broker.RenderOpen(c); err == nil || !strings.Contains(err.Error(), "monitor port") {
			t.Errorf("monitor port %d with client port %d: %v", c.MonitorPort, c.Port, err)
		}
	}
}
