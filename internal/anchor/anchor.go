// Package anchor is the trust anchors of SPEC §13.10: the signing keys a space registers as
// signer.<keyId> records, the one signature encoding every signed artifact uses, and the checks a
// verifier runs before it trusts a signature.
//
// A signature is Ed25519 (an nkeys key) over the UTF-8 RFC 8785 canonical JSON of the artifact
// with its sig member absent, carried as unpadded base64url. A verifier resolves the signing key
// afresh in the registry for every check and fails closed: an unknown key, a revoked one, one
// used outside its window or for a role it does not carry, one whose scope does not cover what
// it signed, or a signature that does not verify, is refused.
package anchor

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/wire"
)

// Role is an artifact family a key may sign.
type Role string

// The roles of SPEC §13.10.
const (
	RoleHandles     Role = "handles"
	RoleTraits      Role = "traits"
	RoleReceipts    Role = "receipts"
	RoleResume      Role = "resume"
	RoleSessions    Role = "sessions"
	RoleAuthzSlots  Role = "authz-slots"
	RoleObligations Role = "obligations"
	RolePayments    Role = "payments"
)

// Roles lists every role.
var Roles = []Role{RoleHandles, RoleTraits, RoleReceipts, RoleResume, RoleSessions, RoleAuthzSlots, RoleObligations, RolePayments}

// Anchor is one registered signing key: its record's spec, and its status's revocation.
type Anchor struct {
	KeyID string `json:"keyId"`
	// PublicKey is the nkeys-encoded Ed25519 public key signatures verify against.
	PublicKey string `json:"publicKey"`
	// Owner is the principal or reverse-DNS domain the key belongs to.
	Owner string `json:"owner"`
	// OwnerLifecycleUID binds the key to one lifecycle of a principal owner.
	OwnerLifecycleUID string `json:"ownerLifecycleUid,omitempty"`
	Roles             []Role `json:"roles"`
	// Scope is each role's ceiling: the subjects (dot prefixes) the key may sign for. A role
	// with no entry covers nothing.
	Scope map[Role][]string `json:"scope,omitempty"`
	// ValidFrom and ValidTo bound when the key may sign, both inclusive.
	ValidFrom wire.EpochMillis `json:"validFrom"`
	ValidTo   wire.EpochMillis `json:"validTo"`
	// Revoked is the status's revocation: no new verification passes.
	Revoked bool `json:"-"`
}

// Status is an anchor record's status half.
type Status struct {
	Revoked bool `json:"revoked"`
	// At is when it was revoked.
	At wire.EpochMillis `json:"at,omitempty"`
}

// Validate checks the anchor's shape: a keyId token, a public key nkeys parses, an owner, known
// roles, a scope naming only known roles with non-empty entries, and a window that is not
// backwards.
func (a *Anchor) Validate() error {
	if err := ValidateKeyID(a.KeyID); err != nil {
		return err
	}
	if _, err := nkeys.FromPublicKey(a.PublicKey); err != nil {
		return wire.Invalid("publicKey", a.PublicKey, "must be an nkeys public key")
	}
	if a.Owner == "" || len(a.Owner) > 256 {
		return wire.Invalid("owner", a.Owner, "must be 1 to 256 characters")
	}
	for _, r := range a.Roles {
		if !slices.Contains(Roles, r) {
			return wire.Invalidf("roles", string(r), "must be among %q", Roles)
		}
	}
	for r, entries := range a.Scope {
		if !slices.Contains(Roles, r) {
			return wire.Invalidf("scope", string(r), "names no role; roles are %q", Roles)
		}
		if slices.Contains(entries, "") {
			return wire.Invalid("scope."+string(r), "", "entries must not be empty")
		}
	}
	if a.ValidTo < a.ValidFrom {
		return wire.Invalid("validTo", fmt.Sprint(a.ValidTo), "must not be before validFrom")
	}
	return nil
}

// ValidateKeyID checks a key id: 1 to 64 characters of [A-Za-z0-9_-], one subject token.
func ValidateKeyID(id string) error {
	if len(id) > 64 || wire.ValidateIDToken("keyId", id) != nil {
		return wire.Invalid("keyId", id, "must be 1 to 64 characters of [A-Za-z0-9_-]")
	}
	return nil
}

// Resolver reads an anchor afresh: nil, nil for a key the registry does not hold.
type Resolver func(keyID string) (*Anchor, error)

// refuse is a verification's refusal, with the catalog code a caller answers.
func refuse(code wire.ErrorCode, format string, args ...any) error {
	return wire.NewEndpointError(code, wire.OutcomeNotExecuted, format, args...)
}

