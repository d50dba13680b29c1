package wire

import "strings"

// The grant rows of the endpoint surface that no subject builder already spells (SPEC §13.9),
// beside ReplyPublishGrant, ReplyReadGrant, EventPublishGrant and GoalProgressFilter: NATS
// patterns whose literal tokens pin who may use them, built from the same tokens as the subjects
// they admit.

// ManagerEndpoint is the contract's manager endpoint: the space's agent supervisor.
const ManagerEndpoint EndpointName = "manager"

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
func (s Space) RequestGrant(caller Lifecycle, generation string, address Addressing, route ...string) string {
	r := EndpointRoute{Generation: generation, Caller: caller, Nonce: "*"}
	t := append(r.rail(), string(address))
	t = append(t, route...)
	t = append(t, r.callerTail()...)
	return Root + "." + s.Token() + "." + strings.Join(t, ".")
}

// GoalResultGrant returns "cotal.<space>.epf.<endpoint>.goal.*.*.*.*.result": the terminal result
// fact of every goal of endpoint, whichever caller's.
func (s Space) GoalResultGrant(endpoint EndpointName) string {
	anyCaller := Lifecycle{Principal: Principal{owner: "*", actor: "*"}, UID: "*"}
	return s.Subject(KindEpf, append([]string{endpoint.Token()}, GoalResultTopic(anyCaller, "*")...)...)
}
