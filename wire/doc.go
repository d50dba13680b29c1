// Package wire holds the Cotal wire contract as data and pure functions: the identifiers of
// SPEC.md (subject tokens, principals, lifecycle UIDs, stream, bucket, key and durable names), the
// message, presence and channel-config shapes of cotal.schema.json with their validation, the
// receive guard with its rejection reasons, and RFC 8785 canonical JSON with sha256 digests.
//
// It does no I/O and imports nothing outside the standard library, so every other package (and
// any other Go program) builds subjects and judges messages identically. What the package does not
// own: connecting, publishing and consuming (package cotal), provisioning streams (package space)
// and minting credentials (package authority).
//
// # Identity
//
// A Principal is the pair (owner, actor). Its dot-form "<owner>.<actor>" is the AgentCard.id, the
// from.id and the presence key; its dash-form "<owner>-<actor>" goes into JetStream names. Owner
// and actor tokens are never sanitised: NewPrincipal and ParsePrincipal refuse anything outside
// [A-Za-z0-9_]. A Lifecycle adds the LifecycleUID of one incarnation.
//
// # Subjects and names
//
// A Space builds every subject and resource name of a space:
//
//	sp := wire.Space("main")
//	alice, _ := wire.ParsePrincipal("u_aaaaaaaaaaaaaaaaaaaaaaaaaa.alice")
//	subj, _ := sp.ChatSubject(alice, "team.backend") // cotal.main.chat.u_aaa….alice.team.backend
//	sp.ChatStream()                                   // CHAT_main
//	sp.PresenceBucket()                               // cotal_presence_main
//
// Routing tokens (space, role, channel segments) are sanitised with Token, as SPEC §3 requires;
// user-facing input should be checked first with ParseSpace and ValidateChannelPattern, which
// refuse what sanitising would silently rewrite.
//
// # Receiving
//
// Guard takes a subject and a payload and returns either a Delivery, whose Kind comes from the
// subject, or a *RejectError with the Reason the message must be terminated for. ParseSubject only
// splits a subject; Guard adds the checks that make it safe to surface.
//
// # Errors
//
// Every rule violation is a *ValidationError naming the field, the value and the rule; all of
// them match ErrInvalid with errors.Is.
package wire
