package mesh

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocotal/cotal/internal/meshreg"
)

func TestFindDir(t *testing.T) {
	root := t.TempDir()
	project := filepath.Join(root, "project")
	deep := filepath.Join(project, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(project, DirName), 0o700); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(root, "elsewhere")
	if err := os.Mkdir(elsewhere, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvDir, "")
	t.Setenv(meshreg.EnvHome, t.TempDir()) // no registry
	t.Setenv(meshreg.EnvMesh, "")
	tests := []struct {
		name, explicit, env, start, want string
	}{
		{"walks up to the nearest .cotal", "", "", deep, filepath.Join(project, DirName)},
		{"at the project root", "", "", project, filepath.Join(project, DirName)},
		{"none found: here", "", "", elsewhere, filepath.Join(elsewhere, DirName)},
		{"explicit project", elsewhere, "", deep, filepath.Join(elsewhere, DirName)},
		{"explicit .cotal", filepath.Join(elsewhere, DirName), "", deep, filepath.Join(elsewhere, DirName)},
		{"environment", "", elsewhere, deep, filepath.Join(elsewhere, DirName)},
		{"explicit beats environment", project, elsewhere, deep, filepath.Join(project, DirName)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvDir, tt.env)
			d, err := FindDir(tt.explicit, tt.start)
			if err != nil || d.Path != tt.want {
				t.Errorf("FindDir = %q, %v; want %q", d.Path, err, tt.want)
			}
		})
	}
}

// TestFindDirFromTheRegistry: the order is --dir, $COTAL_DIR, $COTAL_MESH, the nearest .cotal,
// the registry's current mesh, and `cotal up`'s ProjectDir never reads the registry.
func TestFindDirFromTheRegistry(t *testing.T) {
	root := t.TempDir()
	project, elsewhere, registeredAt := filepath.Join(root, "project"), filepath.Join(root, "elsewhere"), filepath.Join(root, "reg", DirName)
	for _, p := range []string{filepath.Join(project, DirName), elsewhere, registeredAt} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(meshreg.EnvHome, filepath.Join(root, "home"))
	t.Setenv(EnvDir, "")
	t.Setenv(meshreg.EnvMesh, "")
	remote := meshreg.Entry{Server: "nats://mesh.example.com:4222", Creds: "/creds/alice.creds", Space: "team"}
	if err := meshreg.Update(func(r *meshreg.Registry) error {
		return errors.Join(r.Add("reg", meshreg.Entry{Dir: registeredAt}, false), r.Add("far", remote, false), r.Use("reg"))
	}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, explicit, envDir, envMesh, start, want string
	}{
		{"none found: the current mesh", "", "", "", elsewhere, registeredAt},
		{"the nearest .cotal beats the current mesh", "", "", "", project, filepath.Join(project, DirName)},
		{"$COTAL_MESH beats the nearest .cotal", "", "", "reg", project, registeredAt},
		{"$COTAL_DIR beats $COTAL_MESH", "", elsewhere, "reg", project, filepath.Join(elsewhere, DirName)},
		{"--dir beats them all", elsewhere, project, "reg", project, filepath.Join(elsewhere, DirName)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvDir, tt.envDir)
			t.Setenv(meshreg.EnvMesh, tt.envMesh)
			if d, err := FindDir(tt.explicit, tt.start); err != nil || d.Path != tt.want {
				t.Errorf("FindDir = %q, %v; want %q", d.Path, err, tt.want)
			}
		})
	}
	if d, err := ProjectDir("", elsewhere); err != nil || d.Path != filepath.Join(elsewhere, DirName) {
		t.Errorf("ProjectDir = %q, %v; want the directory here", d.Path, err)
	}

	t.Setenv(meshreg.EnvMesh, "far")
	_, err := FindDir("", project)
	if remote, ok := errors.AsType[*RemoteMeshError](err); !ok || remote.Name != "far" || remote.Entry.Server != "nats://mesh.example.com:4222" {
		t.Errorf("a mesh registered by its server: %v", err)
	}
	_, st, err := Running("")
	if err != nil || st.URL != "nats://mesh.example.com:4222" || st.Creds != "/creds/alice.creds" || st.Registered != "far" || len(st.Spaces) != 1 || st.Spaces[0] != "team" {
		t.Errorf("Running on a mesh registered by its server: %+v, %v", st, err)
	}
	t.Setenv(meshreg.EnvMesh, "nowhere")
	if _, err := FindDir("", project); !errors.Is(err, meshreg.ErrUnknown) || !strings.Contains(err.Error(), "$COTAL_MESH") {
		t.Errorf("$COTAL_MESH naming no mesh: %v", err)
	}
}

