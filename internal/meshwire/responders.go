package meshwire

import (
	"strings"

	"github.com/gocotal/cotal/wire"
)

// What a responder on the ctl, live, dinbox and dlv rails reads off the subject a request or a
// hand-off arrived on. The caller slots were forge-locked by the broker, so the subject, never the
// payload, says who asks.

// RailRequest is a request on the ctl or live rail, "cotal.<space>.<kind>.<service>.<owner>.<actor>",
// with the caller's principal validated.
type RailRequest struct {
	Kind    wire.SubjectKind
	Space   string
	Service string // the wire.ControlService or wire.Plane token
	Caller  wire.Principal
}

// ParseRailRequest parses a request subject on the ctl or live rail: exactly six tokens and a
// caller whose tokens pass the owner and actor grammar. It returns a *wire.ValidationError
// otherwise.
func ParseRailRequest(subject string) (RailRequest, error) {
	t := strings.Split(subject, ".")
	if len(t) != 6 || t[0] != wire.Root || (t[2] != string(wire.KindCtl) && t[2] != string(wire.KindLive)) {
		return RailRequest{}, wire.Invalid("subject", subject, "a request subject is exactly cotal.<space>.<ctl|live>.<service>.<owner>.<actor>")
	}
	caller, err := wire.NewPrincipal(t[4], t[5])
	if err != nil {
		return RailRequest{}, wire.Within("subject", err)
	}
	return RailRequest{Kind: wire.SubjectKind(t[2]), Space: t[1], Service: t[3], Caller: caller}, nil
}

// IsBoundReply reports whether reply lies under request's reply leaf ("<request>.reply.<...>").
// A responder answers only such replies; anything else would let a caller aim the answer at a
// subject of its choosing.
func IsBoundReply(request, reply string) bool {
	rest, ok := strings.CutPrefix(reply, request+"."+wire.ReplyLeaf+".")
	return ok && rest != "" && !strings.HasPrefix(rest, ".") && !strings.HasSuffix(rest, ".") && !strings.Contains(rest, "..")
}

// ParseLifecycleSubject parses "cotal.<space>.<kind>.<owner>.<actor>.<uid>" on the dinbox or dlv
// rail, returning the kind and the lifecycle it addresses, or a *wire.ValidationError.
func ParseLifecycleSubject(subject string) (wire.SubjectKind, wire.Lifecycle, error) {
	t := strings.Split(subject, ".")
	if len(t) != 6 || t[0] != wire.Root || (t[2] != string(wire.KindDinbox) && t[2] != string(wire.KindDlv)) {
		return "", wire.Lifecycle{}, wire.Invalid("subject", subject, "a lifecycle subject is exactly cotal.<space>.<dinbox|dlv>.<owner>.<actor>.<lifecycleUid>")
	}
	l, err := wire.ParseLifecycle(strings.Join(t[3:], "."))
	if err != nil {
		return "", wire.Lifecycle{}, wire.Within("subject", err)
	}
	return wire.SubjectKind(t[2]), l, nil
}
