// Package endpoint serves and calls endpoints on the ep rails (SPEC §13.2–§13.5).
//
// A Server answers one endpoint instance's commands: it queue-subscribes each command's class
// rail in the endpoint's group and plain-subscribes its scatter and instance rails, on the legacy
// ep rail and the versioned ep.v1 rail alike, and answers on the reply subject it derives from
// the authenticated request subject (never msg.Reply, never the payload). Every request passes the
// same admission before its handler runs, each refusal answered with its catalog code and
// outcome not-executed: the envelope (strict I-JSON, version, shape), agreement with the subject
// (op, sender, target, scatter and instance rules), the bound-incarnation fence, the class, the
// contract digests, the mode, and the input schema. describe is served by the machinery itself.
//
// A Caller calls, casts and scatters as one lifecycle: it subscribes the exact nonce subject
// before it publishes, names the reserved no-responders sentinel as the request's reply, and
// classifies what it observed: no responders and a refused publish are not-executed, a deadline
// with no answer unknown, and a reply carries its responder's outcome.
package endpoint
