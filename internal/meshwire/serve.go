package meshwire

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/gocotal/cotal/wire"
)

// The serving side of the ep rails (SPEC §13.2): what an endpoint instance subscribes, parses and
// answers with, and the grant rows that pin who may publish there. A caller's side (its request
// and reply subjects) stays in package wire.

// epRail returns the tokens after the space: "ep", or "ep.v1" on the versioned rail.
func epRail(versioned bool) []string {
	if versioned {
		return []string{string(wire.KindEp), wire.VersionedRail}
	}
	return []string{string(wire.KindEp)}
}

// epSubject joins tokens under the space's prefix.
func epSubject(s wire.Space, tokens []string) string {
	return s.Prefix() + "." + strings.Join(tokens, ".")
}

// ServeFilters returns what one instance of endpoint subscribes for command on one rail:
// "ep[.v1].one.<endpoint>.<command>.>" (queue-subscribed in the group QueueGroup names, the only
// form), "ep[.v1].all.<endpoint>.<command>.>" and "ep[.v1].inst.<endpoint>.<instanceId>.<command>.>".
func ServeFilters(s wire.Space, endpoint wire.EndpointName, instance wire.LifecycleUID, command string, versioned bool) (one, all, inst string) {
	rail, e := epRail(versioned), endpoint.Token()
	at := func(route ...string) string {
		return epSubject(s, append(append(append([]string(nil), rail...), route...), command, ">"))
	}
	return at(string(wire.AddressOne), e), at(string(wire.AddressAll), e), at(string(wire.AddressInst), e, string(instance))
}

// QueueGroup returns the queue group of an endpoint's class rail: its token.
func QueueGroup(endpoint wire.EndpointName) string { return endpoint.Token() }

// ReplyPublishGrant returns what an instance at epoch may publish its replies on:
// "ep.reply.<endpoint>.<instanceId>.<epoch>.*.*.*.*" (legacy) or the versioned
// "ep.v1.reply.<endpoint>.<instanceId>.<epoch>.*.*.*.*.*".
func ReplyPublishGrant(s wire.Space, endpoint wire.EndpointName, instance wire.LifecycleUID, epoch int64, versioned bool) string {
	t := append(epRail(versioned), wire.AddressReply, endpoint.Token(), string(instance), strconv.FormatInt(epoch, 10), "*", "*", "*", "*")
	if versioned {
		t = append(t, "*")
	}
	return epSubject(s, t)
}

// RequestGrant returns a caller's publish row for requests on the legacy ep rail, or on the
// versioned rail when generation is set:
//
//	cotal.<space>.ep[.v1].<address>.<route...>.<owner>.<actor>.<uid>[.<generation>].*
//
// route is every token between the addressing and the caller triple (the endpoint, the instance
// on the inst rail, the command, the mode and its targets), each a literal or "*". The last "*" is
// the nonce. The literal caller triple pins every request the row admits to the caller's own
// lifecycle: a row with more or fewer route tokens admits only subjects of that arity, so no
// request it admits parses with another caller.
func RequestGrant(s wire.Space, caller wire.Lifecycle, generation string, address wire.Addressing, route ...string) string {
	t := append(epRail(generation != ""), string(address))
	t = append(t, route...)
	t = append(t, caller.Principal.Owner(), caller.Principal.Actor(), string(caller.UID))
	if generation != "" {
		t = append(t, generation)
	}
	return epSubject(s, append(t, "*"))
}

// NewGeneration returns a fresh issued generation (SPEC §13.15), the token a credential's
// versioned request rows carry: 128 random bits as 32 lowercase hex characters, the form
// wire.ValidateGeneration accepts.
func NewGeneration() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error since Go 1.24
	return hex.EncodeToString(b[:])
}

