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

// FindDir locates the mesh directory: explicit (a --dir flag) if set, else $COTAL_DIR, else the
// first .cotal found walking up from start, else start/.cotal (which Up creates). An explicit or
// environment path may name either the .cotal directory itself or the project that holds it.
func FindDir(explicit, start string) (Dir, error) {
	for _, p := range []string{explicit, os.Getenv(EnvDir)} {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return Dir{}, fmt.Errorf("mesh directory %s: %w", p, err)
		}
		if filepath.Base(abs) != DirName {
			abs = filepath.Join(abs, DirName)
		}
		return Dir{Path: abs}, nil
	}
	abs, err := filepath.Abs(start)
	if err != nil {
		return Dir{}, fmt.Errorf("mesh directory from %s: %w", start, err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		fi, err := os.Stat(filepath.Join(d, DirName))
		if err == nil && fi.IsDir() {
			return Dir{Path: filepath.Join(d, DirName)}, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return Dir{}, fmt.Errorf("look for %s in %s: %w", DirName, d, err)
		}
		if filepath.Dir(d) == d {
			return Dir{Path: filepath.Join(abs, DirName)}, nil
		}
	}
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
