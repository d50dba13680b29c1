package clidoc_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/gocotal/cotal/internal/cli/clidoc"
)

// TestPagesAreCurrent: docs/cli holds exactly the pages the command tree renders; run
// `go generate ./...` after changing a command.
func TestPagesAreCurrent(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "docs", "cli")
	pages := clidoc.Pages()
	for name, want := range pages {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("docs/cli/%s is stale or missing: run go generate ./...", name)
		}
	}
	on, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range on {
		if _, ok := pages[filepath.Base(p)]; !ok {
			t.Errorf("docs/cli/%s documents no command: run go generate ./...", filepath.Base(p))
		}
	}
	if len(pages) < 20 {
		t.Errorf("only %d pages rendered", len(pages))
	}
}
