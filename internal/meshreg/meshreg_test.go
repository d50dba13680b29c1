package meshreg

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRegistry(t *testing.T) {
	home := t.TempDir()
	t.Setenv(EnvHome, filepath.Join(home, "cotal"))
	r, err := Load()
	if err != nil || len(r.Meshes) != 0 || r.Current != "" {
		t.Fatalf("a missing registry: %+v, %v", r, err)
	}
	dir := filepath.Join(home, "p", ".cotal")
	remote := Entry{Server: "tls://mesh.example.com:4222", Creds: "/etc/cotal/alice.creds", Space: "main"}
	if err := Update(func(r *Registry) error {
		return errors.Join(r.Add("m1", Entry{Dir: dir}, false), r.Add("m2", remote, false), r.Use("m1"))
	}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(home, "cotal", "meshes.json")
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the registry file: %v, %v; want mode 0600", fi, err)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the home: %v, %v; want mode 0700", fi, err)
	}
	r, err = Load()
	if err != nil || r.Current != "m1" || r.Meshes["m1"].Dir != dir || r.Meshes["m2"] != remote || !r.Meshes["m2"].Remote() {
		t.Fatalf("read back: %+v, %v", r, err)
	}

	// Refusals change nothing.
	before, _ := os.ReadFile(path)
	for _, tt := range []struct {
		change func(r *Registry) error
		want   error
		text   string
	}{
		{func(r *Registry) error { return r.Add("m1", Entry{Dir: dir}, false) }, ErrExists, "--force"},
		{func(r *Registry) error { return r.Use("m3") }, ErrUnknown, "registered: m1, m2"},
		{func(r *Registry) error { return r.Remove("m3") }, ErrUnknown, `"m3"`},
		{func(r *Registry) error { return r.Add("Bad", Entry{Dir: dir}, false) }, nil, "[a-z0-9_-]"},
		{func(r *Registry) error { return r.Add("-x", Entry{Dir: dir}, false) }, nil, "starting with"},
		{func(r *Registry) error { return r.Add("m4", Entry{Dir: "rel/.cotal"}, false) }, nil, "not absolute"},
		{func(r *Registry) error {
			return r.Add("m4", Entry{Server: "http://x:4222", Creds: "/a.creds", Space: "main"}, false)
		}, nil, "nats://"},
		{func(r *Registry) error { return r.Add("m4", Entry{Server: "nats://x:4222"}, false) }, nil, "credential file"},
		{func(r *Registry) error { return r.Add("m4", Entry{Dir: dir, Server: "nats://x:4222"}, false) }, nil, "both"},
		{func(r *Registry) error {
			return r.Add("m4", Entry{Server: "nats://x:4222", Creds: "/a.creds", Space: "no spaces"}, false)
		}, nil, "space"},
	} {
		err := Update(tt.change)
		if err == nil || tt.want != nil && !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.text) {
			t.Errorf("got %v, want %v mentioning %q", err, tt.want, tt.text)
		}
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("a refused change rewrote the registry:\n%s\nwas\n%s", after, before)
	}

	if err := Update(func(r *Registry) error { return r.Remove("m1") }); err != nil {
		t.Fatal(err)
	}
	if r, err = Load(); err != nil || r.Current != "" || len(r.Meshes) != 1 {
		t.Fatalf("after removing the current mesh: %+v, %v", r, err)
	}
}

// TestBrokenRegistry: a registry file that does not parse, or names what it must not, is
// reported with its path and never overwritten.
func TestBrokenRegistry(t *testing.T) {
	home := t.TempDir()
	t.Setenv(EnvHome, home)
	path := filepath.Join(home, "meshes.json")
	for body, want := range map[string]string{
		`{"v":1,"meshes":`:                           "does not parse",
		`{"v":2,"meshes":{}}`:                        "version 2",
		`{"v":1,"current":"x","meshes":{}}`:          `current mesh "x" is not registered`,
		`{"v":1,"meshes":{"m":{"dir":"relative"}}}`:  "not absolute",
		`{"v":1,"meshes":{"M":{"dir":"/a/.cotal"}}}`: "mesh name",
	} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load()
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want an error naming %s and %q", body, err, path, want)
		}
		if err := Update(func(r *Registry) error { return r.Add("n", Entry{Dir: "/n/.cotal"}, false) }); err == nil {
			t.Errorf("%s: an update went through", body)
		}
		if got, _ := os.ReadFile(path); string(got) != body {
			t.Errorf("%s: overwritten with %s", body, got)
		}
	}
}
