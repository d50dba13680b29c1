package wire

import (
	"crypto/rand"
	"encoding/base64"
	"strconv"
	"strings"
)

// The endpoint grammar of SPEC §13.2: endpoint names, commands, the request and reply subjects
// of the ep rails (legacy "ep" and versioned "ep.v1"), and the planes an endpoint publishes on.

// The subject kinds of the endpoint surface (token 2 of the subject).
const (
	KindEp  SubjectKind = "ep"  // requests and replies: ep[.v1].<one|all|inst|reply>...
	KindEpe SubjectKind = "epe" // events: epe.<endpoint>.<instanceId>.<epoch>.<topic...>
	KindEpf SubjectKind = "epf" // canonical facts: epf.<endpoint>.<topic...>
)

// VersionedRail is the token after "ep" on the versioned rail (SPEC §13.15).
const VersionedRail = "v1"

// Bounds of the endpoint rails (SPEC §13.2).
const (
	// maxEndpointTokenLength bounds an endpoint token and every owner, actor, nonce and id token.
	maxEndpointTokenLength = 64
	// maxCommandLength bounds a command token.
	maxCommandLength = 32
	// maxEndpointSubjectLength bounds a whole request or reply subject, in bytes.
	maxEndpointSubjectLength = 1024
	// minNonceLength is the shortest nonce: 22 characters of base64url carry 128 bits.
	minNonceLength = 22
	// generationLength is the length of an issued caller's generation token (lowercase hex).
	generationLength = 32
)

// Reserved command names (SPEC §13.2, §13.5–§13.7).
const (
	CommandDescribe = "describe" // every endpoint serves it: its descriptor
	CommandCancel   = "cancel"   // cancel a goal
	CommandLease    = "lease"    // take a work item's lease
	CommandCommit   = "commit"   // commit a leased work item
	CommandResume   = "resume"   // resume a checkpoint
)

// ManagerEndpoint is the contract's manager endpoint: the space's agent supervisor.
const ManagerEndpoint EndpointName = "manager"

// EndpointName is an endpoint's name (SPEC §13.2): one or more DNS-shaped labels of
// [a-z0-9]([a-z0-9-]*[a-z0-9])? joined by '.'. A single-label name (manager, delivery) is reserved
// for the contract's own endpoints; a third party's is reverse-DNS.
type EndpointName string

// ParseEndpointName validates s as an endpoint name whose wire token fits the token bound.
func ParseEndpointName(s string) (EndpointName, error) {
	if s == "" || len(s) > maxEndpointTokenLength {
		return "", Invalidf("endpoint", s, "must be 1 to %d characters", maxEndpointTokenLength)
	}
	for label := range strings.SplitSeq(s, ".") {
		if !isEndpointLabel(label) {
			return "", Invalid("endpoint", s, "each dot-separated label must match [a-z0-9]([a-z0-9-]*[a-z0-9])?")
		}
	}
	return EndpointName(s), nil
}

// ParseEndpointToken decodes an endpoint's wire token ('_' for '.') back into its name.
func ParseEndpointToken(tok string) (EndpointName, error) {
	return ParseEndpointName(strings.ReplaceAll(tok, "_", "."))
}

