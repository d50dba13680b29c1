package backup

import (
	"archive/tar"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/argon2"

	"github.com/gocotal/cotal/internal/atomicfile"
)

// Keys describes the mesh's keys in a backup: its auth directory's files, as a tar, sealed with
// a key derived from a passphrase (Argon2id, then AES-256-GCM) unless the backup was made
// without one.
type Keys struct {
	Encrypted bool `json:"encrypted"`
	// Salt and the Argon2id costs derive the key; set when Encrypted.
	Salt    []byte `json:"salt,omitempty"`
	Time    uint32 `json:"time,omitempty"`
	Memory  uint32 `json:"memoryKiB,omitempty"`
	Threads uint8  `json:"threads,omitempty"`
}

// The Argon2id costs keys are sealed with (RFC 9106's second recommended option).
const (
	kdfTime    = 3
	kdfMemory  = 64 << 10
	kdfThreads = 4
)

// ErrPassphrase is returned when a backup's keys do not open with the passphrase given.
var ErrPassphrase = errors.New("the backup's keys do not open with this passphrase")

// maxKeys bounds the keys' tar: a keyring is a few files of a few hundred bytes each.
const maxKeys = 16 << 20

// packKeys returns the key files of dir as a tar, sealed with pass when it is not empty.
func packKeys(dir string, pass []byte) ([]byte, *Keys, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read the keys: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		// A write in flight (.name.tmp-*) and a lock file are not keys.
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") || strings.HasSuffix(e.Name(), ".lock") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, nil, fmt.Errorf("read the keys: %w", err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.Name(), Mode: 0o600, Size: int64(len(raw)), Typeflag: tar.TypeReg}); err != nil {
			return nil, nil, err
		}
		if _, err := tw.Write(raw); err != nil {
			return nil, nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, nil, err
	}
	if len(pass) == 0 {
		return buf.Bytes(), &Keys{}, nil
	}
	k := &Keys{Encrypted: true, Salt: make([]byte, 16), Time: kdfTime, Memory: kdfMemory, Threads: kdfThreads}
	if _, err := rand.Read(k.Salt); err != nil {
		return nil, nil, err
	}
	aead, err := k.aead(pass)
	if err != nil {
		return nil, nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, nil, err
	}
	return aead.Seal(nonce, nonce, buf.Bytes(), nil), k, nil
}

// aead returns the cipher pass opens k's keys with.
func (k *Keys) aead(pass []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(argon2.IDKey(pass, k.Salt, k.Time, k.Memory, k.Threads, 32))
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// open returns the keys' tar from sealed, opened with pass when k says they are encrypted.
func (k *Keys) open(sealed, pass []byte) ([]byte, error) {
	if !k.Encrypted {
		return sealed, nil
	}
	if len(pass) == 0 {
		return nil, errors.New("the backup's keys are encrypted: give its passphrase")
	}
	if k.Time == 0 || k.Time > 16 || k.Memory == 0 || k.Memory > 1<<21 || k.Threads == 0 || len(k.Salt) < 16 {
		return nil, fmt.Errorf("the backup's key derivation (time %d, memory %d KiB, threads %d) is out of bounds", k.Time, k.Memory, k.Threads)
	}
	aead, err := k.aead(pass)
	if err != nil {
		return nil, err
	}
	if len(sealed) < aead.NonceSize() {
		return nil, ErrPassphrase
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], nil)
	if err != nil {
		return nil, ErrPassphrase
	}
	return plain, nil
}

// unpackKeys writes the files of the keys' tar into dir (0700, each file 0600). Only plain file
// names are taken: an entry with a path is refused.
func unpackKeys(tarred []byte, dir string) error {
	if err := atomicfile.MkdirPrivate(dir); err != nil {
		return err
	}
	tr := tar.NewReader(bytes.NewReader(tarred))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("the backup's keys: %w", err)
		}
		if h.Typeflag != tar.TypeReg || h.Name != filepath.Base(h.Name) || strings.HasPrefix(h.Name, ".") || h.Size > maxKeys {
			return fmt.Errorf("the backup's keys hold %q, which is not a key file", h.Name)
		}
		raw, err := io.ReadAll(io.LimitReader(tr, maxKeys))
		if err != nil {
			return fmt.Errorf("the backup's keys: %w", err)
		}
		if err := atomicfile.Write(filepath.Join(dir, h.Name), raw, 0o600); err != nil {
			return err
		}
	}
}
