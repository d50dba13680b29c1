package manager

import "errors"

var (
	// ErrAlreadyExists is returned by Spawn when an agent of that name is being spawned or has
	// not finished.
	ErrAlreadyExists = errors.New("manager: already exists")
	// ErrNotFound is returned for an agent the supervisor does not know.
	ErrNotFound = errors.New("manager: no such agent")
	// ErrClosed is returned by Spawn once Close has begun.
	ErrClosed = errors.New("manager: the supervisor is closed")
	// ErrNoTerminal is returned by Supervisor.Terminal for an agent that runs headless.
	ErrNoTerminal = errors.New("manager: the agent has no terminal")
	// ErrNotRunning is returned by Terminal.Write when no process of the agent runs.
	ErrNotRunning = errors.New("manager: the agent is not running")
)
