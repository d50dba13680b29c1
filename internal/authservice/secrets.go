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

// ImportSecrets writes s into the user-auth state in dir (created 0700), each file 0600. A file
// already there must hold the same content: a directory serves one space's people, never two.
// Every secret is checked before the first file is written.
func ImportSecrets(dir string, sp wire.Space, s *Secrets) error {
	type file struct {
		name  string
		raw   []byte
		check func(path string) error
	}
	files := []file{
		{ownerSecretFile, s.OwnerSecret, func(p string) error { _, err := userauth.LoadOrCreateOwnerSecret(p); return err }},
		{issuerFile, s.Issuer, func(p string) error { _, err := userauth.LoadOrCreateIssuer(p, sp); return err }},
		{devIdPKeyFile, s.DevIdPKey, func(p string) error { _, err := devidp.LoadOrCreateKey(p); return err }},
	}
	if s.IdP != nil {
		if s.IdP.Issuer == "" || s.IdP.ClientID == "" {
			return errors.New("import user-auth secrets: the IdP pin names no issuer or client")
		}
		pin, _ := json.MarshalIndent(s.IdP, "", "  ") // strings always encode
		files = append(files, file{idpPinFile, pin, func(p string) error { _, err := PinnedIdP(filepath.Dir(p)); return err }})
	}
	tmp, err := os.MkdirTemp("", "cotal-secrets-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, f := range files {
		if len(f.raw) == 0 {
			return fmt.Errorf("import user-auth secrets: %s is missing", f.name)
		}
		p := filepath.Join(tmp, f.name)
		if err := os.WriteFile(p, f.raw, 0o600); err != nil {
			return err
		}
		if err := f.check(p); err != nil {
			return fmt.Errorf("import user-auth secrets: %s: %w", f.name, err)
		}
		have, err := os.ReadFile(filepath.Join(dir, f.name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		case !bytes.Equal(bytes.TrimSpace(have), bytes.TrimSpace(f.raw)):
			return fmt.Errorf("import user-auth secrets: %s holds another %s: this directory serves other people", filepath.Join(dir, f.name), f.name)
		}
	}
	if err := atomicfile.MkdirPrivate(dir); err != nil {
		return err
	}
	for _, f := range files {
		err := atomicfile.Create(filepath.Join(dir, f.name), append(bytes.TrimSpace(f.raw), '\n'), 0o600)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return nil
}
