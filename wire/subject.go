package wire

import (
	"strings"
)

// Root is token 0 of every Cotal subject.
const Root = "cotal"

// SubjectKind is token 2 of a Cotal subject: the rail a subject belongs to.
type SubjectKind string

// The rails of SPEC §3 and of the reference daemons. Only chat, inst and svc carry deliveries.
const (
	KindChat   SubjectKind = "chat"   // multicast: chat.<owner>.<actor>.<channel...>
	KindInst   SubjectKind = "inst"   // unicast: inst.<recipOwner>.<recipActor>.<owner>.<actor>
	KindSvc    SubjectKind = "svc"    // anycast: svc.<role>.<owner>.<actor>
	KindCtl    SubjectKind = "ctl"    // the delivery daemon's control rail: ctl.<service>.<owner>.<actor>
	KindLive   SubjectKind = "live"   // liveness probes: live.<plane>.<owner>.<actor>
	KindDinbox SubjectKind = "dinbox" // durable fan-out inbox: dinbox.<owner>.<actor>.<uid>
	KindDlv    SubjectKind = "dlv"    // post-authorisation durable hand-off: dlv.<owner>.<actor>.<uid>
)

// ReplyLeaf separates a request subject from the reply leaf beneath it on the ctl and live rails.
const ReplyLeaf = "reply"

// maxChannelLength bounds a channel name (SPEC §3): every channel a credential may use rides its
// CONNECT line, so an unbounded channel is an unbounded connect. It counts UTF-16 code units, as
// the reference does.
const maxChannelLength = 4096

// maxSpaceLength bounds a space name. Space names end up in stream and bucket names
// ("KV_cotal_presence_<space>"), which JetStream limits in length.
const maxSpaceLength = 64

// Space is the name of one Cotal space (one NATS account). Subjects and resource names use its
// Token form; methods build every subject and name the contract defines for the space.
type Space string

// ParseSpace validates a space name given by a user: one token of [A-Za-z0-9_-], at most
// maxSpaceLength long. Peers sanitise space names instead (Token), but a name we create must not
// be one that sanitising would rewrite, or two names would share one space.
func ParseSpace(s string) (Space, error) {
	if !isTokenSafe(s) {
		return "", Invalid("space", s, "must be one token of [A-Za-z0-9_-]")
	}
	if len(s) > maxSpaceLength {
		return "", Invalidf("space", s, "must be at most %d characters", maxSpaceLength)
	}
	return Space(s), nil
}

// Token returns the space as a subject token.
func (s Space) Token() string { return Token(string(s)) }

// Prefix returns "cotal.<space>", the root of every subject in the space.
func (s Space) Prefix() string { return Root + "." + s.Token() }

// Subject returns "cotal.<space>.<kind>" followed by tokens, each after a dot. It checks
// nothing: callers pass tokens they validated.
func (s Space) Subject(kind SubjectKind, tokens ...string) string {
	var b strings.Builder
	b.WriteString(s.Prefix())
	b.WriteByte('.')
	b.WriteString(string(kind))
	for _, t := range tokens {
		b.WriteByte('.')
		b.WriteString(t)
	}
	return b.String()
}

// KindAll returns "cotal.<space>.<kind>.>", every subject of one rail (the subjects of the
// CHAT, DM, TASK, INBOX and DLV streams, the observer and admin taps).
func (s Space) KindAll(kind SubjectKind) string { return s.Subject(kind, ">") }

// ChatSubject returns the subject sender publishes a multicast on:
// "cotal.<space>.chat.<owner>.<actor>.<channel>". The channel must be concrete (no '*' or '>'),
// since a publish goes to one channel; each segment is sanitised. It returns a *ValidationError
// for an empty, wildcard or over-long channel.
func (s Space) ChatSubject(sender Principal, channel string) (string, error) {
	path, err := channelPath(channel, false)
	if err != nil {
		return "", err
	}
	return s.Subject(KindChat, sender.owner, sender.actor, path), nil
}

// ChatPattern returns "cotal.<space>.chat.<owner>.<actor>.<channel>" for a grant or a
// subscription, where owner and actor may each be "*" and the channel may hold '*' segments and a
// final '>'. It returns a *ValidationError for a bad identity token or channel.
func (s Space) ChatPattern(owner, actor, channel string) (string, error) {
	o, err := identityOrWildcard("owner", owner)
	if err != nil {
		return "", err
	}
	a, err := identityOrWildcard("actor", actor)
	if err != nil {
		return "", err
	}
	path, err := channelPath(channel, true)
	if err != nil {
		return "", err
	}
	return s.Subject(KindChat, o, a, path), nil
}

// ChatFilter returns "cotal.<space>.chat.*.*.<channel>": a channel (or channel pattern) from any
// sender, the live subscription and the read grant of SPEC §8.
func (s Space) ChatFilter(channel string) (string, error) {
	return s.ChatPattern("*", "*", channel)
}

