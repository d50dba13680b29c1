package brokertest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"testing"
)

// ephemeralStart is where the kernel's ephemeral ports start unless
// /proc/sys/net/ipv4/ip_local_port_range says otherwise.
const ephemeralStart = 32768

// lowestPort is the lowest port FreePorts picks.
const lowestPort = 10000

// FreePorts returns n distinct loopback ports free now, picked below the kernel's ephemeral
// range: a port the kernel handed out (listen on :0) and let go can be taken again at once as the
// local port of any outgoing connection, which tests running in parallel make by the thousand,
// before the server meant to listen on it binds it. A port picked outside that range is taken
// only by another listener.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	top := ephemeralStart
	if raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var lo, hi int
		if _, err := fmt.Sscan(string(raw), &lo, &hi); err == nil && lo > lowestPort+n {
			top = lo
		}
	}
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			t.Fatalf("no %d free ports below %d", n, top)
		}
		p := lowestPort + rand.IntN(top-lowestPort)
		if slices.Contains(ports, p) {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		l.Close()
		ports = append(ports, p)
	}
	return ports
}
