package mesh_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// TestLongSpaceNameRefusedUpFront: a space whose name puts the manager's serving credential over
// the JWT size gate is refused before anything is written, with the longest name that fits; a
// space of that length runs the whole mesh, its manager, delivery daemon and warden included.
func TestLongSpaceNameRefusedUpFront(t *testing.T) {
	dir := mesh.Dir{Path: filepath.Join(t.TempDir(), mesh.DirName)}
	long := wire.Space(strings.Repeat("t", 40))
	_, err := mesh.Up(t.Context(), dir, mesh.Options{Port: -1, Spaces: []wire.Space{long}})
	if err == nil || !strings.Contains(err.Error(), "too long") {
		t.Fatalf("up with a space of 40 characters: %v", err)
	}
	if _, serr := os.Stat(dir.Path); !os.IsNotExist(serr) {
		t.Errorf("a refused up wrote %s (%v)", dir.Path, serr)
	}
	m := regexp.MustCompile(`at most (\d+) characters`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("the refusal names no length that fits: %v", err)
	}
	n, _ := strconv.Atoi(m[1])
	if n < len(mesh.DefaultSpace) || n >= len(long) {
		t.Fatalf("the longest name that fits is %d characters", n)
	}
	// Start fails the test unless every daemon's credential was minted and its daemon started.
	meshtest.Start(t, meshtest.WithDaemons(), meshtest.WithSpaces(wire.Space(strings.Repeat("t", n))))
}
