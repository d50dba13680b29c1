// Package authstore is the auth store of a space, the KV bucket cotal_auth_<space> (SPEC §13.1):
// the rows of the authority ledger (lifecycle gates and heads, credentials, endpoint gates and
// serving credentials, sessions, plane claims, the root credential) and every transition over
// them, each a compare-and-set on the row's revision so that of two racing writers exactly one
// wins and the other gets ErrConflict.
//
// A row that must exist and is gone or malformed is ErrCorrupt: reported, never taken as absence
// and never overwritten. Repair and Checkup are the only readers that walk the whole bucket.
//
// Package ledger is the store's one writer in a running mesh: it holds the connection, signs with
// the space's keys (package authority) and pushes what a transition revoked to the broker. This
// package knows nothing of connections beyond the one it is opened on.
package authstore
