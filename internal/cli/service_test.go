package cli

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gocotal/cotal/internal/cli/exit"
)

// TestServiceInstall: --dry-run prints a unit whose ExecStart runs this binary's `up` for this
// mesh directory and changes nothing; install writes the unit and starts it through systemctl,
// status asks it, uninstall stops and removes it; a unit the command did not write is never
// replaced or removed, and with no systemctl nothing is written.
func TestServiceInstall(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the systemd unit is Linux's")
	}
	dir := t.TempDir()
	config := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", config)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, "service", "install", "--dry-run", "--dir", dir, "--", "--space", "team")
	want := `ExecStart="` + self + `" "up" "--dir" "` + filepath.Join(dir, ".cotal") + `" "--space" "team"`
	if code != exit.OK || !strings.Contains(out, want) || !strings.Contains(stderr, "would run: systemctl --user enable --now cotal-mesh-") {
		t.Fatalf("install --dry-run: exit %d\n%s\n%s\nwant %s", code, out, stderr, want)
	}
	units := filepath.Join(config, "systemd", "user")
	if _, err := os.Stat(units); !os.IsNotExist(err) {
		t.Fatalf("--dry-run wrote %s: %v", units, err)
	}
	for _, args := range [][]string{{"install", "extra"}, {"install", "--", "--detach"}, {"install", "--", "--dir=/else"}} {
		if code, _, _ := run(t, append(append([]string{"service"}, args...), "--dir", dir)...); code != exit.Usage {
			t.Errorf("service %v: exit %d, want a usage error", args, code)
		}
	}

	// No systemctl: refused, nothing written.
	t.Setenv("PATH", t.TempDir())
	if code, _, stderr := run(t, "service", "install", "--dir", dir); code == exit.OK || !strings.Contains(stderr, "systemctl is not on PATH") {
		t.Fatalf("install without systemctl: exit %d, %s", code, stderr)
	}
	if _, err := os.Stat(units); !os.IsNotExist(err) {
		t.Fatalf("an install that could not start wrote %s", units)
	}

	// A systemctl that records what it is asked.
	bin, calls := t.TempDir(), filepath.Join(t.TempDir(), "calls")
	stub := "#!/bin/sh\necho \"$@\" >> " + calls + "\n"
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	if code, out, stderr := run(t, "service", "install", "--dir", dir); code != exit.OK || !strings.Contains(out, "installed and started") {
		t.Fatalf("install: exit %d, %s %s", code, out, stderr)
	}
	entries, err := os.ReadDir(units)
	if err != nil || len(entries) != 1 || !strings.HasPrefix(entries[0].Name(), "cotal-mesh-") {
		t.Fatalf("the unit directory holds %v, %v", entries, err)
	}
	unit := filepath.Join(units, entries[0].Name())
	if b, _ := os.ReadFile(unit); !strings.Contains(string(b), "installed by `cotal service install`") {
		t.Fatalf("the unit: %s", b)
	}
	if code, out, _ := run(t, "service", "status", "--dir", dir); code != exit.OK || !strings.Contains(out, "running") {
		t.Fatalf("status: exit %d, %s", code, out)
	}
	if code, out, stderr := run(t, "service", "uninstall", "--dir", dir); code != exit.OK || !strings.Contains(out, "stopped and removed") {
		t.Fatalf("uninstall: exit %d, %s %s", code, out, stderr)
	}
	if _, err := os.Stat(unit); !os.IsNotExist(err) {
		t.Fatalf("the unit is still there after uninstall: %v", err)
	}
	b, _ := os.ReadFile(calls)
	name := entries[0].Name()
	wantCalls := "--user daemon-reload\n--user enable --now " + name + "\n--user is-active " + name + "\n--user disable --now " + name + "\n--user daemon-reload\n"
	if string(b) != wantCalls {
		t.Fatalf("systemctl was asked\n%s\nwant\n%s", b, wantCalls)
	}

	// A unit of the same name the operator wrote is neither replaced nor removed.
	if err := os.WriteFile(unit, []byte("[Unit]\nDescription=mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"install", "uninstall"} {
		if code, _, stderr := run(t, "service", verb, "--dir", dir); code != exit.Usage || !strings.Contains(stderr, "not written by cotal service install") {
			t.Errorf("%s over the operator's unit: exit %d, %s", verb, code, stderr)
		}
	}
	if b, _ := os.ReadFile(unit); string(b) != "[Unit]\nDescription=mine\n" {
		t.Fatalf("the operator's unit was changed: %s", b)
	}
}