func TestStaleStateIsNotRunning(t *testing.T) {
	d := Dir{Path: t.TempDir()}
	if _, err := d.ReadState(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("no state: %v", err)
	}
	// A pid that cannot exist: beyond the kernel's pid limit.
	if err := d.writeState(&State{PID: 1 << 30, URL: "nats://127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadState(); !errors.Is(err, ErrNotRunning) {
		t.Errorf("a dead process's state: %v", err)
	}
	if _, err := os.Stat(d.StatePath()); !os.IsNotExist(err) {
		t.Error("the stale state was not removed")
	}
	if err := os.WriteFile(d.StatePath(), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadState(); err == nil || errors.Is(err, ErrNotRunning) {
		t.Errorf("a corrupt state must be reported: %v", err)
	}
}

// TestStateOfAnotherProcessIsNotRunning: a state file naming a live process that is not the mesh
// that wrote it (a pid reused after a crash) reads as no mesh running, and is removed.
func TestStateOfAnotherProcessIsNotRunning(t *testing.T) {
	if processStart(os.Getpid()) == "" {
		t.Skip("this kernel shows no process start times")
	}
	d := Dir{Path: t.TempDir()}
	self := State{PID: os.Getpid(), ProcessStart: processStart(os.Getpid()), URL: "nats://127.0.0.1:1"}
	if err := d.writeState(&self); err != nil {
		t.Fatal(err)
	}
	if st, err := d.ReadState(); err != nil || st.PID != self.PID {
		t.Fatalf("the state of this very process: %+v, %v", st, err)
	}
	for name, st := range map[string]State{
		"another start time":         {PID: os.Getpid(), ProcessStart: "1", URL: self.URL},
		"no start time, another exe": {PID: 1, URL: self.URL},
	} {
		if err := d.writeState(&st); err != nil {
			t.Fatal(err)
		}
		if _, err := d.ReadState(); !errors.Is(err, ErrNotRunning) {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := os.Stat(d.StatePath()); !os.IsNotExist(err) {
			t.Errorf("%s: the stale state was not removed", name)
		}
	}
}

func TestProcessStart(t *testing.T) {
	if _, err := os.Stat(procRoot); err != nil {
		t.Skip("no /proc")
	}
	a, b := processStart(os.Getpid()), processStart(os.Getpid())
	if a == "" || a != b {
		t.Fatalf("processStart = %q then %q", a, b)
	}
	if got := processStart(1 << 30); got != "" {
		t.Errorf("a pid that cannot exist started at %q", got)
	}
}

// TestTheCotalHomeIsNoProject: the machine's Cotal home, ~/.cotal, which holds the registry, is
// not taken for a project's mesh directory by a command run below it, unless a mesh was started
// in it.
func TestTheCotalHomeIsNoProject(t *testing.T) {
	user := t.TempDir()
	home := filepath.Join(user, DirName)
	registered := filepath.Join(user, "elsewhere", DirName)
	work := filepath.Join(user, "work")
	for _, p := range []string{registered, work} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(meshreg.EnvHome, home)
	t.Setenv(EnvDir, "")
	t.Setenv(meshreg.EnvMesh, "")
	if err := meshreg.Update(func(r *meshreg.Registry) error {
		return errors.Join(r.Add("m", meshreg.Entry{Dir: registered}, false), r.Use("m"))
	}); err != nil {
		t.Fatal(err)
	}
	if d, err := FindDir("", work); err != nil || d.Path != registered {
		t.Errorf("below the Cotal home: %q, %v; want the current mesh %s", d.Path, err, registered)
	}
	if d, err := ProjectDir("", work); err != nil || d.Path != filepath.Join(work, DirName) {
		t.Errorf("cotal up below the Cotal home: %q, %v; want the project's own", d.Path, err)
	}
	if err := os.Mkdir(filepath.Join(home, "auth"), 0o700); err != nil {
		t.Fatal(err)
	}
	if d, err := FindDir("", work); err != nil || d.Path != home {
		t.Errorf("a mesh started in the Cotal home: %q, %v; want it found", d.Path, err)
	}
}
