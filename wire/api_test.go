package wire_test

import (
	"flag"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateAPI = flag.Bool("update-api", false, "rewrite testdata/api.txt from the package's exported API")

// apiFile lists every identifier wire exports, one per line, as Go's own api/ files do: whatever
// wire exports is frozen once the module is tagged, so a change to it is made on purpose.
const apiFile = "testdata/api.txt"

// exportedAPI returns one line per exported constant, variable, function, type, method and struct
// field of the package in this directory.
func exportedAPI(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, p := range pkgs {
		for _, f := range p.Files {
			files = append(files, f)
		}
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check("github.com/gocotal/cotal/wire", fset, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	qual := types.RelativeTo(pkg)
	var out []string
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch o := obj.(type) {
		case *types.Const:
			out = append(out, "const "+name+" "+types.TypeString(o.Type(), qual))
		case *types.Var:
			out = append(out, "var "+name+" "+types.TypeString(o.Type(), qual))
		case *types.Func:
			out = append(out, "func "+name+strings.TrimPrefix(types.TypeString(o.Type(), qual), "func"))
		case *types.TypeName:
			out = append(out, typeLines(o, qual)...)
		}
	}
	slices.Sort(out)
	return out
}

// typeLines describes an exported type: its kind, its exported fields and its exported methods.
func typeLines(o *types.TypeName, qual types.Qualifier) []string {
	name := o.Name()
	under := o.Type().Underlying()
	var out []string
	if st, ok := under.(*types.Struct); ok {
		out = append(out, "type "+name+" struct")
		for i := range st.NumFields() {
			if f := st.Field(i); f.Exported() {
				out = append(out, "type "+name+" struct, "+f.Name()+" "+types.TypeString(f.Type(), qual))
			}
		}
	} else {
		out = append(out, "type "+name+" "+types.TypeString(under, qual))
	}
	for _, recv := range []types.Type{o.Type(), types.NewPointer(o.Type())} {
		ms := types.NewMethodSet(recv)
		for i := range ms.Len() {
			m := ms.At(i).Obj()
			if !m.Exported() || (recv != o.Type() && types.NewMethodSet(o.Type()).Lookup(m.Pkg(), m.Name()) != nil) {
				continue
			}
			if _, iface := under.(*types.Interface); iface && recv != o.Type() {
				continue
			}
			out = append(out, "method ("+types.TypeString(recv, qual)+") "+m.Name()+strings.TrimPrefix(types.TypeString(m.Type(), qual), "func"))
		}
	}
	return out
}

// TestAPI holds wire's exported API to testdata/api.txt. After a deliberate change, run
// `go test ./wire -run TestAPI -update-api` and review the file's diff.
func TestAPI(t *testing.T) {
	got := exportedAPI(t)
	body := strings.Join(got, "\n") + "\n"
	if *updateAPI {
		if err := os.WriteFile(apiFile, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	raw, err := os.ReadFile(filepath.FromSlash(apiFile))
	if err != nil {
		t.Fatalf("%v: run go test ./wire -run TestAPI -update-api", err)
	}
	want := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	for _, l := range got {
		if !slices.Contains(want, l) {
			t.Errorf("wire exports what %s does not list: %s", apiFile, l)
		}
	}
	for _, l := range want {
		if !slices.Contains(got, l) {
			t.Errorf("%s lists what wire no longer exports: %s", apiFile, l)
		}
	}
}

// maxIdentifiers bounds how many names wire exports, counting its constants, variables,
// functions, types and methods (struct fields are part of their type). It only comes down: a new
// name in the client contract is paid for by moving a server-side one to internal/meshwire.
const maxIdentifiers = 348

// TestAPIStaysSmall holds wire to the client contract's size.
func TestAPIStaysSmall(t *testing.T) {
	n := 0
	for _, l := range exportedAPI(t) {
		if kind, rest, _ := strings.Cut(l, " "); kind == "type" && strings.Contains(rest, " struct, ") {
			continue // a field
		}
		n++
	}
	if n > maxIdentifiers {
		t.Errorf("wire exports %d identifiers, over its bound of %d", n, maxIdentifiers)
	}
	t.Logf("wire exports %d identifiers", n)
}
