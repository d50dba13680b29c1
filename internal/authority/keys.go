package authority

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/wire"
)

// Keyring holds the broker's keys: the operator that signs every account, and the system account.
// Space accounts come from Space. A Keyring is safe for concurrent use once opened.
type Keyring struct {
	dir      string
	operator nkeys.KeyPair
	system   nkeys.KeyPair

	mu     sync.Mutex
	spaces map[wire.Space]*SpaceKeys // loaded once: reading two key files per mint was a tenth of an issue
}

// Key file names inside the keyring directory.
const (
	operatorFile = "operator.nk"
	systemFile   = "system.nk"
)

// OpenKeyring loads the operator and system-account keys from dir, creating dir (0700) and any
// missing key (0600) first. A key file that exists but does not hold a seed of the right kind is
// a *KeyFileError and is not replaced.
func OpenKeyring(dir string) (*Keyring, error) {
	if err := atomicfile.MkdirPrivate(dir); err != nil {
		return nil, err
	}
	op, err := loadOrCreate(filepath.Join(dir, operatorFile), nkeys.PrefixByteOperator)
	if err != nil {
		return nil, err
	}
	sys, err := loadOrCreate(filepath.Join(dir, systemFile), nkeys.PrefixByteAccount)
	if err != nil {
		return nil, err
	}
	return &Keyring{dir: dir, operator: op, system: sys}, nil
}

// OperatorPublicKey returns the operator's public key.
func (k *Keyring) OperatorPublicKey() string { return PublicKey(k.operator) }

// SystemAccountPublicKey returns the system account's public key.
func (k *Keyring) SystemAccountPublicKey() string { return PublicKey(k.system) }

// SpaceKeys are one space's account key and the signing key that mints its users. Whoever holds
// them can mint any identity in the space.
type SpaceKeys struct {
	Space   wire.Space
	account nkeys.KeyPair
	signing nkeys.KeyPair
	// store is the key of the space's store account, derived from the account key so every
	// node holding the space's keys names the same one.
	store nkeys.KeyPair
	// accountPub is the account's public key, derived once: deriving it costs a scalar
	// multiplication, and every mint names it.
	accountPub string
}

// Space loads the account and signing keys of space, creating them on first use. The space name
// must pass wire.ParseSpace, since it names the key files.
func (k *Keyring) Space(space wire.Space) (*SpaceKeys, error) {
	if _, err := wire.ParseSpace(string(space)); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if sk, ok := k.spaces[space]; ok {
		return sk, nil
	}
	acct, err := loadOrCreate(filepath.Join(k.dir, "space."+string(space)+".nk"), nkeys.PrefixByteAccount)
	if err != nil {
		return nil, err
	}
	signing, err := loadOrCreate(filepath.Join(k.dir, "space."+string(space)+".signing.nk"), nkeys.PrefixByteAccount)
	if err != nil {
		return nil, err
	}
	store, err := derive(acct, nkeys.PrefixByteAccount, "cotal store account v1")
	if err != nil {
		return nil, err
	}
	sk := &SpaceKeys{Space: space, account: acct, signing: signing, store: store, accountPub: PublicKey(acct)}
	if k.spaces == nil {
		k.spaces = map[wire.Space]*SpaceKeys{}
	}
	k.spaces[space] = sk
	return sk, nil
}

// AccountPublicKey returns the space account's public key, its NATS account name.
func (s *SpaceKeys) AccountPublicKey() string { return s.accountPub }

// StorePublicKey returns the public key of the space's store account, which holds the space's
// JetStream streams and buckets.
func (s *SpaceKeys) StorePublicKey() string { return PublicKey(s.store) }

// SigningPublicKey returns the public key of the account signing key user JWTs are signed with.
func (s *SpaceKeys) SigningPublicKey() string { return PublicKey(s.signing) }

// PublicKey returns a key pair's public key. The pairs here all come from validated seeds or are
// derived (UserKey), for which PublicKey cannot fail.
func PublicKey(kp nkeys.KeyPair) string {
	pub, err := kp.PublicKey()
	if err != nil {
		panic(fmt.Sprintf("authority: public key of a validated seed: %v", err))
	}
	return pub
}

