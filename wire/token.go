package wire

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Token returns s as one NATS subject token, the way SPEC §3 sanitises every routing token:
// surrounding white space is trimmed, every character outside [A-Za-z0-9_-] becomes '_', and an
// empty result becomes "_". The mapping is lossy and is never decoded back into a display name.
//
// Characters are counted as UTF-16 code units, as the reference implementation counts them, so a
// character outside the Basic Multilingual Plane becomes "__" and a Go peer builds the same subject
// as a TypeScript one. Each byte of invalid UTF-8 becomes one '_'.
func Token(s string) string {
	s = trimSpaceES(s)
	if s == "" {
		return "_"
	}
	if isTokenSafe(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if isTokenByte(c) {
				b.WriteByte(c)
			} else {
				b.WriteByte('_')
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		b.WriteByte('_')
		if r != utf8.RuneError && utf16.RuneLen(r) == 2 {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func isTokenByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

func isTokenSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isTokenByte(s[i]) {
			return false
		}
	}
	return s != ""
}

// isIdentityToken reports whether s matches [A-Za-z0-9_]+, the owner and actor grammar.
func isIdentityToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '-' || !isTokenByte(c) {
			return false
		}
	}
	return s != ""
}

// trimSpaceES trims what ECMAScript's String.prototype.trim trims (white space and line
// terminators). It differs from strings.TrimSpace on U+0085 and U+FEFF, and a subject token must
// come out the same in both implementations.
func trimSpaceES(s string) string {
	return strings.TrimFunc(s, isSpaceES)
}

func isSpaceES(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return 0x2000 <= r && r <= 0x200A
}

// utf16Len is the length of s as ECMAScript counts it: in UTF-16 code units. The SPEC's "at most
// N characters" limits are checked by the reference with String.length.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += max(utf16.RuneLen(r), 1)
	}
	return n
}

// DevOwner is the owner token of open (no login) deployments and static credentials (SPEC §2).
const DevOwner = "local"

// derivedOwnerPrefix starts every derived owner token: "u_" followed by 26 base32-lower characters.
const derivedOwnerPrefix = "u_"

const derivedOwnerBodyLen = 26

// validateOwner checks that owner matches the owner and actor grammar [A-Za-z0-9_]+. Identity
// tokens are never sanitised: a '.', '*', '>' or '-' in an id would break out of its subject lane
// or make the dash-form ambiguous, so it is an error rather than a rewrite.
func validateOwner(owner string) error {
	return validateIdentity("owner", owner)
}

// ValidateActor checks that actor matches the owner and actor grammar [A-Za-z0-9_]+.
func ValidateActor(actor string) error {
	return validateIdentity("actor", actor)
}

func validateIdentity(field, s string) error {
	if !isIdentityToken(s) {
		return Invalid(field, s, "must be one token of [A-Za-z0-9_] (no '.', '*', '>' or '-')")
	}
	return nil
}

// IsDerivedOwner reports whether owner has the derived owner token format u_[a-z2-7]{26}, which
// no NATS nkey can have (nkeys are 56 upper-case characters without '_').
func IsDerivedOwner(owner string) bool {
	if len(owner) != len(derivedOwnerPrefix)+derivedOwnerBodyLen || !strings.HasPrefix(owner, derivedOwnerPrefix) {
		return false
	}
	for i := len(derivedOwnerPrefix); i < len(owner); i++ {
		if c := owner[i]; !('a' <= c && c <= 'z' || '2' <= c && c <= '7') {
			return false
		}
	}
	return true
}

// isPrincipalOwner reports whether owner may be trusted as the owner of a delivery: a derived
// owner token or DevOwner. A subject that splits but carries anything else in its owner slot (an
// nkey from the pre-principal grammar, say) is not surfaced (SPEC §3, §12 item 5).
func isPrincipalOwner(owner string) bool {
	return owner == DevOwner || IsDerivedOwner(owner)
}

// Principal is an instance's wire identity, the pair (owner, actor) of SPEC §2. Its zero value is
// not a principal; values come from NewPrincipal or ParsePrincipal, which validate both tokens, so
// a Principal always renders into a subject without further checks. It is a comparable value.
type Principal struct {
	owner, actor string
}

// NewPrincipal returns the principal (owner, actor), or a *ValidationError naming the token that
// breaks the [A-Za-z0-9_]+ grammar.
func NewPrincipal(owner, actor string) (Principal, error) {
	if err := validateOwner(owner); err != nil {
		return Principal{}, err
	}
	if err := ValidateActor(actor); err != nil {
		return Principal{}, err
	}
	return Principal{owner: owner, actor: actor}, nil
}

// ParsePrincipal parses the dot-form "<owner>.<actor>" (an AgentCard.id, a from.id, a presence
// key). It returns a *ValidationError when s is not exactly two valid tokens.
func ParsePrincipal(s string) (Principal, error) {
	owner, actor, ok := strings.Cut(s, ".")
	if !ok {
		return Principal{}, Invalid("principal", s, `must be the dot-form "<owner>.<actor>"`)
	}
	p, err := NewPrincipal(owner, actor)
	if err != nil {
		return Principal{}, Within("principal", err)
	}
	return p, nil
}

