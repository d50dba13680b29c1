// Package meshreg is the machine's registry of meshes: names for the meshes a person works with,
// each reached through its directory or through a server and a credential file, and the current
// one, which a command in a directory without a .cotal of its own acts on. It lives in
// $COTAL_HOME/meshes.json (~/.cotal by default), written atomically, 0600, under a lock.
package meshreg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/wire"
)

// EnvHome names the environment variable that moves the machine's Cotal home from ~/.cotal.
const EnvHome = "COTAL_HOME"

// EnvMesh names the environment variable that picks a registered mesh by name, ahead of the
// nearest .cotal and the current mesh (mesh.FindDir applies the order).
const EnvMesh = "COTAL_MESH"

// fileName is the registry's file in the home.
const fileName = "meshes.json"

// version is the registry file's format.
const version = 1

// Entry is one registered mesh: either its directory, or a server and the credential file a
// command connects to it with.
type Entry struct {
	// Dir is the mesh directory (the .cotal directory itself), absolute.
	Dir string `json:"dir,omitempty"`
	// Server is the broker's URL; Creds the absolute path of the credential file; Space the
	// space the credential acts in.
	Server string `json:"server,omitempty"`
	Creds  string `json:"creds,omitempty"`
	Space  string `json:"space,omitempty"`
}

// Remote reports whether e is reached through a server and a credential rather than a directory.
func (e Entry) Remote() bool { return e.Server != "" }

// check reports what is wrong with e.
func (e Entry) check() error {
	switch {
	case e.Dir != "" && (e.Server != "" || e.Creds != "" || e.Space != ""):
		return errors.New("it has both a directory and a server")
	case e.Dir != "":
		if !filepath.IsAbs(e.Dir) {
			return fmt.Errorf("its directory %q is not absolute", e.Dir)
		}
		return nil
	case e.Server == "" || e.Creds == "" || e.Space == "":
		return errors.New("it needs a directory, or a server, a credential file and its space")
	case !filepath.IsAbs(e.Creds):
		return fmt.Errorf("its credential file %q is not absolute", e.Creds)
	}
	if _, err := wire.ParseSpace(e.Space); err != nil {
		return err
	}
	return CheckServer(e.Server)
}

// CheckServer checks that server is a broker URL a client connects to: nats:// or tls://, with a
// host.
func CheckServer(server string) error {
	u, err := url.Parse(server)
	if err != nil {
		return fmt.Errorf("server %q: %w", server, err)
	}
	switch u.Scheme {
	case "nats", "tls":
	default:
		return fmt.Errorf("server %q: want a nats:// or tls:// URL", server)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("server %q: no host", server)
	}
	return nil
}

// maxName bounds a mesh's name.
const maxName = 64

// CheckName checks a mesh's name: 1 to 64 characters of [a-z0-9_-], starting with a letter or
// a digit.
func CheckName(name string) error {
	if name == "" || len(name) > maxName {
		return fmt.Errorf("mesh name %q: must be 1 to %d characters", name, maxName)
	}
	for i, c := range name {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || i > 0 && (c == '_' || c == '-')) {
			return fmt.Errorf("mesh name %q: must be characters of [a-z0-9_-], starting with a letter or a digit", name)
		}
	}
	return nil
}

// Registry is the registry as its file holds it.
type Registry struct {
	V       int              `json:"v"`
	Current string           `json:"current,omitempty"`
	Meshes  map[string]Entry `json:"meshes"`
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.Meshes))
	for n := range r.Meshes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Lookup returns the mesh registered as name.
func (r *Registry) Lookup(name string) (Entry, error) {
	e, ok := r.Meshes[name]
	if !ok {
		known := "none is registered (`cotal meshes add`)"
		if len(r.Meshes) > 0 {
			known = "registered: " + strings.Join(r.Names(), ", ")
		}
		return Entry{}, fmt.Errorf("mesh %q is %w (%s)", name, ErrUnknown, known)
	}
	return e, nil
}

// Home returns the machine's Cotal home: $COTAL_HOME, or ~/.cotal.
func Home() (string, error) {
	if h := os.Getenv(EnvHome); h != "" {
		return filepath.Abs(h)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the Cotal home (set %s): %w", EnvHome, err)
	}
	return filepath.Join(home, ".cotal"), nil
}

// Path returns the registry file's path.
func Path() (string, error) {
	h, err := Home()
	if err != nil {
		return "", err
	}
	return filepath.Join(h, fileName), nil
}

// Load reads the registry; a missing file is an empty registry. A file that does not parse, or
// holds an entry that is not whole, is an error naming the file: it is never overwritten.
func Load() (*Registry, error) {
	path, err := Path()
	if err != nil {
		return nil, err
	}
	return load(path)
}

func load(path string) (*Registry, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Registry{V: version, Meshes: map[string]Entry{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the mesh registry: %w", err)
	}
	r := &Registry{}
	if err := json.Unmarshal(raw, r); err != nil {
		return nil, fmt.Errorf("the mesh registry %s does not parse (fix or remove it): %w", path, err)
	}
	if r.V != version {
		return nil, fmt.Errorf("the mesh registry %s is version %d; this cotal reads version %d", path, r.V, version)
	}
	if r.Meshes == nil {
		r.Meshes = map[string]Entry{}
	}
	for name, e := range r.Meshes {
		if err := CheckName(name); err != nil {
			return nil, fmt.Errorf("the mesh registry %s: %w", path, err)
		}
		if err := e.check(); err != nil {
			return nil, fmt.Errorf("the mesh registry %s: mesh %q: %v", path, name, err)
		}
	}
	if _, ok := r.Meshes[r.Current]; r.Current != "" && !ok {
		return nil, fmt.Errorf("the mesh registry %s: its current mesh %q is not registered", path, r.Current)
	}
	return r, nil
}

// lockWait bounds how long Update waits for another process's update.
const lockWait = 10 * time.Second

// Update applies change to the registry under the registry's lock and writes the result
// atomically (0600, in a 0700 home). Nothing is written when change fails.
func Update(change func(r *Registry) error) error {
	home, err := Home()
	if err != nil {
		return err
	}
	if err := atomicfile.MkdirPrivate(home); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), lockWait)
	defer cancel()
	path := filepath.Join(home, fileName)
	unlock, err := atomicfile.Lock(ctx, path+".lock")
	if err != nil {
		return err
	}
	defer unlock()
	r, err := load(path)
	if err != nil {
		return err
	}
	if err := change(r); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(raw, '\n'), 0o600)
}

// ErrUnknown is returned for a name not registered.
var ErrUnknown = errors.New("not registered")

// ErrExists is returned by Add for a name already registered.
var ErrExists = errors.New("already registered")

// Add registers e as name, replacing a mesh of that name only when replace is set.
func (r *Registry) Add(name string, e Entry, replace bool) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if err := e.check(); err != nil {
		return fmt.Errorf("mesh %q: %v", name, err)
	}
	if _, ok := r.Meshes[name]; ok && !replace {
		return fmt.Errorf("mesh %q: %w (--force replaces it)", name, ErrExists)
	}
	r.Meshes[name] = e
	return nil
}

// Remove forgets name; it stops being current if it was.
func (r *Registry) Remove(name string) error {
	if _, err := r.Lookup(name); err != nil {
		return err
	}
	delete(r.Meshes, name)
	if r.Current == name {
		r.Current = ""
	}
	return nil
}

// Use makes name the current mesh.
func (r *Registry) Use(name string) error {
	if _, err := r.Lookup(name); err != nil {
		return err
	}
	r.Current = name
	return nil
}
