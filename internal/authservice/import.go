package authservice

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gocotal/cotal/internal/remotemgr"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/wire"
)

// Before the space's user-auth store, the people ledger and the registry of remote managers were
// files in the user-auth state directory: actors/ and managed-actors/ held one row each,
// <owner>.<actor>.json, and remote-managers/ one registration each, <instanceId>.json. OpenState
// imports them into the store once, then renames each directory <name>.imported, never read again.

// importedSuffix marks a directory of the file layout whose contents are in the store.
const importedSuffix = ".imported"

// registryDir is the file layout's directory of remote-manager registrations.
const registryDir = "remote-managers"

// fileRowDirs are the file layout's row directories, by kind.
var fileRowDirs = []struct {
	name string
	kind userauth.Kind
}{{"actors", userauth.KindInteractive}, {"managed-actors", userauth.KindManaged}}

// maxRecordFile bounds a file the import reads: no message the store takes is larger (a row's own
// bound is ParseRow's).
const maxRecordFile = 1 << 20

// importFiles imports the file layout in dir, if there is one, into people and reg. Every row and
// registration is read under the rules the files were read by, then written create-only: a key
// that holds the same already (an import cut short, or another process's) is no error, one that
// holds something else is, naming the key, and nothing further is written. Only once everything
// is in the store are the directories renamed, so an import that failed runs again whole at the
// next open.
func importFiles(ctx context.Context, dir string, people *userauth.People, reg *remotemgr.Registry) error {
	layout := []string{registryDir}
	for _, d := range fileRowDirs {
		layout = append(layout, d.name)
	}
	var found []string
	for _, name := range layout {
		fi, err := os.Lstat(filepath.Join(dir, name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return err
		case !fi.IsDir():
			return &userauth.FileError{Path: filepath.Join(dir, name), Err: errors.New("the file layout's directory is a symlink or a file")}
		}
		found = append(found, name)
	}
	if len(found) == 0 {
		return nil
	}
	rows, err := readFileRows(dir)
	if err != nil {
		return err
	}
	regs, err := readFileRegistrations(filepath.Join(dir, registryDir))
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := people.Import(ctx, r); err != nil {
			return err
		}
	}
	for _, r := range regs {
		if err := reg.Import(ctx, *r); err != nil {
			return err
		}
	}
	for _, name := range found {
		path := filepath.Join(dir, name)
		// Another process that opened the state at once may have renamed it: it is imported.
		if err := os.Rename(path, path+importedSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// readFileRows reads every row of the file layout in dir. A file that does not hold the row of
// the principal its name gives, or a principal with a row in both directories, fails the whole
// read, as it failed the file ledger's listing.
func readFileRows(dir string) ([]*userauth.Row, error) {
	var rows []*userauth.Row
	seen := make(map[string]bool)
	for _, d := range fileRowDirs {
		names, err := fileNames(filepath.Join(dir, d.name))
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			path := filepath.Join(dir, d.name, name)
			p, err := wire.ParsePrincipal(strings.TrimSuffix(name, ".json"))
			if err != nil || !wire.IsDerivedOwner(p.Owner()) {
				return nil, &userauth.FileError{Path: path, Err: errors.New("file name is not <owner>.<actor>.json")}
			}
			raw, err := readRegular(path)
			if err != nil {
				return nil, err
			}
			r, err := userauth.ParseRow(d.kind, p.Owner(), p.Actor(), raw)
			if err != nil {
				return nil, &userauth.FileError{Path: path, Err: err}
			}
			if seen[p.String()] {
				return nil, fmt.Errorf("%s is granted both %s and %s; a broken ledger is not imported", p, userauth.KindInteractive, userauth.KindManaged)
			}
			seen[p.String()] = true
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// readFileRegistrations reads every registration of the file layout's directory dir.
func readFileRegistrations(dir string) ([]*remotemgr.Registration, error) {
	names, err := fileNames(dir)
	if err != nil {
		return nil, err
	}
	var regs []*remotemgr.Registration
	for _, name := range names {
		path := filepath.Join(dir, name)
		instance := strings.TrimSuffix(name, ".json")
		if _, err := wire.ParseLifecycleUID(instance); err != nil {
			return nil, &userauth.FileError{Path: path, Err: err}
		}
		raw, err := readRegular(path)
		if err != nil {
			return nil, err
		}
		r, err := remotemgr.ParseRegistration(instance, raw)
		if err != nil {
			return nil, &userauth.FileError{Path: path, Err: err}
		}
		regs = append(regs, r)
	}
	return regs, nil
}

// fileNames returns the names of the record files in dir (none when dir is absent): every
// <name>.json but an atomic write's temporary file.
func fileNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); !strings.HasPrefix(n, ".") && strings.HasSuffix(n, ".json") {
			names = append(names, n)
		}
	}
	return names, nil
}

// readRegular reads the regular file at path, refusing a symlink or anything but a regular file,
// and a file over maxRecordFile bytes.
func readRegular(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, &userauth.FileError{Path: path, Err: err}
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, &userauth.FileError{Path: path, Err: errors.New("a record must be a regular file, not a symlink or other file")}
	}
	raw, err := io.ReadAll(io.LimitReader(f, maxRecordFile+1))
	if err != nil {
		return nil, &userauth.FileError{Path: path, Err: err}
	}
	if len(raw) > maxRecordFile {
		return nil, &userauth.FileError{Path: path, Err: fmt.Errorf("over %d bytes", maxRecordFile)}
	}
	return raw, nil
}
