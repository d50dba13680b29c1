// Package faulttest is the mesh's fault suite: real processes on loopback, each test bounded in
// time. A test builds nothing but the cotal binary (once, in TestMain), runs `cotal up` as a child
// process and breaks what a production mesh can lose: the broker killed with SIGKILL while
// thousands of messages are in flight, the active delivery daemon killed mid fan-out, an agent
// killed with direct messages it never acknowledged, a thousand mints racing for one name, a
// thousand redemptions racing for one session, lifecycles retired all at once, and corrupt rows
// an admin wrote into the auth store. Each test says what it proves in its doc comment.
//
// The default counts keep the suite within a few minutes under -race on a two-core machine;
// COTAL_SOAK=1 runs the full counts.
package faulttest
