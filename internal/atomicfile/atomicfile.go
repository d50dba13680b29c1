// Package atomicfile writes files so that a reader or a crash never sees them half-written: the
// bytes go to a temporary file in the same directory, are synced, and are renamed (or linked)
// into place. Lock serialises the read-modify-writes of such a file across processes.
package atomicfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Write replaces path with data, created with perm. The parent directory must exist. On failure
// the previous content of path, if any, is untouched and no temporary file is left behind.
func Write(path string, data []byte, perm os.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp) // best effort: the file is ours and unreferenced
		return fmt.Errorf("write %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

// Create writes data to path, created with perm, only if path does not exist yet: it returns an
// error matching fs.ErrExist otherwise, and the existing file is untouched. Two racing creators
// cannot both win, and a crash never leaves a partial file at path.
func Create(path string, data []byte, perm os.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	// link(2) fails with EEXIST when path exists, which is what makes the create exclusive.
	err = os.Link(tmp, path)
	_ = os.Remove(tmp) // the data lives on under path after the link, or is discarded
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

// writeTemp writes data, synced, to a new temporary file beside path and returns its name. On
// failure it leaves no file behind.
func writeTemp(path string, data []byte, perm os.FileMode) (name string, err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			_ = f.Close()           // already failing; the first error is the one to report
			_ = os.Remove(f.Name()) // best effort: the file is ours and unreferenced
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return "", err
	}
	if _, err = f.Write(data); err != nil {
		return "", err
	}
	if err = f.Sync(); err != nil {
		return "", err
	}
	if err = f.Close(); err != nil {
		return "", err
	}
	return f.Name(), nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// MkdirPrivate creates dir and its missing parents with mode 0700, and tightens dir itself to
// 0700 if it already exists with wider permissions: secrets live below it.
func MkdirPrivate(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("restrict %s: %w", dir, err)
	}
	return nil
}

// lockPoll is how often Lock tries again for a lock another holds.
const lockPoll = 20 * time.Millisecond

// Lock takes an exclusive lock on the file at path (created 0600 if missing), held by one
// process and one caller at a time, and returns its release. Lock the file beside the one Write
// replaces, not that file: a replaced file takes its lock with it. It waits for another holder
// until ctx ends.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing the file releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: another process holds it: %w", path, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}
