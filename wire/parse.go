package wire

import (
	"strings"
)

// ParsedSubject is a delivery subject split into its routing parts. ParseSubject only splits:
// Owner and Actor are the tokens found in the sender slots, not yet checked against the owner
// grammar; Guard checks them before anything is surfaced.
type ParsedSubject struct {
	// Kind is KindChat, KindInst or KindSvc.
	Kind SubjectKind
	// Space is token 1, the space token.
	Space string
	// Owner and Actor are the sender's tokens.
	Owner, Actor string
	// Rest is the channel for chat (possibly dotted), the recipient's dot-form for inst, and the
	// role for svc.
	Rest string
}

// Sender returns the sender's dot-form "<owner>.<actor>", the value from.id must equal.
func (p ParsedSubject) Sender() string { return p.Owner + "." + p.Actor }

// Principal returns the sender as a Principal, or a *ValidationError when a sender token breaks
// the owner and actor grammar.
func (p ParsedSubject) Principal() (Principal, error) {
	return NewPrincipal(p.Owner, p.Actor)
}

// ParseSubject splits a delivery subject (SPEC §3): chat subjects need at least six tokens, inst
// exactly seven and svc exactly six. Anything else has no sender and is not a delivery: a wrong
// root, another rail (the ctl rail is retired and MUST NOT be handled as a delivery; live, dinbox,
// dlv, wfj and trace carry no sender), or a wrong arity. The error is a *ValidationError whose Rule
// says which.
func ParseSubject(subject string) (ParsedSubject, error) {
	// Cut without allocating, as every received message is: t holds the first tokens, and its
	// last the rest of the subject, dots and all.
	var t [7]string
	n, rest := 0, subject
	for ; n < len(t)-1; n++ {
		i := strings.IndexByte(rest, '.')
		if i < 0 {
			break
		}
		t[n], rest = rest[:i], rest[i+1:]
	}
	t[n] = rest
	n++
	if t[0] != Root || n < 3 {
		return ParsedSubject{}, Invalidf("subject", subject, "must start with %q.<space>.<kind>", Root)
	}
	p := ParsedSubject{Kind: SubjectKind(t[2]), Space: t[1]}
	more := n == len(t) && strings.IndexByte(t[n-1], '.') >= 0 // more than seven tokens
	switch p.Kind {
	case KindChat:
		if n < 6 {
			return ParsedSubject{}, Invalid("subject", subject, "a chat subject is cotal.<space>.chat.<owner>.<actor>.<channel...> and needs a channel")
		}
		p.Owner, p.Actor = t[3], t[4]
		p.Rest = subject[len(t[0])+len(t[1])+len(t[2])+len(t[3])+len(t[4])+5:]
	case KindInst:
		if n != 7 || more {
			return ParsedSubject{}, Invalid("subject", subject, "an inst subject is exactly cotal.<space>.inst.<recipOwner>.<recipActor>.<owner>.<actor>")
		}
		at := len(t[0]) + len(t[1]) + len(t[2]) + 3
		p.Owner, p.Actor, p.Rest = t[5], t[6], subject[at:at+len(t[3])+1+len(t[4])]
	case KindSvc:
		if n != 6 {
			return ParsedSubject{}, Invalid("subject", subject, "an svc subject is exactly cotal.<space>.svc.<role>.<owner>.<actor>")
		}
		p.Owner, p.Actor, p.Rest = t[4], t[5], t[3]
	case KindCtl:
		return ParsedSubject{}, Invalid("subject", subject, "the ctl rail carries control requests, never deliveries")
	default:
		return ParsedSubject{}, Invalidf("subject", subject, "kind %q carries no delivery", t[2])
	}
	return p, nil
}
