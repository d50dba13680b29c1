package contract

import (
	"encoding/json"
	"slices"

	"github.com/gocotal/cotal/wire"
)

// VoidSchema is the canonical void schema (SPEC §13.7): the schema a command declares for a side
// that carries no payload. Validation against it accepts only null (or an absent value).
const VoidSchema = `{"type":"null"}`

// voidDigest is the void schema's closure digest, computed once. VoidSchema is written in canonical
// form, so its bytes hash to its artifact digest, and it is self-contained, so its closure has no
// members.
var voidDigest = newClosure(wire.ContentDigest([]byte(VoidSchema)), nil).Digest

// VoidDigest returns the closure digest of the void schema: the inputDigest or outputDigest of
// every payload-free side.
func VoidDigest() string { return voidDigest }

// ArtifactDigest returns an artifact's digest, "sha256:<hex>" of its RFC 8785 canonical form
// (SPEC §13.7 "Content addressing"). It returns a contract-invalid error for bytes that are not
// one I-JSON value.
func ArtifactDigest(artifact []byte) (string, error) {
	d, err := wire.Digest(artifact)
	if err != nil {
		return "", invalidf("the artifact is not I-JSON: %v", err)
	}
	return d, nil
}

// Artifact is one contract artifact ready to publish: its canonical bytes and their digest.
type Artifact struct {
	Digest string
	Bytes  []byte
}

// canonicalArtifact canonicalizes b under the document bound and returns it with its digest.
func canonicalArtifact(b []byte) (Artifact, error) {
	c, err := wire.Canonicalize(b)
	if err != nil {
		return Artifact{}, invalidf("the artifact is not I-JSON: %v", err)
	}
	if len(c) > MaxDocumentBytes {
		return Artifact{}, invalidf("the artifact is %d bytes in canonical form, over the %d-byte bound", len(c), MaxDocumentBytes)
	}
	// The bytes are canonical, so the digest of the raw bytes is the digest of the canonical form.
	return Artifact{Digest: wire.ContentDigest(c), Bytes: c}, nil
}

// Closure is a resolved bundle's identity (SPEC §13.7 "Content addressing"): a root artifact, the
// artifacts reachable from it, and the manifest naming them, whose artifact digest is the closure
// digest. Contract identity (inputDigest, outputDigest, clusterDigests[]) is always a closure
// digest; a by-digest $ref inside a schema is always an artifact digest.
//
// The manifest is the canonical JSON of {v: 1, root, members}. Every digest in it carries the
// "sha256:" prefix. members are the artifacts reachable from root through by-digest references,
// sorted and without duplicates. root is named by its own field and is a member only when a
// reference leads back to it, as the reference implementation pins it; since a document cannot
// name a digest computed over itself, that takes a SHA-256 cycle, and in practice root is never a
// member. A self-contained document's members are empty.
//
// A Closure's slices are shared; they must not be modified.
type Closure struct {
	// Root is the root document's artifact digest.
	Root string
	// Members are the artifact digests reachable from Root by reference.
	Members []string
	// Manifest is the manifest's canonical bytes, an artifact of its own.
	Manifest []byte
	// Digest is the closure digest: the manifest's artifact digest.
	Digest string
}

// newClosure builds the closure of root over members (sorted and deduplicated here).
func newClosure(root string, members []string) Closure {
	members = slices.Compact(slices.Sorted(slices.Values(members)))
	if members == nil {
		members = []string{} // "members": [], never null
	}
	m, err := json.Marshal(struct {
		V       int      `json:"v"`
		Root    string   `json:"root"`
		Members []string `json:"members"`
	}{1, root, members})
	if err != nil {
		panic("contract: a manifest of strings does not encode: " + err.Error())
	}
	c, err := wire.Canonicalize(m)
	if err != nil {
		panic("contract: a manifest is not I-JSON: " + err.Error())
	}
	return Closure{Root: root, Members: members, Manifest: c, Digest: wire.ContentDigest(c)}
}
