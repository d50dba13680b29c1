package devidp

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"

	"github.com/gocotal/cotal/internal/atomicfile"
)

// keyFile is the file a persistent signing key is kept in.
type keyFile struct {
	Seed string `json:"seed"` // the Ed25519 seed, unpadded base64url
}

// LoadOrCreateKey returns the signing key kept at path, creating the file (0600, create-only)
// with a fresh key when it does not exist. Servers started with the same key (Options.Key) sign
// ID tokens any of them verifies: the nodes of a cluster take the provider over from each other
// without logging anyone out. A file that holds no key is an error naming it, never replaced.
func LoadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	key, err := loadKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	_, key, err = ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate the development IdP's key: %w", err)
	}
	raw, _ := json.Marshal(keyFile{Seed: base64.RawURLEncoding.EncodeToString(key.Seed())}) // a string always encodes
	if err := atomicfile.Create(path, append(raw, '\n'), 0o600); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return loadKey(path) // ours, or the one another process created first
}

// CheckKey reports whether raw is a key file LoadOrCreateKey reads.
func CheckKey(raw []byte) error {
	_, err := parseKey(raw)
	return err
}

func loadKey(path string) (ed25519.PrivateKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key, err := parseKey(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return key, nil
}

func parseKey(raw []byte) (ed25519.PrivateKey, error) {
	var f keyFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("not a development IdP key: %w", err)
	}
	seed, err := base64.RawURLEncoding.Strict().DecodeString(f.Seed)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("not a development IdP key: the seed is not %d bytes of unpadded base64url", ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// maxDocument bounds what Serving reads of a document.
const maxDocument = 64 << 10

// Serving checks that what answers at issuer is a development IdP signing with key (another node
// of a cluster serving the same provider), and returns the issuer it names.
func Serving(ctx context.Context, hc *http.Client, issuer string, key ed25519.PrivateKey) (string, error) {
	var disc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := fetchJSON(ctx, hc, issuer+"/.well-known/openid-configuration", &disc); err != nil {
		return "", err
	}
	if disc.Issuer == "" || disc.JWKSURI != disc.Issuer+"/jwks" {
		return "", fmt.Errorf("its discovery document (issuer %q) is not a development IdP's", disc.Issuer)
	}
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	if err := fetchJSON(ctx, hc, issuer+"/jwks", &set); err != nil {
		return "", err
	}
	want := thumbprint(key.Public().(ed25519.PublicKey))
	for _, k := range set.Keys {
		if k.Kid == want {
			return disc.Issuer, nil
		}
	}
	return "", errors.New("it signs with another key")
}

func fetchJSON(ctx context.Context, hc *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", url, res.StatusCode)
	}
	return json.NewDecoder(io.LimitReader(res.Body, maxDocument)).Decode(v)
}
