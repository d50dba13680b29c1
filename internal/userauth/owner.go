package userauth

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/wire"
)

// OwnerSecretSize is the length in bytes of a space's owner secret.
const OwnerSecretSize = 32

// ownerContext separates the owner derivation from every other use of the secret. Changing it
// re-keys every owner in the space, so it is versioned.
const ownerContext = "cotal-owner-v1:"

// ownerBodyBytes is how much of the HMAC an owner keeps: 128 bits, 26 base32 characters.
const ownerBodyBytes = 16

var ownerEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// DeriveOwner returns the owner token of the IdP subject (issuer, subject) in the space whose
// owner secret is secret: "u_" followed by the first 16 bytes of
// HMAC-SHA256(secret, "cotal-owner-v1:" + JSON [issuer, subject]) in lowercase unpadded base32.
// The same human gets the same owner on every login and unlinkable owners in different spaces.
//
// The JSON array is encoded exactly as the reference's JSON.stringify encodes it, so a Go and a
// TypeScript auth service derive the same owner. It returns an error for a secret that is not
// OwnerSecretSize bytes, or an empty or non-UTF-8 issuer or subject.
func DeriveOwner(secret []byte, issuer, subject string) (string, error) {
	if len(secret) != OwnerSecretSize {
		return "", fmt.Errorf("derive owner: secret is %d bytes, want %d", len(secret), OwnerSecretSize)
	}
	if issuer == "" || subject == "" {
		return "", errors.New("derive owner: issuer and subject must be non-empty")
	}
	if !utf8.ValidString(issuer) || !utf8.ValidString(subject) {
		return "", errors.New("derive owner: issuer and subject must be valid UTF-8")
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ownerContext))
	mac.Write(jsonStringArray(issuer, subject))
	owner := "u_" + ownerEncoding.EncodeToString(mac.Sum(nil)[:ownerBodyBytes])
	if !wire.IsDerivedOwner(owner) {
		return "", fmt.Errorf("derive owner: %q is not a derived owner token", owner) // unreachable by construction
	}
	return owner, nil
}

// jsonStringArray encodes ss as a JSON array the way ECMAScript's JSON.stringify does: '"' and
// '\\' escaped, control characters as \b \t \n \f \r or \u00xx, everything else (including '<',
// '&', U+2028 and U+2029, which encoding/json would escape) verbatim. The input is valid UTF-8.
func jsonStringArray(ss ...string) []byte {
	const hex = "0123456789abcdef"
	var b bytes.Buffer
	b.WriteByte('[')
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		for j := 0; j < len(s); j++ {
			switch c := s[j]; c {
			case '"', '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case '\b':
				b.WriteString(`\b`)
			case '\t':
				b.WriteString(`\t`)
			case '\n':
				b.WriteString(`\n`)
			case '\f':
				b.WriteString(`\f`)
			case '\r':
				b.WriteString(`\r`)
			default:
				if c < 0x20 {
					b.WriteString(`\u00`)
					b.WriteByte(hex[c>>4])
					b.WriteByte(hex[c&0xf])
				} else {
					b.WriteByte(c)
				}
			}
		}
		b.WriteByte('"')
	}
	b.WriteByte(']')
	return b.Bytes()
}

// ownerSecretFile is owner-secret.json.
type ownerSecretFile struct {
	Ver    int    `json:"ver"`
	Secret string `json:"secret"`
}

const stateFileVer = 1

// LoadOrCreateOwnerSecret returns the space's owner secret kept at path (owner-secret.json),
// creating it with 32 random bytes (0600, create-only) when the file does not exist; the parent
// directory must exist. A file that exists but does not hold a version-1 secret of the right size
// is a *FileError and is never overwritten: a new secret would re-key every owner in the space.
func LoadOrCreateOwnerSecret(path string) ([]byte, error) {
	secret, err := loadOwnerSecret(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return secret, err
	}
	secret = make([]byte, OwnerSecretSize)
	_, _ = rand.Read(secret) // crypto/rand.Read never returns an error since Go 1.24
	doc, err := json.Marshal(ownerSecretFile{Ver: stateFileVer, Secret: base64.RawURLEncoding.EncodeToString(secret)})
	if err != nil {
		return nil, fmt.Errorf("encode owner secret: %w", err)
	}
	err = atomicfile.Create(path, append(doc, '\n'), 0o600)
	if errors.Is(err, fs.ErrExist) {
		return loadOwnerSecret(path) // another process created it first: use theirs
	}
	if err != nil {
		return nil, err
	}
	return secret, nil
}

func loadOwnerSecret(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, &FileError{Path: path, Err: err}
	}
	secret, err := parseOwnerSecret(raw)
	if err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	return secret, nil
}

// CheckOwnerSecret reports whether raw is an owner secret file LoadOrCreateOwnerSecret reads.
func CheckOwnerSecret(raw []byte) error {
	_, err := parseOwnerSecret(raw)
	return err
}

func parseOwnerSecret(raw []byte) ([]byte, error) {
	var f ownerSecretFile
	if err := decodeStrict(raw, &f); err != nil {
		return nil, fmt.Errorf("not an owner secret: %w", err)
	}
	if f.Ver != stateFileVer {
		return nil, fmt.Errorf("unknown version %d, want %d", f.Ver, stateFileVer)
	}
	secret, err := base64.RawURLEncoding.Strict().DecodeString(f.Secret)
	if err != nil || len(secret) != OwnerSecretSize {
		return nil, fmt.Errorf("secret is not %d bytes of unpadded base64url", OwnerSecretSize)
	}
	return secret, nil
}

// decodeStrict decodes one JSON value into v, refusing unknown fields and trailing data. State
// files are ours, so anything unexpected in them is corruption, not a newer writer.
func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON document")
	}
	return nil
}

// isLowerHex reports whether s is n lowercase hexadecimal digits.
func isLowerHex(s string, n int) bool {
	return len(s) == n && strings.Trim(s, "0123456789abcdef") == ""
}