// ParseRequestSubject parses a request subject on either ep rail of space s. Dispatch is on the
// closed set of mode words at the token after the command (never on arity), and a subject that
// matches no form, or that wire.Space.RequestSubject would not spell exactly so, is refused: it
// has no sender and must not be handled.
func ParseRequestSubject(s wire.Space, subject string) (wire.EndpointRoute, error) {
	fail := func(rule string) (wire.EndpointRoute, error) {
		return wire.EndpointRoute{}, wire.Invalid("subject", subject, rule)
	}
	rest, ok := strings.CutPrefix(subject, s.Prefix()+"."+string(wire.KindEp)+".")
	if !ok {
		return fail("is not on this space's ep rail")
	}
	t := strings.Split(rest, ".")
	var r wire.EndpointRoute
	versioned := len(t) > 0 && t[0] == wire.VersionedRail
	if versioned {
		t = t[1:]
	}
	if len(t) < 3 {
		return fail("has too few tokens")
	}
	r.Address = wire.Addressing(t[0])
	name, err := wire.ParseEndpointToken(t[1])
	if err != nil || name.Token() != t[1] {
		return fail("does not carry a valid endpoint token")
	}
	r.Endpoint = name
	t = t[2:]
	if r.Address == wire.AddressInst {
		r.Instance = wire.LifecycleUID(t[0])
		t = t[1:]
	}
	if len(t) < 2 {
		return fail("has too few tokens")
	}
	r.Command = t[0]
	t = t[1:]
	if m := wire.AuthzMode(t[0]); m != wire.ModeNone && m.TargetTokens() >= 0 {
		r.Mode = m
		n := m.TargetTokens()
		if len(t) < 1+n {
			return fail("has too few target tokens for its mode")
		}
		switch n {
		case 1:
			r.Target.Owner = t[1]
		case 3:
			r.Target = wire.EndpointTarget{Owner: t[1], Actor: t[2], UID: wire.LifecycleUID(t[3])}
		}
		t = t[1+n:]
	}
	want := 4
	if versioned {
		want = 5
	}
	if len(t) != want {
		return fail("does not end in the caller's <owner>.<actor>.<uid>[.<generation>].<nonce>")
	}
	p, err := wire.NewPrincipal(t[0], t[1])
	if err != nil {
		return fail("does not carry a valid caller principal")
	}
	r.Caller = wire.Lifecycle{Principal: p, UID: wire.LifecycleUID(t[2])}
	if versioned {
		r.Generation = t[3]
		if r.Generation == "" {
			return fail("carries an empty generation")
		}
	}
	r.Nonce = t[len(t)-1]
	// Spelling the route back validates every token and the subject's length, and refuses any
	// subject that is not the one spelling of its route.
	back, err := s.RequestSubject(r)
	if err != nil {
		return wire.EndpointRoute{}, wire.Within("subject", err)
	}
	if back != subject {
		return fail("is not in its canonical form")
	}
	return r, nil
}

// jsonNull is the JSON null, the data of a void output.
var jsonNull = json.RawMessage("null")

// OKReply returns the successful reply to request id carrying data, or null when data is nil.
func OKReply(id string, data json.RawMessage) *wire.EndpointReply {
	if data == nil {
		data = jsonNull
	}
	return &wire.EndpointReply{V: wire.EndpointEnvelopeVersion, ID: id, OK: true, Data: data}
}

// ErrorReply returns the reply refusing request id with e.
func ErrorReply(id string, e *wire.EndpointError) *wire.EndpointReply {
	return &wire.EndpointReply{V: wire.EndpointEnvelopeVersion, ID: id, Error: e}
}

// RequireDigests returns a contract-mismatch *wire.EndpointError (outcome not-executed) when either
// op digest of r is missing, as a responder must for every command but describe; nil otherwise.
func RequireDigests(r *wire.EndpointRequest) error {
	switch {
	case r.Op.InputDigest == "":
		return wire.NewEndpointError(wire.CodeContractMismatch, wire.OutcomeNotExecuted, "op.inputDigest is required on command %q", r.Op.Command)
	case r.Op.OutputDigest == "":
		return wire.NewEndpointError(wire.CodeContractMismatch, wire.OutcomeNotExecuted, "op.outputDigest is required on command %q", r.Op.Command)
	}
	return nil
}
