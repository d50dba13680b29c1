package mesh

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/backup"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/wire"
)

// Restore starts a mesh from a backup (Options.Restore): its keys are written into the new
// directory before the broker starts, and its streams restored before the spaces are
// provisioned, so the ledger, its credentials and every stored message are back.
type Restore struct {
	Archive *backup.Archive
	// Passphrase opens the backup's keys when they are encrypted.
	Passphrase []byte
}

// restoreWait bounds the restore of one space's streams.
const restoreWait = 30 * time.Minute

// prepareRestore checks that d holds no mesh yet and that o fits the backup, writes the backup's
// keys into d, and returns the spaces to serve: the backup's.
func prepareRestore(d Dir, o Options) ([]wire.Space, error) {
	r := o.Restore
	switch {
	case o.Cluster != nil:
		return nil, errors.New("a backup restores into a mesh of one node: start the cluster's first node from the restored directory afterwards")
	case len(o.Spaces) > 0 && !slices.Equal(o.Spaces, r.Archive.Manifest.Spaces):
		return nil, fmt.Errorf("the backup holds spaces %q, not %q: drop --space, which the backup sets", r.Archive.Manifest.Spaces, o.Spaces)
	case o.Open && r.Archive.Manifest.Keys != nil:
		return nil, errors.New("the backup is of an authenticated mesh: restore it without --open")
	case !o.Open && r.Archive.Manifest.Keys == nil:
		return nil, errors.New("the backup was made without the mesh's keys: an authenticated mesh cannot be restored from it (its credentials and ledger need them); with --open, an open mesh's backup restores")
	}
	for _, p := range []string{d.AuthDir(), d.StoreDir()} {
		if entries, err := os.ReadDir(p); err == nil && len(entries) > 0 {
			return nil, fmt.Errorf("%s already holds a mesh (%s is not empty): a backup restores into a new directory", d.Path, p)
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	if !o.Open {
		if err := r.Archive.RestoreKeys(d.AuthDir(), r.Passphrase); err != nil {
			_ = os.RemoveAll(d.AuthDir()) // it held nothing before: a retry finds it as it was
			return nil, err
		}
	}
	return r.Archive.Manifest.Spaces, nil
}

// restoreStreams restores each space's streams from the backup, on a user of the space's store
// account (an open mesh's single account takes them as they come), before anything provisions
// them.
func (m *Mesh) restoreStreams(ctx context.Context, url string, spaces []wire.Space, r *Restore) error {
	ctx, cancel := context.WithTimeout(ctx, restoreWait)
	defer cancel()
	for _, sp := range spaces {
		var nc *nats.Conn
		var err error
		if m.keyring == nil {
			nc, err = dial.Anonymous(ctx, url)
		} else {
			cred, merr := m.keyring.MintStoreUser(sp, "cotal_restore", restoreWait)
			if merr != nil {
				return merr
			}
			nc, err = dial.As(ctx, url, cred)
		}
		if err != nil {
			return fmt.Errorf("restore space %s: %w", sp, err)
		}
		err = r.Archive.RestoreStreams(ctx, nc, sp, m.replicas)
		nc.Close()
		if err != nil {
			return fmt.Errorf("restore space %s: %w", sp, err)
		}
	}
	return nil
}
