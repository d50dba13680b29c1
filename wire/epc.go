package wire

// The contract stream of SPEC §13.7 and §13.12: the space's content-addressed contract artifacts,
// one immutable message per digest subject.

// KindEpc is the contract stream's rail: epc.<digest-hex>.
const KindEpc SubjectKind = "epc"

// ContractSubject returns "cotal.<space>.epc.<hexDigest>", the subject of the artifact whose
// digest is "sha256:<hexDigest>". The subject token is the 64 lowercase hex digits alone, without
// the "sha256:" prefix (SPEC §13.7); anything else is a *ValidationError, so no wildcard or
// malformed token ever names an artifact.
func (s Space) ContractSubject(hexDigest string) (string, error) {
	if !IsDigest(digestPrefix + hexDigest) {
		return "", Invalid("digest", hexDigest, "must be 64 lowercase hex digits, without the sha256: prefix")
	}
	return s.Subject(KindEpc, hexDigest), nil
}
