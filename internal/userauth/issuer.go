package userauth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/wire"
)

// JWKSMaxAge is how long a verifier may cache /jwks (its Cache-Control max-age).
const JWKSMaxAge = 300 * time.Second

// retiredKeyGrace is how long a retired kid stays published and verifying: a verifier may hold
// a cached key set for JWKSMaxAge, and a bearer signed just before the retirement lives for up
// to MaxBearerLifetime.
const retiredKeyGrace = JWKSMaxAge + MaxBearerLifetime

// Issuer signs and verifies a space's bearers with an Ed25519 kid set kept in issuer.json. It
// signs with the newest unretired key and verifies with every published one. An Issuer is
// immutable once loaded and safe for concurrent use; the zero value is not usable.
type Issuer struct {
	space  wire.Space
	name   string
	active *signingKey
	keys   map[string]*signingKey // by kid
	order  []*signingKey          // file order, for a stable JWKS
	now    func() time.Time
}

// signingKey is one kid of the set.
type signingKey struct {
	kid       string
	priv      ed25519.PrivateKey
	pub       ed25519.PublicKey
	createdAt int64
	retiredAt int64 // Unix seconds; 0 while the key may sign
}

// published reports whether k still verifies and appears in the JWKS at now.
func (k *signingKey) published(now time.Time) bool {
	return k.retiredAt == 0 || now.Unix() < k.retiredAt+int64(retiredKeyGrace/time.Second)
}

// issuerFile is issuer.json.
type issuerFile struct {
	Ver  int             `json:"ver"`
	Keys []issuerFileKey `json:"keys"`
}

type issuerFileKey struct {
	Kid       string `json:"kid"`
	Seed      string `json:"seed"` // the Ed25519 seed, unpadded base64url
	CreatedAt int64  `json:"createdAt"`
	RetiredAt int64  `json:"retiredAt,omitempty"`
}

// LoadOrCreateIssuer returns the issuer of space whose keys are kept at path (issuer.json),
// creating the file with one fresh key (0600, create-only) when it does not exist; the parent
// directory must exist. A file that exists but is not a valid version-1 key set with one
// unretired key is a *FileError and is never overwritten: new keys would kill every outstanding
// bearer. It returns an error for an invalid space name.
func LoadOrCreateIssuer(path string, space wire.Space) (*Issuer, error) {
	if _, err := wire.ParseSpace(string(space)); err != nil {
		return nil, fmt.Errorf("load issuer: %w", err)
	}
	iss, err := loadIssuer(path, space)
	if !errors.Is(err, fs.ErrNotExist) {
		return iss, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate issuer key: %w", err)
	}
	pub := priv.Public().(ed25519.PublicKey)
	doc, err := json.Marshal(issuerFile{Ver: stateFileVer, Keys: []issuerFileKey{{
		Kid:       thumbprint(pub),
		Seed:      base64.RawURLEncoding.EncodeToString(priv.Seed()),
		CreatedAt: time.Now().Unix(),
	}}})
	if err != nil {
		return nil, fmt.Errorf("encode issuer keys: %w", err)
	}
	err = atomicfile.Create(path, append(doc, '\n'), 0o600)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return loadIssuer(path, space) // ours, or the file another process created first
}

func loadIssuer(path string, space wire.Space) (*Issuer, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, &FileError{Path: path, Err: err}
	}
	iss, err := parseIssuer(raw, space)
	if err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	return iss, nil
}

// CheckIssuer reports whether raw is a key set LoadOrCreateIssuer reads for space.
func CheckIssuer(raw []byte, space wire.Space) error {
	_, err := parseIssuer(raw, space)
	return err
}

func parseIssuer(raw []byte, space wire.Space) (*Issuer, error) {
	var f issuerFile
	if err := decodeStrict(raw, &f); err != nil {
		return nil, fmt.Errorf("not an issuer key set: %w", err)
	}
	if f.Ver != stateFileVer {
		return nil, fmt.Errorf("unknown version %d, want %d", f.Ver, stateFileVer)
	}
	if len(f.Keys) == 0 {
		return nil, fmt.Errorf("no keys")
	}
	iss := &Issuer{space: space, name: IssuerName(space), keys: make(map[string]*signingKey, len(f.Keys)), now: time.Now}
	for n, fk := range f.Keys {
		seed, err := base64.RawURLEncoding.Strict().DecodeString(fk.Seed)
		if err != nil || len(seed) != ed25519.SeedSize {
			return nil, fmt.Errorf("key %d: seed is not %d bytes of unpadded base64url", n, ed25519.SeedSize)
		}
		priv := ed25519.NewKeyFromSeed(seed)
		pub := priv.Public().(ed25519.PublicKey)
		if kid := thumbprint(pub); fk.Kid != kid {
			return nil, fmt.Errorf("key %d: kid %q is not its key's thumbprint %q", n, fk.Kid, kid)
		}
		if iss.keys[fk.Kid] != nil {
			return nil, fmt.Errorf("kid %q listed twice", fk.Kid)
		}
		if fk.RetiredAt < 0 || fk.CreatedAt < 0 {
			return nil, fmt.Errorf("key %d: negative time", n)
		}
		k := &signingKey{kid: fk.Kid, priv: priv, pub: pub, createdAt: fk.CreatedAt, retiredAt: fk.RetiredAt}
		iss.keys[k.kid] = k
		iss.order = append(iss.order, k)
		if k.retiredAt == 0 && (iss.active == nil || k.createdAt >= iss.active.createdAt) {
			iss.active = k
		}
	}
	if iss.active == nil {
		return nil, fmt.Errorf("every key is retired; none may sign")
	}
	return iss, nil
}

// thumbprint returns the RFC 7638 JWK thumbprint of an Ed25519 public key, the kid: stable and
// recomputable by any verifier.
func thumbprint(pub ed25519.PublicKey) string {
	// RFC 7638 hashes the required members in lexicographic order with no white space.
	canon := `{"crv":"Ed25519","kty":"OKP","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}`
	sum := sha256.Sum256([]byte(canon))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// Name returns the issuer's iss, IssuerName of its space.
func (i *Issuer) Name() string { return i.name }

// Space returns the space whose bearers the issuer signs.
func (i *Issuer) Space() wire.Space { return i.space }

// ActiveKid returns the kid new bearers are signed with.
func (i *Issuer) ActiveKid() string { return i.active.kid }

// jwk is one public key of the JWKS.
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}

// JWKS returns the public key set, {"keys":[...]}: every published kid as an OKP Ed25519 key with
// its kid, alg EdDSA and use sig. It never carries private material.
func (i *Issuer) JWKS() []byte {
	set := struct {
		Keys []jwk `json:"keys"`
	}{Keys: []jwk{}}
	now := i.now()
	for _, k := range i.order {
		if k.published(now) {
			set.Keys = append(set.Keys, jwk{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(k.pub), Kid: k.kid, Alg: bearerAlg, Use: "sig"})
		}
	}
	b, err := json.Marshal(set)
	if err != nil {
		return []byte(`{"keys":[]}`) // unreachable: the set is strings only
	}
	return b
}
