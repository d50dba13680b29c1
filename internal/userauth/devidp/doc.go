// Package devidp is a development OpenID provider for laptops and tests: `cotal up --user-auth
// --dev-idp` starts one on loopback so that user-auth mode can be tried without a real identity
// provider.
//
// It implements exactly what a standard OIDC client of the device flow needs, and nothing of a
// real provider's account management: discovery, a JWKS of one Ed25519 key, the device
// authorization grant (RFC 8628) with refresh tokens, and an approval page where a person types the
// user code and any user name. Users exist as soon as a name is typed; there are no passwords.
// Everything lives in memory and a new key is made on each start, so tokens do not survive a
// restart.
//
// Because anyone who can reach it can log in as anyone, it listens only on loopback and refuses
// requests whose Host header is not a loopback name, which stops DNS-rebinding pages. Scripts and
// tests approve a login with [Approve] instead of the page.
package devidp
