package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/meshes"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshreg"
)

// TestMeshRegistry: from a directory with no .cotal, a mesh registered by its directory and made
// current is the one status and send reach; one registered by its server and a credential file
// is reached as that credential, and a command that must issue credentials says it needs the
// directory.
func TestMeshRegistry(t *testing.T) {
	dir := upMesh(t)
	t.Setenv(meshreg.EnvHome, t.TempDir())
	t.Setenv(mesh.EnvDir, "")
	t.Setenv(meshreg.EnvMesh, "")
	t.Chdir(t.TempDir())

	if code, _, _ := run(t, "status"); code == exit.OK {
		t.Fatal("status found a mesh before any was registered")
	}
	for _, args := range [][]string{{"meshes", "add", "m1", "--dir", dir}, {"use", "m1"}} {
		if code, _, stderr := run(t, args...); code != exit.OK {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
	}
	code, out, stderr := run(t, "meshes", "--json")
	var rows []meshes.Row
	if code != exit.OK || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || !rows[0].Current || rows[0].Dir != filepath.Join(dir, mesh.DirName) {
		t.Fatalf("meshes --json: exit %d, %s %s", code, out, stderr)
	}
	st, err := mesh.Dir{Path: filepath.Join(dir, mesh.DirName)}.ReadState()
	if err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := run(t, "status"); code != exit.OK || !strings.Contains(out, st.URL) {
		t.Fatalf("status through the current mesh: exit %d, %s %s", code, out, stderr)
	}
	if code, out, stderr := run(t, "send", "msg", "general", "hi"); code != exit.OK || !strings.Contains(out, "stored seq") {
		t.Fatalf("send through the current mesh: exit %d, %s %s", code, out, stderr)
	}

	// By its server and a credential file.
	creds := filepath.Join(t.TempDir(), "alice.creds")
	if code, _, stderr := run(t, "mint", "alice", "--subscribe", "general", "--out", creds); code != exit.OK {
		t.Fatalf("mint: exit %d: %s", code, stderr)
	}
	if code, _, stderr := run(t, "meshes", "add", "m2", "--server", st.URL, "--creds", creds); code != exit.OK {
		t.Fatalf("meshes add --server: exit %d: %s", code, stderr)
	}
	t.Setenv(meshreg.EnvMesh, "m2")
	if code, out, stderr := run(t, "status"); code != exit.OK || !strings.Contains(out, "local.alice") {
		t.Errorf("status of a mesh registered by its server: exit %d, %s %s", code, out, stderr)
	}
	if code, out, stderr := run(t, "send", "msg", "general", "from alice"); code != exit.OK || !strings.Contains(out, "stored seq") {
		t.Errorf("send as the registered credential: exit %d, %s %s", code, out, stderr)
	}
	if code, _, stderr := run(t, "creds", "list"); code == exit.OK || !strings.Contains(stderr, "needs the mesh's keys") {
		t.Errorf("creds list on a mesh registered by its server: exit %d, %s", code, stderr)
	}
	t.Setenv(meshreg.EnvMesh, "")

	// Bad input names the problem and changes nothing.
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"meshes", "add", "m1", "--dir", dir}, "already registered"},
		{[]string{"meshes", "add", "Bad", "--dir", dir}, "mesh name"},
		{[]string{"meshes", "add", "m3", "--dir", t.TempDir()}, "no mesh directory"},
		{[]string{"meshes", "add", "m3", "--server", "http://x:1", "--creds", creds}, "--server"},
		{[]string{"meshes", "add", "m3", "--server", st.URL, "--creds", filepath.Join(dir, "missing.creds")}, "--creds"},
		{[]string{"meshes", "add", "m3", "--server", st.URL}, "--creds"},
		{[]string{"meshes", "add", "m3", "--dir", dir, "--server", st.URL}, "not both"},
		{[]string{"use", "m9"}, "registered: m1, m2"},
		{[]string{"meshes", "rm", "m9"}, "not registered"},
	} {
		if code, _, stderr := run(t, tt.args...); code != exit.Usage || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, %q; want a usage error mentioning %q", tt.args, code, stderr, tt.want)
		}
	}
	if code, _, stderr := run(t, "meshes", "rm", "m1"); code != exit.OK {
		t.Fatalf("meshes rm: exit %d: %s", code, stderr)
	}
	if code, out, _ := run(t, "meshes"); code != exit.OK || strings.Contains(out, "m1") || strings.Contains(out, "*") {
		t.Errorf("after rm of the current mesh: exit %d, %s", code, out)
	}
}
