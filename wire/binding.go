package wire

import "time"

// Durations of the NATS binding that every implementation serving a space must agree on: a
// consumer or bucket made with another value differs from the one the reference makes, and an
// idempotent re-create against it fails. Each has this one home; presence timing is in
// presence.go (SPEC §6).
const (
	// ChatHistInactiveThreshold is the inactive_threshold of a chathist_ history consumer (SPEC §8
	// binds the consumer, the reference's endpoint.ts this value): the server reaps one that a
	// crashed reader left behind after it.
	ChatHistInactiveThreshold = 30 * time.Second
)
