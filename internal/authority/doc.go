// Package authority owns who may hold which credential: the broker's keys (operator, system
// account, one account and signing key per space), the permission profiles that turn a principal
// and its ACLs into NATS permission rows, and minting user JWTs and creds files from them.
//
// The permission rows are the security boundary of a mesh: the broker enforces them before any
// Cotal code runs, so a forged sender or an unauthorised read is refused by nats-server itself.
// PermissionsFor is a pure function so that every row can be read and tested.
//
// Keys live in a directory of 0600 files inside a 0700 directory, each written atomically and
// created only if absent; a file that exists but does not hold a key of the right kind is
// reported and never overwritten.
package authority