// Use resolves keyID afresh for one signature made at signedAt by a key of role, and refuses an
// unknown key, a revoked one, one without the role, and one outside its window then. The window
// binds the signing; revocation binds the verification.
func Use(resolve Resolver, keyID string, role Role, signedAt wire.EpochMillis) (*Anchor, error) {
	if keyID == "" {
		return nil, refuse(wire.CodePermissionDenied, "the artifact names no signing key (SPEC §13.10)")
	}
	a, err := resolve(keyID)
	switch {
	case err != nil:
		return nil, refuse(wire.CodeUnavailable, "read anchor %s: %v; verification fails closed", keyID, err)
	case a == nil:
		return nil, refuse(wire.CodePermissionDenied, "signing key %s is not a registered anchor", keyID)
	case a.KeyID != keyID || a.Validate() != nil:
		return nil, refuse(wire.CodeFailedPrecondition, "the anchor record of %s is garbled", keyID)
	case a.Revoked:
		return nil, refuse(wire.CodePermissionDenied, "signing key %s is revoked", keyID)
	case !slices.Contains(a.Roles, role):
		return nil, refuse(wire.CodePermissionDenied, "signing key %s does not carry the %s role", keyID, role)
	case signedAt < a.ValidFrom || signedAt > a.ValidTo:
		return nil, refuse(wire.CodePermissionDenied, "signing key %s was outside its window (%d..%d) at %d", keyID, a.ValidFrom, a.ValidTo, signedAt)
	}
	return a, nil
}

// Covers refuses a subject role's scope of a does not cover: an entry covers itself and the
// subjects under it (ai.cotal covers ai.cotal.guarded); a role with no entries covers nothing.
func (a *Anchor) Covers(role Role, subject string) error {
	entries := a.Scope[role]
	for _, e := range entries {
		if subject == e || strings.HasPrefix(subject, e+".") {
			return nil
		}
	}
	return refuse(wire.CodePermissionDenied, "signing key %s's %s scope %q does not cover %s", a.KeyID, role, entries, subject)
}

// sigLen is the length of an unpadded base64url Ed25519 signature.
const sigLen = 86

// SignatureInput returns the bytes a signature covers: the RFC 8785 canonical JSON of the
// artifact object raw with its sig member removed.
func SignatureInput(raw []byte) ([]byte, error) {
	var o map[string]json.RawMessage
	if err := json.Unmarshal(raw, &o); err != nil || o == nil {
		return nil, wire.Invalid("artifact", "", "must be one JSON object")
	}
	delete(o, "sig")
	unsigned, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	return wire.Canonicalize(unsigned)
}

// Sign returns the signature of input under kp, unpadded base64url.
func Sign(kp nkeys.KeyPair, input []byte) (string, error) {
	sig, err := kp.Sign(input)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(sig), nil
}

// Verify refuses sig unless it is a signature of input by a's key.
func (a *Anchor) Verify(input []byte, sig string) error {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if len(sig) != sigLen || err != nil {
		return refuse(wire.CodePermissionDenied, "sig is not an unpadded base64url Ed25519 signature")
	}
	pub, err := nkeys.FromPublicKey(a.PublicKey)
	if err != nil {
		return refuse(wire.CodePermissionDenied, "anchor %s's public key does not parse: %v", a.KeyID, err)
	}
	if err := pub.Verify(input, raw); err != nil {
		return refuse(wire.CodePermissionDenied, "the signature does not verify against anchor %s", a.KeyID)
	}
	return nil
}

// Currency checks a timed artifact's window at now against its ceiling: exp after iat, nbf (iat
// when absent) not after exp, the span from the earlier of them within ceiling, no iat in the
// future, now inside [nbf, exp], and exp no further than ceiling past now.
func Currency(what string, iat wire.EpochMillis, nbf *wire.EpochMillis, exp wire.EpochMillis, now time.Time, ceiling time.Duration) error {
	n, start := iat, iat
	if nbf != nil {
		n, start = *nbf, min(iat, *nbf)
	}
	at, span := wire.MillisOf(now), wire.EpochMillis(ceiling.Milliseconds())
	switch {
	case exp <= iat:
		return refuse(wire.CodeContractInvalid, "%s expires (%d) at or before it was issued (%d)", what, exp, iat)
	case n > exp:
		return refuse(wire.CodeContractInvalid, "%s opens (%d) after it expires (%d)", what, n, exp)
	case exp-start > span:
		return refuse(wire.CodeContractInvalid, "%s is valid %d ms, past its %s ceiling", what, exp-start, ceiling)
	case iat > at:
		return refuse(wire.CodePermissionDenied, "%s was issued in the future (%d, now %d)", what, iat, at)
	case at < n:
		return refuse(wire.CodeFailedPrecondition, "%s is not valid before %d (now %d)", what, n, at)
	case at > exp:
		return refuse(wire.CodeExpired, "%s expired at %d (now %d)", what, exp, at)
	case exp > at+span:
		return refuse(wire.CodePermissionDenied, "%s outlives its %s ceiling from now", what, ceiling)
	}
	return nil
}
