package mesh_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
)

// TestStartPartAgain: a part `cotal down PART` stopped is started again through the control
// socket, as the mesh first ran it, and serves; stops and starts asked at once leave each part
// in one state or the other, and the mesh still stops cleanly. A mesh started without its
// manager refuses to start one.
func TestStartPartAgain(t *testing.T) {
	m := meshtest.Start(t, meshtest.WithDaemons())
	ctx := t.Context()
	state := func(name string) string {
		t.Helper()
		parts, err := mesh.RunningParts(ctx, m.Dir)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(parts, func(p mesh.PartState) bool { return p.Name == name })
		if i < 0 {
			t.Fatalf("no part %s in %+v", name, parts)
		}
		return parts[i].State
	}
	parts := []mesh.Part{mesh.PartDelivery, mesh.PartManager}
	for _, p := range parts {
		if _, err := mesh.StopPart(ctx, m.Dir, p); err != nil {
			t.Fatal(err)
		}
		if got := state(string(p)); got != mesh.PartStopped {
			t.Fatalf("%s after stop: %s", p, got)
		}
	}
	for _, p := range parts {
		if _, err := mesh.StartPart(ctx, m.Dir, p); err != nil {
			t.Fatalf("start the %s again: %v", p, err)
		}
		meshtest.Eventually(t, 30*time.Second, string(p)+" serving again", func() bool { return state(string(p)) == mesh.PartServing })
	}
	if _, err := mesh.StartPart(ctx, m.Dir, "nats"); err == nil || !strings.Contains(err.Error(), "no part") {
		t.Errorf("start a part there is not: %v", err)
	}

	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			p := parts[i%2]
			var err error
			if i%4 < 2 {
				_, err = mesh.StopPart(ctx, m.Dir, p)
			} else {
				_, err = mesh.StartPart(ctx, m.Dir, p)
			}
			if err != nil {
				t.Errorf("%d: %v", i, err)
			}
		})
	}
	wg.Wait()
	for _, p := range parts {
		if got := state(string(p)); got != mesh.PartStopped && got != mesh.PartServing && got != mesh.PartStandingBy {
			t.Errorf("%s after stops and starts at once: %s", p, got)
		}
	}

	bare := meshtest.Start(t, meshtest.WithDaemons(), func(o *mesh.Options) { o.NoManager = true })
	if _, err := mesh.StartPart(ctx, bare.Dir, mesh.PartManager); err == nil || !strings.Contains(err.Error(), "--no-manager") {
		t.Errorf("start a manager on a mesh started without one: %v", err)
	}
}
