package meshwire

import (
	"testing"

	"github.com/gocotal/cotal/wire"
)

const (
	testUID  wire.LifecycleUID = "abcdefghijklmnopqrstuvwxyz"
	testUID2 wire.LifecycleUID = "zyxwvutsrqponmlkjihgfedcba23"
)

func testCaller(t *testing.T) wire.Lifecycle {
	t.Helper()
	p, err := wire.NewPrincipal("local", "alice")
	if err != nil {
		t.Fatal(err)
	}
	return wire.Lifecycle{Principal: p, UID: testUID}
}
