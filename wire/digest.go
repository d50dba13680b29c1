package wire

import (
	"crypto/sha256"
	"encoding/hex"
)

// digestPrefix starts every content digest on the wire.
const digestPrefix = "sha256:"

// sha256Digest returns "sha256:<64 lower-case hex>" of b.
func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return digestPrefix + hex.EncodeToString(sum[:])
}

// IsDigest reports whether s has the form sha256:<64 lower-case hex digits>.
func IsDigest(s string) bool {
	if len(s) != len(digestPrefix)+sha256.Size*2 || s[:len(digestPrefix)] != digestPrefix {
		return false
	}
	for i := len(digestPrefix); i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ContentDigest returns "sha256:<hex>" of raw bytes, never re-canonicalized: the identity an
// artifact part carries (SPEC §5) and a request's authDigest (SPEC §13.4).
func ContentDigest(content []byte) string { return sha256Digest(content) }

// VerifyArtifact checks fetched bytes against an artifact part's digest, as a receiver must before
// using them (SPEC §5). It returns a *ValidationError on a mismatch. It never looks at Size.
func VerifyArtifact(p *Part, content []byte) error {
	if p.Kind != PartArtifact {
		return Invalid("kind", string(p.Kind), "is not an artifact part")
	}
	if got := sha256Digest(content); got != p.Digest {
		return Invalidf("digest", p.Digest, "does not match the fetched bytes (%s)", got)
	}
	return nil
}
