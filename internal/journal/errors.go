package journal

import "errors"

var (
	// ErrRaced reports a replay durable that someone else had already read from: retry under a
	// new takeover id.
	ErrRaced = errors.New("journal: the replay durable was already in use")
	// ErrBroken reports a journal whose records do not form a chain from an activation at
	// ordinal 0.
	ErrBroken = errors.New("journal: the run journal is broken")
)
