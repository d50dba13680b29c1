package mesh

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
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