func isEndpointLabel(l string) bool {
	if l == "" || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		if c := l[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// Token returns the name as one subject token, each '.' replaced by '_'. The mapping is bijective
// because no label holds '_'.
func (n EndpointName) Token() string { return strings.ReplaceAll(string(n), ".", "_") }

// reserved reports whether n is a single-label name, reserved for the contract's own endpoints.
func (n EndpointName) reserved() bool { return n != "" && !strings.Contains(string(n), ".") }

// ValidateCommand checks a command name against [a-z0-9-]{1,32}.
func ValidateCommand(c string) error {
	if c == "" || len(c) > maxCommandLength {
		return Invalidf("command", c, "must be 1 to %d characters of [a-z0-9-]", maxCommandLength)
	}
	for i := 0; i < len(c); i++ {
		if ch := c[i]; !('a' <= ch && ch <= 'z' || '0' <= ch && ch <= '9' || ch == '-') {
			return Invalidf("command", c, "must be 1 to %d characters of [a-z0-9-]", maxCommandLength)
		}
	}
	return nil
}

// Addressing is where a request routes (SPEC §13.2), never which verb it is.
type Addressing string

// The three addressing modes.
const (
	AddressOne  Addressing = "one"  // queue-group anycast: exactly one member of the class
	AddressAll  Addressing = "all"  // scatter: every instance
	AddressInst Addressing = "inst" // one instance, by its id
)

// AddressReply is the token at the addressing's place on the reply rail,
// "ep[.v1].reply.<endpoint>.<instanceId>.<epoch>...": no request routes there.
const AddressReply = "reply"

// AuthzMode is a targeted command's authorization-mode token (SPEC §13.2). The empty mode is an
// untargeted command's: no mode token at all.
type AuthzMode string

// The seven authorization modes.
const (
	ModeNone   AuthzMode = ""
	ModeSelf   AuthzMode = "self"   // the target is the caller; no target tokens, no body target
	ModeOwner  AuthzMode = "owner"  // <tOwner> pinned to the caller's own owner
	ModeAny    AuthzMode = "any"    // any target owner; operator and admin only
	ModeChild  AuthzMode = "child"  // the handler checks spawner == caller
	ModeLedger AuthzMode = "ledger" // the handler reads the authorization ledger
	ModeHandle AuthzMode = "handle" // full target triple pinned at handle redemption
	ModeExact  AuthzMode = "exact"  // full target triple pinned by the owning profile
)

// AuthzModes lists every mode token.
var AuthzModes = []AuthzMode{ModeSelf, ModeOwner, ModeAny, ModeChild, ModeLedger, ModeHandle, ModeExact}

// ParseAuthzMode returns s as a mode token ("" is not one).
func ParseAuthzMode(s string) (AuthzMode, error) {
	if m := AuthzMode(s); m.TargetTokens() >= 0 && m != ModeNone {
		return m, nil
	}
	return "", Invalidf("authz", s, "must be one of %q", AuthzModes)
}

// TargetTokens returns how many target tokens follow the mode token: 0 for self, 1 (<tOwner>)
// for owner, any, child and ledger, 3 (<tOwner>.<tActor>.<tUid>) for handle and exact, and 0 for
// the untargeted form. It returns -1 for a word that is not a mode.
func (m AuthzMode) TargetTokens() int {
	switch m {
	case ModeNone, ModeSelf:
		return 0
	case ModeOwner, ModeAny, ModeChild, ModeLedger:
		return 1
	case ModeHandle, ModeExact:
		return 3
	}
	return -1
}

// EndpointTarget is the subject's target block: TargetTokens of the mode decide which fields are
// set (Owner for the one-token modes; Owner, Actor and UID for handle and exact).
type EndpointTarget struct {
	Owner string
	Actor string
	UID   LifecycleUID
}

// EndpointRoute is every token of a request subject on the ep rails: where it routes, the command,
// the authorization mode and target block, the caller, and the nonce.
type EndpointRoute struct {
	// Generation is the issued caller's generation (32 lowercase hex) on the versioned rail
	// (ep.v1); empty on the legacy ep rail.
	Generation string
	Address    Addressing
	Endpoint   EndpointName
	// Instance is the addressed instance, on the inst rail only.
	Instance LifecycleUID
	Command  string
	Mode     AuthzMode
	Target   EndpointTarget
	Caller   Lifecycle
	Nonce    string
}

// NewNonce returns a fresh request nonce: 32 characters of base64url carrying 192 random bits.
func NewNonce() string {
	var b [24]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error since Go 1.24
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// validateNonce checks a nonce against [A-Za-z0-9_-]{22,64}.
func validateNonce(n string) error {
	if len(n) < minNonceLength || !isIDToken(n) {
		return Invalidf("nonce", n, "must be %d to %d characters of [A-Za-z0-9_-]", minNonceLength, maxEndpointTokenLength)
	}
	return nil
}

// ValidateIDToken checks a request, goal, timer, checkpoint or session id against the id token
// grammar [A-Za-z0-9_-]{1,64}.
func ValidateIDToken(field, id string) error {
	if !isIDToken(id) {
		return Invalid(field, id, "must be 1 to 64 characters of [A-Za-z0-9_-]")
	}
	return nil
}

// ValidateGeneration checks an issued caller's generation: 32 lowercase hex characters.
func ValidateGeneration(g string) error {
	if len(g) != generationLength || !isLowerHex(g) {
		return Invalidf("generation", g, "must be %d lowercase hex characters", generationLength)
	}
	return nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// validateEndpointIdentity checks a caller or target owner/actor token: an identity token within the
// rails' bound.
func validateEndpointIdentity(field, s string) error {
	if len(s) > maxEndpointTokenLength {
		return Invalidf(field, s, "must be at most %d characters", maxEndpointTokenLength)
	}
	return validateIdentity(field, s)
}

// Validate checks every token of the route against SPEC §13.2: the addressing, the endpoint, the
// instance (on inst only), the command, the mode and exactly the target tokens it carries, the
// caller triple, the nonce and, on the versioned rail, the generation.
func (r EndpointRoute) Validate() error {
	if err := r.validateRoute(); err != nil {
		return err
	}
	return validateNonce(r.Nonce)
}

// validateRoute checks every token Validate checks but the nonce.
func (r EndpointRoute) validateRoute() error {
	switch r.Address {
	case AddressOne, AddressAll:
		if r.Instance != "" {
			return Invalid("instanceId", string(r.Instance), "is carried only on the inst rail")
		}
	case AddressInst:
		if _, err := ParseLifecycleUID(string(r.Instance)); err != nil {
			return Within("instanceId", err)
		}
	default:
		return Invalidf("addressing", string(r.Address), "must be %q, %q or %q", AddressOne, AddressAll, AddressInst)
	}
	if _, err := ParseEndpointName(string(r.Endpoint)); err != nil {
		return err
	}
	if err := ValidateCommand(r.Command); err != nil {
		return err
	}
	if err := r.validateTarget(); err != nil {
		return err
	}
	if err := validateEndpointIdentity("caller owner", r.Caller.Principal.owner); err != nil {
		return err
	}
	if !isPrincipalOwner(r.Caller.Principal.owner) {
		return Invalid("caller owner", r.Caller.Principal.owner, `must be "local" or "u_" and 26 base32 characters`)
	}
	if err := validateEndpointIdentity("caller actor", r.Caller.Principal.actor); err != nil {
		return err
	}
	if _, err := ParseLifecycleUID(string(r.Caller.UID)); err != nil {
		return Within("caller", err)
	}
	if r.Generation != "" {
		return ValidateGeneration(r.Generation)
	}
	return nil
}

func (r EndpointRoute) validateTarget() error {
	n := r.Mode.TargetTokens()
	if n < 0 {
		return Invalidf("authz", string(r.Mode), "must be one of %q or empty", AuthzModes)
	}
	t := r.Target
	if n == 0 {
		if t != (EndpointTarget{}) {
			return Invalidf("target", t.Owner, "mode %q carries no target tokens", r.Mode)
		}
		return nil
	}
	if err := validateEndpointIdentity("target owner", t.Owner); err != nil {
		return err
	}
	if n == 1 {
		if t.Actor != "" || t.UID != "" {
			return Invalidf("target", t.Actor, "mode %q carries only the target owner", r.Mode)
		}
		return nil
	}
	if err := validateEndpointIdentity("target actor", t.Actor); err != nil {
		return err
	}
	if _, err := ParseLifecycleUID(string(t.UID)); err != nil {
		return Within("target", err)
	}
	return nil
}

// railTokens returns the tokens after the space: "ep" or "ep.v1".
func (r EndpointRoute) rail() []string {
	if r.Generation != "" {
		return []string{string(KindEp), VersionedRail}
	}
	return []string{string(KindEp)}
}

// modeBlock returns the mode token and its target tokens.
func (r EndpointRoute) modeBlock() []string {
	switch r.Mode.TargetTokens() {
	case 1:
		return []string{string(r.Mode), r.Target.Owner}
	case 3:
		return []string{string(r.Mode), r.Target.Owner, r.Target.Actor, string(r.Target.UID)}
	}
	if r.Mode == ModeSelf {
		return []string{string(ModeSelf)}
	}
	return nil
}

// callerTail returns <owner>.<actor>.<uid>[.<generation>].<nonce>.
func (r EndpointRoute) callerTail() []string {
	t := []string{r.Caller.Principal.owner, r.Caller.Principal.actor, string(r.Caller.UID)}
	if r.Generation != "" {
		t = append(t, r.Generation)
	}
	return append(t, r.Nonce)
}

// join validates the assembled subject's length.
func endpointSubject(s Space, tokens []string) (string, error) {
	subj := Root + "." + s.Token() + "." + strings.Join(tokens, ".")
	if len(subj) > maxEndpointSubjectLength {
		return "", Invalidf("subject", subj, "must be at most %d bytes", maxEndpointSubjectLength)
	}
	return subj, nil
}

// RequestSubject returns the request subject of r in space s:
//
//	cotal.<space>.ep[.v1].one|all.<endpoint>.<command>[.<authz>[.<targets>]].<owner>.<actor>.<uid>[.<generation>].<nonce>
//	cotal.<space>.ep[.v1].inst.<endpoint>.<instanceId>.<command>[...same tail]
//
// It fails on any token outside the grammar and on a subject over 1024 bytes.
func (s Space) RequestSubject(r EndpointRoute) (string, error) {
	if err := r.Validate(); err != nil {
		return "", err
	}
	t := append(r.rail(), string(r.Address), r.Endpoint.Token())
	if r.Address == AddressInst {
		t = append(t, string(r.Instance))
	}
	t = append(t, r.Command)
	t = append(t, r.modeBlock()...)
	t = append(t, r.callerTail()...)
	return endpointSubject(s, t)
}

// ReplySubject returns the reply subject derived from the request r, answered by instance at
// epoch: cotal.<space>.ep[.v1].reply.<endpoint>.<instanceId>.<epoch>.<owner>.<actor>.<uid>[.<generation>].<nonce>.
// A responder derives it from the authenticated request subject and never from msg.Reply or
// the payload.
func (s Space) ReplySubject(r EndpointRoute, instance LifecycleUID, epoch int64) (string, error) {
	if _, err := ParseLifecycleUID(string(instance)); err != nil {
		return "", Within("instanceId", err)
	}
	if epoch < 0 {
		return "", Invalid("epoch", strconv.FormatInt(epoch, 10), "must not be negative")
	}
	return endpointSubject(s, r.replyTokens(r.Endpoint.Token(), string(instance), strconv.FormatInt(epoch, 10)))
}

// replyTokens returns the reply rail's tokens after the space, with the three responder tokens
// given.
func (r EndpointRoute) replyTokens(endpoint, instance, epoch string) []string {
	return append(append(r.rail(), AddressReply, endpoint, instance, epoch), r.callerTail()...)
}

// noResponders fills the responder's three places on the no-responders sentinel: no endpoint
// token can be "_nr" (a label never starts with '_'), so no responder's grant reaches it.
const noResponders = "_nr"

// ReplyFilter returns the subject every reply to the request r arrives on, from any responder:
// "cotal.<space>.ep[.v1].reply.*.*.*.<owner>.<actor>.<uid>[.<generation>].<nonce>". A caller
// subscribes it before it publishes.
func (s Space) ReplyFilter(r EndpointRoute) string {
	return Root + "." + s.Token() + "." + strings.Join(r.replyTokens("*", "*", "*"), ".")
}

// NoRespondersSubject returns the reserved no-responders sentinel of the request r, the reply rail
// with "_nr" in the responder's three places: a caller names it as the request's transport reply,
// so the broker's no-responders status lands there, where no responder may publish. Only that
// status, on that subject, proves nothing received the request.
func (s Space) NoRespondersSubject(r EndpointRoute) string {
	return Root + "." + s.Token() + "." + strings.Join(r.replyTokens(noResponders, noResponders, noResponders), ".")
}

// ReplyReadGrant returns a caller's reply rail: "ep.reply.*.*.*.<owner>.<actor>.<uid>.*", or on
// the versioned rail "ep.v1.reply.*.*.*.<owner>.<actor>.<uid>.<generation>.*".
func (s Space) ReplyReadGrant(caller Lifecycle, generation string) string {
	t := []string{string(KindEp)}
	if generation != "" {
		t = append(t, VersionedRail)
	}
	t = append(t, AddressReply, "*", "*", "*", caller.Principal.owner, caller.Principal.actor, string(caller.UID))
	if generation != "" {
		t = append(t, generation)
	}
	return Root + "." + s.Token() + "." + strings.Join(append(t, "*"), ".")
}

// EndpointReplyFrom is what a reply subject says: who answered (the endpoint, instance and epoch
// the responder's grant pins) and whom (the caller tail of the request).
type EndpointReplyFrom struct {
	Endpoint EndpointName
	Instance LifecycleUID
	Epoch    int64
}

// ParseReplySubject reads the answering instance and epoch off a reply subject of space s; the
// caller checks the rest of the subject is the one it subscribed.
func (s Space) ParseReplySubject(subject string) (EndpointReplyFrom, error) {
	rest, ok := strings.CutPrefix(subject, s.Prefix()+"."+string(KindEp)+".")
	if ok {
		rest = strings.TrimPrefix(rest, VersionedRail+".")
		rest, ok = strings.CutPrefix(rest, AddressReply+".")
	}
	t := strings.Split(rest, ".")
	if !ok || len(t) < 7 {
		return EndpointReplyFrom{}, Invalid("subject", subject, "is not a reply subject of this space's ep rail")
	}
	name, err := ParseEndpointToken(t[0])
	if err != nil {
		return EndpointReplyFrom{}, Within("subject", err)
	}
	uid, err := ParseLifecycleUID(t[1])
	if err != nil {
		return EndpointReplyFrom{}, Within("subject", err)
	}
	epoch, err := strconv.ParseInt(t[2], 10, 64)
	if err != nil || epoch < 0 || strconv.FormatInt(epoch, 10) != t[2] {
		return EndpointReplyFrom{}, Invalid("subject", subject, "carries an epoch that is not a non-negative decimal")
	}
	return EndpointReplyFrom{Endpoint: name, Instance: uid, Epoch: epoch}, nil
}