// loadOrCreate returns the key in path, creating it when the file does not exist.
func loadOrCreate(path string, kind nkeys.PrefixByte) (nkeys.KeyPair, error) {
	kp, err := loadKey(path, kind)
	if !errors.Is(err, fs.ErrNotExist) {
		return kp, err
	}
	kp, err = createKey(kind)
	if err != nil {
		return nil, err
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, fmt.Errorf("encode new %s key: %w", kindName(kind), err)
	}
	err = atomicfile.Create(path, append(seed, '\n'), 0o600)
	if errors.Is(err, fs.ErrExist) {
		return loadKey(path, kind) // another process created it first: use theirs
	}
	if err != nil {
		return nil, err
	}
	return kp, nil
}

func loadKey(path string, kind nkeys.PrefixByte) (nkeys.KeyPair, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, &KeyFileError{Path: path, Err: err}
	}
	seed := bytes.TrimSpace(raw)
	prefix, _, err := nkeys.DecodeSeed(seed)
	if err != nil {
		return nil, &KeyFileError{Path: path, Err: fmt.Errorf("not an nkey seed: %w", err)}
	}
	if prefix != kind {
		return nil, &KeyFileError{Path: path, Err: fmt.Errorf("holds a %s seed, want an %s seed", kindName(prefix), kindName(kind))}
	}
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return nil, &KeyFileError{Path: path, Err: err}
	}
	return kp, nil
}

func createKey(kind nkeys.PrefixByte) (nkeys.KeyPair, error) {
	kp, err := nkeys.CreatePair(kind)
	if err != nil {
		return nil, fmt.Errorf("create %s key: %w", kindName(kind), err)
	}
	return kp, nil
}

func kindName(p nkeys.PrefixByte) string {
	switch p {
	case nkeys.PrefixByteOperator:
		return "operator"
	case nkeys.PrefixByteAccount:
		return "account"
	case nkeys.PrefixByteUser:
		return "user"
	}
	return p.String()
}

// UserKey derives a credential's user key from the space's signing key and the credential id,
// so a retried release returns the same creds without any secret being stored.
func (s *SpaceKeys) UserKey(credentialID string) (nkeys.KeyPair, error) {
	return derive(s.signing, nkeys.PrefixByteUser, "cotal user key v1:"+credentialID)
}

// derive returns the key of kind that the HMAC-SHA256 of label under parent's seed seeds: the
// same parent and label always give the same key, and the key reveals nothing of its parent.
func derive(parent nkeys.KeyPair, kind nkeys.PrefixByte, label string) (nkeys.KeyPair, error) {
	_, raw, err := nkeys.DecodeSeed(mustSeed(parent))
	if err != nil {
		return nil, err
	}
	mac := hmac.New(sha256.New, raw)
	mac.Write([]byte(label))
	return nkeys.FromRawSeed(kind, mac.Sum(nil))
}

// mustSeed returns a loaded key pair's seed, which cannot fail for a pair from a validated seed.
func mustSeed(kp nkeys.KeyPair) []byte {
	seed, err := kp.Seed()
	if err != nil {
		panic(fmt.Sprintf("authority: seed of a loaded key: %v", err))
	}
	return seed
}

// SignClaims signs user claims with the space's account signing key: how the ledger renews a
// credential's JWT in place or rewrites one it repairs.
func (s *SpaceKeys) SignClaims(c *jwt.UserClaims) (string, error) { return c.Encode(s.signing) }

// MAC returns the HMAC-SHA256 of msg under a key derived from the space's signing seed for
// domain: a proof only the holder of the space's keys can make or check, never the seed itself.
func (s *SpaceKeys) MAC(domain string, msg []byte) []byte {
	_, raw, err := nkeys.DecodeSeed(mustSeed(s.signing))
	if err != nil {
		panic("authority: decode a loaded signing seed: " + err.Error())
	}
	k := hmac.New(sha256.New, raw)
	k.Write([]byte("cotal proof key v1:" + domain))
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write(msg)
	return m.Sum(nil)
}
