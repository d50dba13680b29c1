package meshwire

import (
	"strings"

	"github.com/gocotal/cotal/wire"
)

// A remote manager (SPEC §13.1, §13.6) is a supervisor on a machine without the space's signing
// key. It holds five identities, each an actor of its owner named after its instance id.
const (
	remoteManagerSupervisor    = "manager_"
	remoteManagerExecutor      = "manager_exec_"
	remoteManagerServe         = "manager_serve_"
	remoteManagerGoalWriter    = "manager_goal_"
	remoteManagerSessionLedger = "manager_session_"
)

// RemoteManagerActors are the actors of one remote manager instance's identities.
type RemoteManagerActors struct {
	// Supervisor runs the manager: its lease and the manager liveness plane.
	Supervisor string `json:"supervisor"`
	// Executor registers the instance: its serve gate, before activation.
	Executor string `json:"executor"`
	// Serve serves the manager endpoint; the gate names <owner>.<Serve> as its principal.
	Serve string `json:"serve"`
	// GoalWriter and SessionLedger are the serve identity's siblings.
	GoalWriter    string `json:"goalWriter"`
	SessionLedger string `json:"sessionLedger"`
}

// IsRemoteManagerActor reports whether actor is named as a remote manager's identity, of any
// instance: such names belong to the identities alone, never to an agent.
func IsRemoteManagerActor(actor string) bool {
	return strings.HasPrefix(actor, remoteManagerSupervisor)
}

// RemoteManagerActorsOf returns the actors of remote manager instance.
func RemoteManagerActorsOf(instance wire.LifecycleUID) RemoteManagerActors {
	id := string(instance)
	return RemoteManagerActors{
		Supervisor: remoteManagerSupervisor + id, Executor: remoteManagerExecutor + id, Serve: remoteManagerServe + id,
		GoalWriter: remoteManagerGoalWriter + id, SessionLedger: remoteManagerSessionLedger + id,
	}
}
