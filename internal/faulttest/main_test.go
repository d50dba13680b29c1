package faulttest

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gocotal/cotal"
)

// cotalBin is the cotal binary TestMain builds for the suite.
var cotalBin string

// envChild makes the test binary run as one of the suite's child processes instead of the tests
// (see runChild).
const envChild = "COTAL_FAULTTEST_CHILD"

// TestMain builds the cotal binary once, or runs as a child process when envChild says so.
func TestMain(m *testing.M) {
	if role := os.Getenv(envChild); role != "" {
		os.Exit(runChild(role))
	}
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // every test skips: no binary to build
	}
	dir, err := os.MkdirTemp("", "cotal-faulttest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faulttest:", err)
		os.Exit(1)
	}
	cotalBin = filepath.Join(dir, "cotal")
	build := exec.Command("go", "build", "-o", cotalBin, "github.com/gocotal/cotal/cmd/cotal")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "faulttest: build the cotal binary:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// The child roles.
const (
	// childBlockingAgent connects as the credential in $COTAL_FAULTTEST_CREDS to
	// $COTAL_FAULTTEST_URL with a handler that prints the first delivery and then never returns:
	// every delivery it is handed stays unacknowledged until the process dies.
	childBlockingAgent = "blocking-agent"
)

// childLine is one line a child prints on stdout.
type childLine struct {
	Event string `json:"event"` // "ready" or "delivery"
	ID    string `json:"id,omitempty"`
	Kind  string `json:"kind,omitempty"`
}

// runChild runs the child role and returns its exit code; a blocking agent only ends when it is
// killed.
func runChild(role string) int {
	switch role {
	case childBlockingAgent:
		creds, err := os.ReadFile(os.Getenv("COTAL_FAULTTEST_CREDS"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		var mu sync.Mutex // the handler may run while Connect is still under way
		enc := json.NewEncoder(os.Stdout)
		say := func(l childLine) {
			mu.Lock()
			defer mu.Unlock()
			_ = enc.Encode(l)
		}
		block := make(chan struct{})
		handler := func(_ context.Context, d *cotal.Delivery) error {
			say(childLine{Event: "delivery", ID: d.Message.ID, Kind: string(d.Kind)})
			<-block // never closed: the delivery is never acknowledged
			return nil
		}
		ctx := context.Background()
		if _, err := cotal.Connect(ctx, os.Getenv("COTAL_FAULTTEST_URL"), cotal.WithCredsData(creds), cotal.WithHandler(handler)); err != nil {
			fmt.Fprintln(os.Stderr, "connect:", err)
			return 1
		}
		say(childLine{Event: "ready"})
		<-block
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown child role", role)
	return 2
}
