package meshwire

import "github.com/gocotal/cotal/wire"

// The grant rows of an endpoint's goal facts (SPEC §13.4, §13.9): the endpoint's instances may
// write them for any caller's goal, so the rows wildcard the caller and the goal id that a
// caller's own topics (wire.GoalResultTopic, wire.GoalBindTopic) spell literally.

// anyGoal returns topic's tokens for every caller and goal: the zero caller leaves its owner,
// actor and uid tokens empty, and each empty token becomes "*".
func anyGoal(topic func(wire.Lifecycle, string) []string) []string {
	t := topic(wire.Lifecycle{}, "*")
	for i := range t {
		if t[i] == "" {
			t[i] = "*"
		}
	}
	return t
}

// GoalResultGrant returns "cotal.<space>.epf.<endpoint>.goal.*.*.*.*.result": the terminal result
// fact of every goal of endpoint, whichever caller's.
func GoalResultGrant(s wire.Space, endpoint wire.EndpointName) string {
	return s.Subject(wire.KindEpf, append([]string{endpoint.Token()}, anyGoal(wire.GoalResultTopic)...)...)
}

// GoalBindGrant returns "cotal.<space>.epf.<endpoint>.goal.*.*.*.*.bind": the first-wins bind of
// every goal of endpoint, whichever caller's.
func GoalBindGrant(s wire.Space, endpoint wire.EndpointName) string {
	return s.Subject(wire.KindEpf, append([]string{endpoint.Token()}, anyGoal(wire.GoalBindTopic)...)...)
}
