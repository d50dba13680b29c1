// Package meshwire is the part of the Cotal wire that only the mesh's own services speak: the
// delivery daemon's rows, lease keys and time-to-lives, the manager's lease and its attach
// sessions, the service registry's keys, record kinds and keys, fact families, workflow-run
// journals and run status, the remote manager's identities and the auth callout's subject; and the
// serving side of every rail (what a responder subscribes, parses and answers with, and the
// grant rows that pin who may publish there), with the rails only services use (timers, work
// items, session rails, workflow journals).
//
// Its names and formats are as normative as package wire's (a TypeScript service on the same
// broker reads and writes them), but no client of the SPEC builds them, so they stay out of
// the public contract: package wire exports what an agent or a tool needs, and this package
// imports it.
package meshwire
