package wire

import (
	"strconv"
)

// The event and fact planes of an endpoint (SPEC §13.2), and a goal's topics on them. The
// publishing instance's identity (and epoch, on the event plane) rides the subject, pinned by the
// serve grant.

// Reserved topic heads on the event and fact planes.
const (
	topicGoal   = "goal"
	goalProgess = "progress"
	goalResult  = "result"
	goalBind    = "bind"
)

// validateTopic checks each topic token is a non-empty token of [A-Za-z0-9_-] within the bound.
func validateTopic(topic []string) error {
	if len(topic) == 0 {
		return Invalid("topic", "", "must have at least one token")
	}
	for _, t := range topic {
		if !isIDToken(t) {
			return Invalid("topic", t, "each token must be 1 to 64 characters of [A-Za-z0-9_-]")
		}
	}
	return nil
}

func validateInstanceEpoch(endpoint EndpointName, instance LifecycleUID, epoch int64) error {
	if _, err := ParseEndpointName(string(endpoint)); err != nil {
		return err
	}
	if _, err := ParseLifecycleUID(string(instance)); err != nil {
		return Within("instanceId", err)
	}
	if epoch < 0 {
		return Invalid("epoch", strconv.FormatInt(epoch, 10), "must not be negative")
	}
	return nil
}

// EventSubject returns "cotal.<space>.epe.<endpoint>.<instanceId>.<epoch>.<topic...>", an event
// of one incarnation of an endpoint.
func (s Space) EventSubject(endpoint EndpointName, instance LifecycleUID, epoch int64, topic ...string) (string, error) {
	if err := validateInstanceEpoch(endpoint, instance, epoch); err != nil {
		return "", err
	}
	if err := validateTopic(topic); err != nil {
		return "", err
	}
	t := append([]string{endpoint.Token(), string(instance), strconv.FormatInt(epoch, 10)}, topic...)
	return s.Subject(KindEpe, t...), nil
}

// FactSubject returns "cotal.<space>.epf.<endpoint>.<topic...>", a canonical fact.
func (s Space) FactSubject(endpoint EndpointName, topic ...string) (string, error) {
	if _, err := ParseEndpointName(string(endpoint)); err != nil {
		return "", err
	}
	if err := validateTopic(topic); err != nil {
		return "", err
	}
	return s.Subject(KindEpf, append([]string{endpoint.Token()}, topic...)...), nil
}

// goalTopic returns "goal.<cOwner>.<cActor>.<cUid>.<goalId>.<leaf>", the topic of one goal of a
// caller: leaf is "progress" on the event plane, "result" or "bind" on the fact plane.
func goalTopic(caller Lifecycle, goalID, leaf string) []string {
	return []string{topicGoal, caller.Principal.owner, caller.Principal.actor, string(caller.UID), goalID, leaf}
}

// GoalProgressTopic returns the event topic of a goal's progress.
func GoalProgressTopic(caller Lifecycle, goalID string) []string {
	return goalTopic(caller, goalID, goalProgess)
}

// GoalResultTopic returns the fact topic of a goal's terminal result.
func GoalResultTopic(caller Lifecycle, goalID string) []string {
	return goalTopic(caller, goalID, goalResult)
}

// GoalBindTopic returns the fact topic that binds a goal id to its accepted fingerprint.
func GoalBindTopic(caller Lifecycle, goalID string) []string {
	return goalTopic(caller, goalID, goalBind)
}

// GoalProgressFilter returns "cotal.<space>.epe.<endpoint>.*.*.goal.<cOwner>.<cActor>.<cUid>.>":
// the progress of every goal of one caller, from any incarnation of endpoint.
func (s Space) GoalProgressFilter(endpoint EndpointName, caller Lifecycle) string {
	return s.Subject(KindEpe, endpoint.Token(), "*", "*", topicGoal, caller.Principal.owner, caller.Principal.actor, string(caller.UID), ">")
}
