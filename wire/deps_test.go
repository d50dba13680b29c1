package wire

import (
	goparser "go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsOnlyStandardLibrary keeps wire pure (DESIGN.md): no package of ours, no NATS, no I/O
// library, so any Go program can import the contract alone. A standard-library import path has no
// dot in its first element.
func TestImportsOnlyStandardLibrary(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := goparser.ParseFile(fset, name, nil, goparser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(path, "/")
			if strings.Contains(first, ".") {
				t.Errorf("%s imports %s: wire may import only the standard library", name, path)
			}
			if path == "os" || path == "net" || strings.HasPrefix(path, "net/") {
				t.Errorf("%s imports %s: wire does no I/O", name, path)
			}
		}
	}
}
