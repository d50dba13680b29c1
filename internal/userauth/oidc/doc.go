// Package oidc is a small OpenID Connect client for Cotal's user-auth mode: provider discovery,
// the device authorization grant (RFC 8628) with refresh, verification of ID tokens against the
// provider's JWKS, and the cache of login sessions behind `cotal login`.
//
// It speaks only the standard protocols, so any conforming provider works, not one library: a
// provider is found with [Discover], a person logs in with [Provider.StartDevice] and
// [Provider.PollDevice], and the ID token they get is checked by a [Verifier]. The Verifier accepts
// RS256 (2048-bit keys or larger), ES256 and EdDSA (Ed25519) signatures only, and never takes a key
// from the token itself.
//
// Every URL the package fetches must be https, or http to a loopback host, and no redirect is
// followed. Each request is bounded by a timeout (30 s, or COTAL_IDP_TIMEOUT_MS) and every
// response body by 1 MiB.
//
// The package owns no files of its own: the sessions cache path is passed in by the caller
// ([DefaultSessionsPath] names the usual one), and it does not decide what a verified identity
// may do in a mesh.
//
// A typical login:
//
//	p, err := oidc.Discover(ctx, nil, issuer)
//	dc, err := p.StartDevice(ctx, nil, clientID, nil)
//	// show dc.VerificationURIComplete or dc.VerificationURI and dc.UserCode to the person
//	toks, err := p.PollDevice(ctx, nil, clientID, dc)
//	id, err := oidc.NewVerifier(p, clientID, nil).Verify(ctx, toks.IDToken)
package oidc
