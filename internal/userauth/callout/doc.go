// Package callout serves the NATS auth callout of a space in user-auth mode (SPEC §10): the broker
// hands every connection that presents the space's shared sentinel credential to this service,
// which checks where the request came from, asks a decision function about the client's bearer,
// and answers with a user JWT that binds the connection into the space's data account.
//
// The service owns the callout's wire shape and its provenance checks: a request must be sealed
// to the auth account's curve key, signed by the server that sealed it, and come from an allowed
// server, or it is dropped without a reply (the broker then times out and refuses the client). It
// does not own the decision: who a bearer is and what it may do belong to Config.Authorize. Nor
// does it own the keys or the auth account's JWT, which the authority makes
// (authority.Keyring.Callout).
//
// Usage:
//
//	nc, _ := nats.Connect(url, nats.UserCredentials(calloutCredsFile))
//	svc, err := callout.Serve(ctx, nc, callout.Config{
//		Account:     keys.Account(),
//		XKey:        keys.XKey(),
//		DataAccount: space.AccountPublicKey(),
//		Authorize:   decide,
//	})
//	if err != nil { ... }
//	defer svc.Stop()
package callout