func identityOrWildcard(field, v string) (string, error) {
	if v == "*" {
		return v, nil
	}
	if err := validateIdentity(field, v); err != nil {
		return "", err
	}
	return v, nil
}

// DMSubject returns the subject sender publishes a direct message to recipient on:
// "cotal.<space>.inst.<recipOwner>.<recipActor>.<owner>.<actor>".
func (s Space) DMSubject(recipient, sender Principal) string {
	return s.Subject(KindInst, recipient.owner, recipient.actor, sender.owner, sender.actor)
}

// AnycastSubject returns the subject sender hands a task to role on:
// "cotal.<space>.svc.<role>.<owner>.<actor>". It returns a *ValidationError for an empty role.
func (s Space) AnycastSubject(role string, sender Principal) (string, error) {
	r, err := roleToken(role)
	if err != nil {
		return "", err
	}
	return s.Subject(KindSvc, r, sender.owner, sender.actor), nil
}

// AnycastFilter returns "cotal.<space>.svc.<role>.>": every task for role, the filter of its svc_
// durable. It returns a *ValidationError for an empty role.
func (s Space) AnycastFilter(role string) (string, error) {
	r, err := roleToken(role)
	if err != nil {
		return "", err
	}
	return s.Subject(KindSvc, r, ">"), nil
}

// roleToken sanitises a role (SPEC §8: names and filters use token(role)), refusing a role that
// is empty or blank, which would otherwise collapse into the shared role "_".
func roleToken(role string) (string, error) {
	if trimSpaceES(role) == "" {
		return "", Invalid("role", role, "must not be empty")
	}
	return Token(role), nil
}

// ControlService is a service on the ctl rail. Only the delivery daemon's two services remain
// there; the rest of the v0 control rail is retired (SPEC §13.11).
type ControlService string

// The control services the delivery daemon serves.
const (
	ControlDelivery      ControlService = "delivery"       // durable join, leave and list, called by agents
	ControlDeliveryAdmin ControlService = "delivery-admin" // privileged admin ops, called by the supervisor
)

// parseControlService returns s as a ControlService, or a *ValidationError when it is not one of
// the two the delivery daemon serves.
func parseControlService(s string) (ControlService, error) {
	switch svc := ControlService(s); svc {
	case ControlDelivery, ControlDeliveryAdmin:
		return svc, nil
	}
	return "", Invalidf("control service", s, "must be %q or %q", ControlDelivery, ControlDeliveryAdmin)
}

// ControlSubject returns "cotal.<space>.ctl.<service>.<owner>.<actor>", the subject caller sends a
// control request on.
func (s Space) ControlSubject(svc ControlService, caller Principal) string {
	return s.Subject(KindCtl, string(svc), caller.owner, caller.actor)
}

// Plane is a liveness plane: a daemon whose liveness any peer may probe. The set is closed.
type Plane string

// The liveness planes.
const (
	PlaneManager  Plane = "manager"
	PlaneDelivery Plane = "delivery"
)

// Planes lists every liveness plane.
var Planes = []Plane{PlaneManager, PlaneDelivery}

// ParsePlane returns s as a Plane, or a *ValidationError for any plane outside the closed set, so
// a probe of an unknown plane is refused before anything is published.
func ParsePlane(s string) (Plane, error) {
	switch p := Plane(s); p {
	case PlaneManager, PlaneDelivery:
		return p, nil
	}
	return "", Invalidf("liveness plane", s, "must be %q or %q", PlaneManager, PlaneDelivery)
}

// LivenessSubject returns "cotal.<space>.live.<plane>.<owner>.<actor>", the request subject a peer
// probes plane on. The plane rides the subject so a credential can be scoped to it.
func (s Space) LivenessSubject(plane Plane, caller Principal) string {
	return s.Subject(KindLive, string(plane), caller.owner, caller.actor)
}

// ReplySubject returns "<request>.reply.<nonce>", the reply subject of a request on the ctl and
// live rails. The nonce is sanitised into one token.
func ReplySubject(request, nonce string) string {
	return request + "." + ReplyLeaf + "." + Token(nonce)
}

// isIDToken reports whether s is an id token (SPEC §13.2): 1 to 64 characters of [A-Za-z0-9_-].
func isIDToken(s string) bool { return len(s) <= 64 && isTokenSafe(s) }

// SubjectMatches reports whether the NATS subject pattern (with '*' and a final '>') matches
// subject. Channels are dotted tokens too, so the same rule answers "does an ACL entry cover this
// channel". As in NATS, "a.>" does not match "a".
func SubjectMatches(pattern, subject string) bool {
	for {
		pt, prest, pmore := strings.Cut(pattern, ".")
		if pt == ">" {
			return subject != ""
		}
		st, srest, smore := strings.Cut(subject, ".")
		if subject == "" || (pt != "*" && pt != st) {
			return false
		}
		if !pmore || !smore {
			return pmore == smore
		}
		pattern, subject = prest, srest
	}
}
