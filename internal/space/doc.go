// Package space provisions one Cotal space on a JetStream connection: the message streams
// (CHAT_, DM_, TASK_, INBOX_, DLV_), the key-value buckets, the space's channel defaults, and the
// per-lifecycle durables an agent binds but may not create.
//
// Every configuration is the contract's, field for field, so a space made here and one made by the
// TypeScript reference are interchangeable. Provisioning is idempotent: a resource that exists is
// compared with the contract and left alone when it matches; one that drifted is reported by name
// and field and never recreated, since recreating a stream destroys its messages.
package space
