// Package mesh runs a Cotal mesh on this machine from a project directory (.cotal): it lays out
// the directory, renders the broker configuration from the project's keys, starts the embedded
// broker, provisions the spaces, mints credentials, and records the running mesh so that other
// commands find it. The cotal CLI and the test harness both drive a mesh through this package.
package mesh

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/meshreg"
	"github.com/gocotal/cotal/wire"
)

// DirName is the name of a project's mesh directory.
const DirName = ".cotal"

// EnvDir names the environment variable that overrides where the mesh directory is.
const EnvDir = "COTAL_DIR"

// Dir is a project's mesh directory. Its zero value is not usable.
type Dir struct {
	Path string
}

// FindDir locates the mesh directory a command acts on, in this order: explicit (a --dir flag),
// $COTAL_DIR, the mesh $COTAL_MESH names in the machine's registry (meshreg), the first .cotal
// found walking up from start, the registry's current mesh, else start/.cotal. An explicit or
// environment path may name either the .cotal directory itself or the project that holds it. A
// registered mesh reached through a server and a credential rather than a directory is a
// *RemoteMeshError.
func FindDir(explicit, start string) (Dir, error) {
	if d, ok, err := givenDir(explicit); ok || err != nil {
		return d, err
	}
	if name := os.Getenv(meshreg.EnvMesh); name != "" {
		d, err := registered(name)
		if err != nil {
			err = fmt.Errorf("$%s: %w", meshreg.EnvMesh, err)
		}
		return d, err
	}
	if d, ok, err := nearest(start); ok || err != nil {
		return d, err
	}
	if d, err := registered(""); err != nil || d.Path != "" {
		return d, err
	}
	return fallback(start)
}

// ProjectDir locates the directory `cotal up` starts a mesh in: explicit, $COTAL_DIR, the first
// .cotal found walking up from start, else start/.cotal. The registry plays no part: a new
// project's mesh starts in the project.
func ProjectDir(explicit, start string) (Dir, error) {
	if d, ok, err := givenDir(explicit); ok || err != nil {
		return d, err
	}
	if d, ok, err := nearest(start); ok || err != nil {
		return d, err
	}
	return fallback(start)
}

// givenDir is the directory explicit or else $COTAL_DIR names, if either does.
func givenDir(explicit string) (Dir, bool, error) {
	for _, p := range []string{explicit, os.Getenv(EnvDir)} {
		if p == "" {
			continue
		}
		d, err := dirAt(p)
		return d, true, err
	}
	return Dir{}, false, nil
}

// dirAt is the mesh directory path names: the .cotal directory itself, or the project holding it.
func dirAt(p string) (Dir, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return Dir{}, fmt.Errorf("mesh directory %s: %w", p, err)
	}
	if filepath.Base(abs) != DirName {
		abs = filepath.Join(abs, DirName)
	}
	return Dir{Path: abs}, nil
}

// nearest is the first .cotal found walking up from start, if any. The machine's Cotal home
// (~/.cotal, where the registry lives) is passed over unless a mesh was started in it.
func nearest(start string) (Dir, bool, error) {
	abs, err := filepath.Abs(start)
	if err != nil {
		return Dir{}, false, fmt.Errorf("mesh directory from %s: %w", start, err)
	}
	home, _ := meshreg.Home() // no home: nothing to pass over
	for d := abs; ; d = filepath.Dir(d) {
		p := filepath.Join(d, DirName)
		fi, err := os.Stat(p)
		if err == nil && fi.IsDir() && (p != home || holdsMesh(p)) {
			return Dir{Path: p}, true, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return Dir{}, false, fmt.Errorf("look for %s in %s: %w", DirName, d, err)
		}
		if filepath.Dir(d) == d {
			return Dir{}, false, nil
		}
	}
}

// holdsMesh reports whether the directory p holds a mesh: its keys or its store.
func holdsMesh(p string) bool {
	for _, sub := range []string{"auth", "jetstream"} {
		if fi, err := os.Stat(filepath.Join(p, sub)); err == nil && fi.IsDir() {
			return true
		}
	}
	return false
}

// fallback is start/.cotal, which `cotal up` creates.
func fallback(start string) (Dir, error) {
	abs, err := filepath.Abs(start)
	if err != nil {
		return Dir{}, fmt.Errorf("mesh directory from %s: %w", start, err)
	}
	return Dir{Path: filepath.Join(abs, DirName)}, nil
}

// registered is the directory of the mesh registered as name, or of the current mesh when name
// is empty (a zero Dir when there is none).
func registered(name string) (Dir, error) {
	r, err := meshreg.Load()
	if err != nil {
		return Dir{}, err
	}
	if name == "" {
		if name = r.Current; name == "" {
			return Dir{}, nil
		}
	}
	e, err := r.Lookup(name)
	if err != nil {
		return Dir{}, err
	}
	if e.Remote() {
		return Dir{}, &RemoteMeshError{Name: name, Entry: e}
	}
	return Dir{Path: e.Dir}, nil
}

// RemoteMeshError is FindDir's answer when the mesh chosen is registered by a server and a
// credential file rather than a directory: Running reads it as a mesh reached remotely, and a
// command that needs the mesh's directory (its keys, its process) reports it.
type RemoteMeshError struct {
	Name  string
	Entry meshreg.Entry
}

func (e *RemoteMeshError) Error() string {
	return fmt.Sprintf("mesh %q is registered by its server %s and a credential file, not its directory: this command needs the mesh's directory (--dir, or `cotal meshes add %s --dir D --force`)", e.Name, e.Entry.Server, e.Name)
}

// AuthDir holds the broker's and the spaces' keys.
func (d Dir) AuthDir() string { return filepath.Join(d.Path, "auth") }

// ConfPath is the rendered nats-server configuration.
func (d Dir) ConfPath() string { return filepath.Join(d.Path, "server.conf") }

// StoreDir is the JetStream store.
func (d Dir) StoreDir() string { return filepath.Join(d.Path, "jetstream") }

// StatePath records the running mesh.
func (d Dir) StatePath() string { return filepath.Join(d.Path, "mesh.json") }

// LocksDir returns the directory of the locks of the agents run by name on this machine, one
// process per identity (package agentlock). It is not agents/, which holds the agent files.
func (d Dir) LocksDir() string { return filepath.Join(d.Path, "locks") }

// LogPath is where a detached mesh logs.
func (d Dir) LogPath() string { return filepath.Join(d.Path, "cotal.log") }

// CredsDir holds the creds files minted for a space.
func (d Dir) CredsDir(space wire.Space) string {
	return filepath.Join(d.Path, "creds", string(space))
}

// CredsPath is where `cotal mint NAME` writes NAME's creds by default.
func (d Dir) CredsPath(space wire.Space, name string) string {
	return filepath.Join(d.CredsDir(space), name+".creds")
}

// WriteCreds writes a creds file (0600, atomically), creating its directory with mode 0700 when it
// is inside d. A directory elsewhere must exist: a typo in --out should not create a tree.
func (d Dir) WriteCreds(path string, creds []byte) error {
	dir := filepath.Dir(path)
	if rel, err := filepath.Rel(d.Path, dir); err == nil && filepath.IsLocal(rel) {
		if err := atomicfile.MkdirPrivate(dir); err != nil {
			return err
		}
	}
	return atomicfile.Write(path, creds, 0o600)
}
