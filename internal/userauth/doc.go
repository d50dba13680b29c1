// Package userauth is the core of user-auth mode (SPEC §2, §10, §13.1): it turns a signed-in
// human or a managed agent into a short-lived Cotal bearer, and checks that bearer again at every
// connect.
//
// It owns:
//   - owner derivation: an IdP (issuer, subject) pair becomes an opaque per-space owner token
//     "u_" + 26 base32 characters (DeriveOwner), keyed by the space's owner secret;
//   - the bearer issuer: EdDSA JWTs signed by a kid set kept in issuer.json, their strict
//     validation, and the public JWKS (Issuer);
//   - the people ledger: one key of the space's user-auth store per granted (owner, actor) row,
//     interactive or managed, read fresh from the stream leader on every use (People);
//   - the HTTP faces, loopback and public, with their request limits and refusal budgets (Face);
//   - the exchange that mints bearers and the connect-time authorizer the callout consults
//     (Exchange).
//
// It does not own the IdP bridge (package oidc), the NATS auth callout (package callout), the
// root-credential ledger in the auth KV, or the remote-manager route: those reach this package
// through the IdentityVerifier, RootCredentials and ManagerSelector interfaces and Handler routes.
//
// Secrets (the owner secret, the issuer seeds) live in 0600 files inside 0700 directories,
// created once and never overwritten: a file that exists but cannot be read is an error, because
// regenerating it would re-key every owner or kill every outstanding bearer.
package userauth
