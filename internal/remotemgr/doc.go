// Package remotemgr is a remote manager's authority (SPEC §13.1, §13.6): a manager that runs on a
// machine without the space's signing key, in user-auth mode, on behalf of a person holding the
// supervise scope.
//
// The host side (Host) answers the manager-service-authority route of the auth service's
// exchange: it checks the person's IdP token and ledger row, then, per operation, the
// registration proof and the instance's serve gate, and signs credentials for public keys the
// manager generated, so that no seed crosses the wire. The participant side (Participant) is
// `cotal supervise --mesh URL`: it prepares, registers its gate, activates, serves the manager
// endpoint and renews its standing bundle at three quarters of each lifetime.
package remotemgr
