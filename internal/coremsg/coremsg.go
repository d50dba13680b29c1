// Package coremsg tells a message published on a core subject from one JetStream delivered there.
//
// NATS checks the subject a client publishes to, never the reply subject it names. A client that
// pulls from a consumer it may read, naming as the pull's reply subject a rail it may not publish
// to, makes JetStream deliver the stored message onto that rail from the server's own client. Such
// a delivery keeps its stored message's subject: it reaches the rail's subscribers under a subject
// the rail does not take. A subscriber of a core rail therefore takes only a message whose subject
// its subscription matches; anything else is inert.
package coremsg

import (
	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/wire"
)

// Published reports whether m arrived under a subject its subscription takes: it was published
// on the rail, not delivered onto it by JetStream under a stored message's subject. A message with
// no subscription (one built by hand) is not published on any rail.
func Published(m *nats.Msg) bool {
	return m != nil && m.Sub != nil && wire.SubjectMatches(m.Sub.Subject, m.Subject)
}
