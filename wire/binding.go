package wire

import "time"

// Durations of the NATS binding that every implementation serving a space must agree on: a
// consumer or bucket made with another value differs from the one the reference makes, and an
// idempotent re-create against it fails. Each has this one home; presence timing is in
// presence.go (SPEC §6).
const (
	// AckWait is the ack_wait of every explicit-ack consumer of the messaging plane: after it an
	// unacknowledged delivery is redelivered. SPEC §8 fixes it for the dm_ and svc_ durables
	// (ack_wait=60000ms); the reference uses it too for the dlv_ durables and the delivery
	// daemon's fanout and reader.
	AckWait = 60 * time.Second
	// ChatHistInactiveThreshold is the inactive_threshold of a chathist_ history consumer (SPEC §8
	// binds the consumer, the reference's endpoint.ts this value): the server reaps one that a
	// crashed reader left behind after it.
	ChatHistInactiveThreshold = 30 * time.Second
	// DeliveryLeaseTTL is the max_age of the delivery bucket (DeliveryBucket): a delivery daemon's
	// lease not renewed for this long lapses, and a standby takes over. SPEC.md leaves the value
	// to the reference (streams.ts, 30000 ms), whose bucket a space's must match.
	DeliveryLeaseTTL = 30 * time.Second
	// ManagerLeaseTTL is the max_age of the manager bucket (ManagerBucket): a manager instance's
	// lease not renewed for this long lapses. SPEC.md leaves the value to the reference
	// (streams.ts, 10000 ms).
	ManagerLeaseTTL = 10 * time.Second
)
