package runhost_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/runhost"
	"github.com/gocotal/cotal/wire"
)

// BenchmarkSequentialSleeps: a hosted run of 1,000 sequential sleep("1ms") steps, each written
// pending and settled to the run's journal on the mesh before the run goes on.
func BenchmarkSequentialSleeps(b *testing.B) {
	m := meshtest.Start(b)
	h := host(b, m, wire.NewLifecycleUID(), b.TempDir())
	src := `for (const i of range(1000)) { await sleep("1ms", { name: "tick" }) }`
	for b.Loop() {
		id, err := h.Start(b.Context(), src, operatorAdmit)
		if err != nil {
			b.Fatal(err)
		}
		st, err := h.Wait(b.Context(), id)
		if err != nil || st.State != meshwire.RunCompleted {
			b.Fatalf("%+v %v", st, err)
		}
	}
}

// BenchmarkResume10k: a new host takes back a run whose journal holds 10,000 steps (9,999 sleeps
// settled, 20,000 step records in all; the run's effect ceiling is 10,000) and reaches its first
// live step, the checkpoint after them.
func BenchmarkResume10k(b *testing.B) {
	m := meshtest.Start(b)
	dir := b.TempDir()
	first := host(b, m, wire.NewLifecycleUID(), dir)
	src := fmt.Sprintf(`for (const i of range(%d)) { await sleep("1ms", { name: "tick" }) }
await checkpoint("end", "Done?")`, 9_999)
	id, err := first.Start(b.Context(), src, operatorAdmit)
	if err != nil {
		b.Fatal(err)
	}
	waitOpen(b, first, id, 5*time.Minute)
	first.Close()
	for b.Loop() {
		h := host(b, m, wire.NewLifecycleUID(), dir)
		if err := h.Resume(b.Context(), id, ""); err != nil {
			b.Fatal(err)
		}
		waitOpen(b, h, id, time.Minute)
		h.Close()
	}
}

// waitOpen waits until run id waits on a checkpoint.
func waitOpen(b *testing.B, h *runhost.Host, id string, within time.Duration) {
	b.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		st, ok := h.Status(id)
		if ok && len(st.Open) > 0 {
			return
		}
		if ok && st.State != meshwire.RunRunning {
			b.Fatalf("run %s ended %+v", id, st)
		}
		time.Sleep(time.Millisecond)
	}
	b.Fatalf("run %s did not reach its checkpoint", id)
}
