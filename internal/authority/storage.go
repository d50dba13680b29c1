package authority

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nats-io/jwt/v2"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/wire"
)

// StorageLimits bound what a space's account may keep in JetStream, in bytes: every stream and
// bucket of the space together, each message counted once per replica. The broker refuses a
// write that would pass a limit. A negative limit is no limit.
type StorageLimits struct {
	// Disk bounds file storage: the message streams, the stores and every bucket but presence.
	Disk int64 `json:"disk"`
	// Memory bounds memory storage: the presence bucket.
	Memory int64 `json:"memory"`
}

// Unlimited is the value of a limit that bounds nothing.
const Unlimited int64 = jwt.NoLimit

// DefaultStorageLimits are a space's limits until its authority is told others: room for a busy
// mesh's history (a disk's worth of DMs from one flooding credential is the case they close), and
// presence rows for far more agents than one broker serves.
var DefaultStorageLimits = StorageLimits{Disk: 16 << 30, Memory: 256 << 20}

// The smallest bounded limits a space runs in: its membership feed reserves 64 MiB of disk when
// it is created, and the rest of its streams and buckets need room beside it.
const (
	MinDiskLimit   int64 = 128 << 20
	MinMemoryLimit int64 = 16 << 20
)

// Validate reports a limit that is bounded but too small for a space to run in.
func (l StorageLimits) Validate() error {
	for _, c := range []struct {
		name   string
		v, min int64
	}{{"disk", l.Disk, MinDiskLimit}, {"memory", l.Memory, MinMemoryLimit}} {
		if c.v >= 0 && c.v < c.min {
			return fmt.Errorf("%s storage limit of %d bytes: a space needs at least %d (%d MiB), or no limit", c.name, c.v, c.min, c.min>>20)
		}
	}
	return nil
}

// jetStream renders the limits as the account JWT carries them; stream and consumer counts stay
// open (zero means unlimited to the server and stays out of the JWT, as the reference leaves it).
func (l StorageLimits) jetStream() jwt.JetStreamLimits {
	clamp := func(v int64) int64 {
		if v < 0 {
			return jwt.NoLimit
		}
		return v
	}
	return jwt.JetStreamLimits{DiskStorage: clamp(l.Disk), MemoryStorage: clamp(l.Memory)}
}

// storagePath is the file in the keyring directory dir holding the space's limits when they are
// not the defaults.
func storagePath(dir string, space wire.Space) string {
	return filepath.Join(dir, "space."+string(space)+".storage.json")
}

// StorageLimits returns the space's storage limits: those its authority was told, or
// DefaultStorageLimits. A file that does not hold valid limits is a *KeyFileError: minting an
// account JWT from a guess could lift a bound an operator set.
func (k *Keyring) StorageLimits(space wire.Space) (StorageLimits, error) {
	path := storagePath(k.dir, space)
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return DefaultStorageLimits, nil
	}
	if err != nil {
		return StorageLimits{}, &KeyFileError{Path: path, Err: err}
	}
	var l StorageLimits
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return StorageLimits{}, &KeyFileError{Path: path, Err: fmt.Errorf("not storage limits: %w", err)}
	}
	if err := l.Validate(); err != nil {
		return StorageLimits{}, &KeyFileError{Path: path, Err: err}
	}
	return l, nil
}

// SetStorageLimits records the space's storage limits; the next account JWT minted for the space
// carries them.
func (k *Keyring) SetStorageLimits(space wire.Space, l StorageLimits) error {
	return writeStorageLimits(k.dir, space, l)
}

// writeStorageLimits records the space's limits in the keyring directory dir.
func writeStorageLimits(dir string, space wire.Space, l StorageLimits) error {
	if _, err := wire.ParseSpace(string(space)); err != nil {
		return err
	}
	if err := l.Validate(); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(storagePath(dir, space), append(raw, '\n'), 0o600)
}
