package authority

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/wire"
)

// Seeds are a keyring's secret keys: whoever holds them is an authority of every space they name.
// They move from one authority node of a cluster to a second one, and nowhere else.
type Seeds struct {
	Operator string                    `json:"operator"`
	System   string                    `json:"system"`
	Spaces   map[wire.Space]SpaceSeeds `json:"spaces"`
}

// SpaceSeeds are one space's account and signing keys, and the storage limits the account JWT
// carries, so that every authority mints the same account.
type SpaceSeeds struct {
	Account string         `json:"account"`
	Signing string         `json:"signing"`
	Storage *StorageLimits `json:"storage,omitempty"`
	// Callout are the space's auth-callout keys (CalloutKeys), when the keyring holds them: a
	// mesh in user-auth mode, whose every authority node answers the callout.
	Callout *CalloutSeeds `json:"callout,omitempty"`
}

// CalloutSeeds are one space's auth-callout keys: the auth account, its callout and sentinel
// users, and the curve key requests are sealed to.
type CalloutSeeds struct {
	Account  string `json:"account"`
	Callout  string `json:"callout"`
	Sentinel string `json:"sentinel"`
	XKey     string `json:"xkey"`
}

// Export returns the keyring's seeds for spaces, creating a space's keys on first use as Space
// does.
func (k *Keyring) Export(spaces []wire.Space) (*Seeds, error) {
	op, err := k.operator.Seed()
	if err != nil {
		return nil, err
	}
	sys, err := k.system.Seed()
	if err != nil {
		return nil, err
	}
	s := &Seeds{Operator: string(op), System: string(sys), Spaces: map[wire.Space]SpaceSeeds{}}
	for _, sp := range spaces {
		sk, err := k.Space(sp)
		if err != nil {
			return nil, err
		}
		acct, err := sk.account.Seed()
		if err != nil {
			return nil, err
		}
		signing, err := sk.signing.Seed()
		if err != nil {
			return nil, err
		}
		storage, err := k.StorageLimits(sp)
		if err != nil {
			return nil, err
		}
		ss := SpaceSeeds{Account: string(acct), Signing: string(signing), Storage: &storage}
		if k.HasCallout(sp) {
			if ss.Callout, err = k.calloutSeeds(sp); err != nil {
				return nil, err
			}
		}
		s.Spaces[sp] = ss
	}
	return s, nil
}

// ImportSeeds writes the seeds into the keyring directory dir (created 0700), each key file 0600.
// A key file already there must hold the same seed: a directory holds one authority, never two.
// A space's storage limits, when the seeds carry them, replace those dir held. Every seed and
// limit is checked before the first file is written.
func ImportSeeds(dir string, s *Seeds) error {
	type keyFile struct {
		name, seed string
		kind       nkeys.PrefixByte
	}
	files := []keyFile{{operatorFile, s.Operator, nkeys.PrefixByteOperator}, {systemFile, s.System, nkeys.PrefixByteAccount}}
	if len(s.Spaces) == 0 {
		return errors.New("import keys: no space's keys")
	}
	for sp, ss := range s.Spaces {
		if _, err := wire.ParseSpace(string(sp)); err != nil {
			return fmt.Errorf("import keys: %w", err)
		}
		if ss.Storage != nil {
			if err := ss.Storage.Validate(); err != nil {
				return fmt.Errorf("import keys: space %s: %w", sp, err)
			}
		}
		files = append(files,
			keyFile{"space." + string(sp) + ".nk", ss.Account, nkeys.PrefixByteAccount},
			keyFile{"space." + string(sp) + ".signing.nk", ss.Signing, nkeys.PrefixByteAccount})
		if c := ss.Callout; c != nil {
			stem := calloutStem(sp)
			files = append(files,
				keyFile{stem + ".nk", c.Account, nkeys.PrefixByteAccount},
				keyFile{stem + ".callout.nk", c.Callout, nkeys.PrefixByteUser},
				keyFile{stem + ".sentinel.nk", c.Sentinel, nkeys.PrefixByteUser},
				keyFile{stem + ".xkey.nk", c.XKey, nkeys.PrefixByteCurve})
		}
	}
	for _, f := range files {
		prefix, _, err := nkeys.DecodeSeed([]byte(f.seed))
		if err != nil {
			return fmt.Errorf("import keys: %s: not an nkey seed: %w", f.name, err)
		}
		if prefix != f.kind {
			return fmt.Errorf("import keys: %s: a %s seed, want an %s seed", f.name, kindName(prefix), kindName(f.kind))
		}
		raw, err := os.ReadFile(filepath.Join(dir, f.name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return &KeyFileError{Path: filepath.Join(dir, f.name), Err: err}
		case !bytes.Equal(bytes.TrimSpace(raw), []byte(f.seed)):
			return &KeyFileError{Path: filepath.Join(dir, f.name), Err: errors.New("holds another key: this directory belongs to another authority")}
		}
	}
	if err := atomicfile.MkdirPrivate(dir); err != nil {
		return err
	}
	for _, f := range files {
		err := atomicfile.Create(filepath.Join(dir, f.name), []byte(f.seed+"\n"), 0o600)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	for sp, ss := range s.Spaces {
		if ss.Storage == nil {
			continue
		}
		if err := writeStorageLimits(dir, sp, *ss.Storage); err != nil {
			return fmt.Errorf("import keys: space %s: %w", sp, err)
		}
	}
	return nil
}

// CalloutAccount returns the public key of the auth account the callout seeds of space name, ""
// when the seeds carry none.
func (s *Seeds) CalloutAccount(space wire.Space) (string, error) {
	c := s.Spaces[space].Callout
	if c == nil {
		return "", nil
	}
	kp, err := nkeys.FromSeed([]byte(c.Account))
	if err != nil {
		return "", fmt.Errorf("keys: the callout account of space %s: not an nkey seed: %w", space, err)
	}
	return PublicKey(kp), nil
}

// PublicKeys returns the public keys of the seeds: the operator's, the system account's and each
// space's account.
func (s *Seeds) PublicKeys() (operator, system string, accounts map[wire.Space]string, err error) {
	public := func(seed string, kind nkeys.PrefixByte) (string, error) {
		kp, err := nkeys.FromSeed([]byte(seed))
		if err != nil {
			return "", fmt.Errorf("keys: not an nkey seed: %w", err)
		}
		pub := PublicKey(kp)
		if nkeys.Prefix(pub) != kind {
			return "", fmt.Errorf("keys: a %s seed, want an %s seed", kindName(nkeys.Prefix(pub)), kindName(kind))
		}
		return pub, nil
	}
	if operator, err = public(s.Operator, nkeys.PrefixByteOperator); err != nil {
		return "", "", nil, err
	}
	if system, err = public(s.System, nkeys.PrefixByteAccount); err != nil {
		return "", "", nil, err
	}
	accounts = map[wire.Space]string{}
	for sp, ss := range s.Spaces {
		if accounts[sp], err = public(ss.Account, nkeys.PrefixByteAccount); err != nil {
			return "", "", nil, err
		}
		if _, err = public(ss.Signing, nkeys.PrefixByteAccount); err != nil {
			return "", "", nil, err
		}
	}
	return operator, system, accounts, nil
}