// Owner returns the owner token.
func (p Principal) Owner() string { return p.owner }

// Actor returns the actor token.
func (p Principal) Actor() string { return p.actor }

// IsZero reports whether p is the zero value, which names no principal.
func (p Principal) IsZero() bool { return p.owner == "" }

// String returns the dot-form "<owner>.<actor>" used in subjects, from.id, AgentCard.id and
// presence keys.
func (p Principal) String() string {
	if p.IsZero() {
		return ""
	}
	return p.owner + "." + p.actor
}

// Name returns the dash-form "<owner>-<actor>" used in JetStream names, which may not contain '.'.
func (p Principal) Name() string {
	if p.IsZero() {
		return ""
	}
	return p.owner + "-" + p.actor
}

// HasPrincipalOwner reports whether p's owner is a derived owner token or DevOwner.
func (p Principal) HasPrincipalOwner() bool { return isPrincipalOwner(p.owner) }

// LifecycleUID names one incarnation of a principal (SPEC §13.1): [a-z0-9]{26,32}. It is part of
// every per-lifecycle resource name, so a same-name successor never inherits a predecessor's
// durables or grants.
type LifecycleUID string

const (
	minLifecycleUIDLen = 26
	maxLifecycleUIDLen = 32
)

// ParseLifecycleUID validates s as a lifecycle UID and returns a *ValidationError otherwise.
func ParseLifecycleUID(s string) (LifecycleUID, error) {
	if len(s) < minLifecycleUIDLen || len(s) > maxLifecycleUIDLen {
		return "", Invalidf("lifecycleUid", s, "must be %d to %d characters of [a-z0-9]", minLifecycleUIDLen, maxLifecycleUIDLen)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return "", Invalidf("lifecycleUid", s, "must be %d to %d characters of [a-z0-9]", minLifecycleUIDLen, maxLifecycleUIDLen)
		}
	}
	return LifecycleUID(s), nil
}

// lowerBase32 renders random bytes in [a-z2-7], a subset of both the lifecycle UID and the connId
// alphabets.
var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewLifecycleUID returns a fresh lifecycle UID of 32 characters carrying 160 random bits (the
// SPEC asks for at least 128).
func NewLifecycleUID() LifecycleUID {
	var b [20]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error since Go 1.24
	return LifecycleUID(lowerBase32.EncodeToString(b[:]))
}

// Lifecycle is one incarnation of a principal: the pair (Principal, LifecycleUID).
type Lifecycle struct {
	Principal Principal
	UID       LifecycleUID
}

// String returns the subject and KV-key form "<owner>.<actor>.<uid>" (ACL keys, member rows,
// dinbox and dlv subject tails).
func (l Lifecycle) String() string { return l.Principal.String() + "." + string(l.UID) }

// Name returns the JetStream-name form "<owner>-<actor>-<uid>" (dm_, dlv_ and chathist_ names).
func (l Lifecycle) Name() string { return l.Principal.Name() + "-" + string(l.UID) }

// ParseLifecycle parses the dot-form "<owner>.<actor>.<uid>", returning a *ValidationError when s
// is not exactly that shape.
func ParseLifecycle(s string) (Lifecycle, error) {
	i := strings.LastIndexByte(s, '.')
	if i < 0 {
		return Lifecycle{}, Invalid("lifecycle", s, `must be the dot-form "<owner>.<actor>.<lifecycleUid>"`)
	}
	p, err := ParsePrincipal(s[:i])
	if err != nil {
		return Lifecycle{}, Within("lifecycle", err)
	}
	uid, err := ParseLifecycleUID(s[i+1:])
	if err != nil {
		return Lifecycle{}, Within("lifecycle", err)
	}
	return Lifecycle{Principal: p, UID: uid}, nil
}

// ConnID is the per-connection reply-inbox nonce of SPEC §2 and §10: [A-Za-z0-9_-]{8,120}. It
// fills the grant "_INBOX_<connId>.>", so it may hold no subject metacharacter that would widen the
// grant to other connections' inboxes.
type ConnID string

const (
	minConnIDLen = 8
	maxConnIDLen = 120
)

// inboxPrefixStem starts every per-connection inbox prefix.
const inboxPrefixStem = "_INBOX_"

// ParseConnID validates s as a connection id and returns a *ValidationError otherwise.
func ParseConnID(s string) (ConnID, error) {
	if len(s) < minConnIDLen || len(s) > maxConnIDLen || !isTokenSafe(s) {
		return "", Invalidf("connId", s, "must be %d to %d characters of [A-Za-z0-9_-]", minConnIDLen, maxConnIDLen)
	}
	return ConnID(s), nil
}

// NewConnID returns a fresh random connection id of 26 characters (130 bits).
func NewConnID() ConnID {
	var b [17]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error since Go 1.24
	return ConnID(lowerBase32.EncodeToString(b[:])[:26])
}

// InboxPrefix returns "_INBOX_<connId>", the inbox prefix a client must set before its first
// request, pull or watch (SPEC §10).
func (c ConnID) InboxPrefix() string { return inboxPrefixStem + string(c) }
