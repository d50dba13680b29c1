package authservice

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/internal/userauth/devidp"
	"github.com/gocotal/cotal/wire"
)

// devIdPKeyFile keeps the development IdP's signing key, so its tokens outlive a restart and
// verify on every authority node of a cluster.
const devIdPKeyFile = "dev-idp-key.json"

// Secrets are the user-auth state every authority node of a cluster must hold alike, as the files
// hold it: the owner secret (every owner derives from it), the bearer keys, the IdP pin and the
// development IdP's key. They travel in an authority bundle only: whoever holds them can issue
// any bearer of the space.
type Secrets struct {
	OwnerSecret json.RawMessage `json:"ownerSecret"`
	Issuer      json.RawMessage `json:"issuer"`
	DevIdPKey   json.RawMessage `json:"devIdpKey"`
	// IdP is the pinned identity provider, once a node has started with one.
	IdP *IdP `json:"idp,omitempty"`
}

// ExportSecrets returns the secrets of the user-auth state in dir, making those it does not hold
// yet (as the auth service's first start would), so a second authority node may be given them
// before the first one has served.
func ExportSecrets(dir string, sp wire.Space) (*Secrets, error) {
	if err := atomicfile.MkdirPrivate(dir); err != nil {
		return nil, err
	}
	if _, err := userauth.LoadOrCreateOwnerSecret(filepath.Join(dir, ownerSecretFile)); err != nil {
		return nil, err
	}
	if _, err := userauth.LoadOrCreateIssuer(filepath.Join(dir, issuerFile), sp); err != nil {
		return nil, err
	}
	if _, err := DevIdPKey(dir); err != nil {
		return nil, err
	}
	s := &Secrets{}
	for name, into := range map[string]*json.RawMessage{ownerSecretFile: &s.OwnerSecret, issuerFile: &s.Issuer, devIdPKeyFile: &s.DevIdPKey} {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		*into = json.RawMessage(bytes.TrimSpace(raw))
	}
	if idp, err := PinnedIdP(dir); err == nil {
		s.IdP = &idp
	}
	return s, nil
}

// DevIdPKey returns the development IdP's signing key kept in dir (created 0700), made on first
// use.
func DevIdPKey(dir string) (ed25519.PrivateKey, error) {
	if err := atomicfile.MkdirPrivate(dir); err != nil {
		return nil, err
	}
	return devidp.LoadOrCreateKey(filepath.Join(dir, devIdPKeyFile))
}

// secretFile is one file of the secrets, with the check of its content.
type secretFile struct {
	name  string
	raw   []byte
	check func([]byte) error
}

// files returns the secrets as the files they are kept in, each checked: nothing that is not a
// secret of space is ever written.
func (s *Secrets) files(sp wire.Space) ([]secretFile, error) {
	files := []secretFile{
		{ownerSecretFile, s.OwnerSecret, userauth.CheckOwnerSecret},
		{issuerFile, s.Issuer, func(raw []byte) error { return userauth.CheckIssuer(raw, sp) }},
		{devIdPKeyFile, s.DevIdPKey, devidp.CheckKey},
	}
	if s.IdP != nil {
		if s.IdP.Issuer == "" || s.IdP.ClientID == "" {
			return nil, errors.New("user-auth secrets: the IdP pin names no issuer or client")
		}
		pin, _ := json.MarshalIndent(s.IdP, "", "  ") // strings always encode
		files = append(files, secretFile{idpPinFile, pin, func([]byte) error { return nil }})
	}
	for i, f := range files {
		if len(f.raw) == 0 {
			return nil, fmt.Errorf("user-auth secrets: %s is missing", f.name)
		}
		if err := f.check(f.raw); err != nil {
			return nil, fmt.Errorf("user-auth secrets: %s: %w", f.name, err)
		}
		// Clipped, so the newline lands in a copy, never in the caller's Secrets.
		files[i].raw = append(slices.Clip(bytes.TrimSpace(f.raw)), '\n')
	}
	return files, nil
}

// same checks that path holds raw, or nothing.
func same(path string, raw []byte) error {
	have, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !bytes.Equal(bytes.TrimSpace(have), bytes.TrimSpace(raw)):
		return fmt.Errorf("user-auth secrets: %s holds another %s: this directory serves other people", path, filepath.Base(path))
	}
	return nil
}

// CheckSecrets checks s as ImportSecrets would take it into dir, writing nothing.
func CheckSecrets(dir string, sp wire.Space, s *Secrets) error {
	files, err := s.files(sp)
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := same(filepath.Join(dir, f.name), f.raw); err != nil {
			return err
		}
	}
	return nil
}

// ImportSecrets writes s into the user-auth state in dir (created 0700), each file 0600 and
// create-only. A file already there must hold the same content: a directory serves one space's
// people, never two. Every secret is checked before the first file is written.
func ImportSecrets(dir string, sp wire.Space, s *Secrets) error {
	if err := CheckSecrets(dir, sp, s); err != nil {
		return err
	}
	files, err := s.files(sp)
	if err != nil {
		return err
	}
	if err := atomicfile.MkdirPrivate(dir); err != nil {
		return err
	}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		err := atomicfile.Create(path, f.raw, 0o600)
		if errors.Is(err, fs.ErrExist) {
			err = same(path, f.raw) // made meanwhile: it must be the same
		}
		if err != nil {
			return err
		}
	}
	return nil
}
