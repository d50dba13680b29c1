// Package cotaltest runs a real Cotal mesh inside a test, for the authors of agents built on the
// cotal SDK, as net/http/httptest serves the authors of HTTP handlers.
//
// A Mesh is what `cotal up` runs, in the test's process: an embedded NATS server with JetStream
// in operator mode on a free loopback port, its space provisioned, and the delivery daemon and the
// integrity warden beside it. Agents get their credentials the way `cotal` issues them, through
// the mesh's ledger, so the broker enforces their permissions as it would in production: a post
// outside an agent's channels or a join outside its read ACL is refused by the broker itself.
// Nothing is mocked.
//
//	func TestReviewer(t *testing.T) {
//		m := cotaltest.StartMesh(t) // stopped at cleanup
//		alice := m.Agent(t, "alice", cotaltest.Channels("team"))
//		bob := m.Agent(t, "bob", cotaltest.Channels("team"), cotaltest.Role("reviewer"))
//		bob.Connect(t, cotal.WithHandler(review), cotal.WithJoin("team")) // closed at cleanup
//		if _, err := alice.Connect(t).Ask(t.Context(), "reviewer", []wire.Part{wire.TextPart("review #12")}); err != nil {
//			t.Fatal(err)
//		}
//		...
//	}
//
// StartMesh, Mesh.Agent and Agent.Connect fail the test on error and clean up after it. Where
// there is no testing.TB (an example, TestMain), NewMesh and Mesh.Issue return errors instead,
// cotal.Connect takes the agent's Creds, and the caller closes what it opened: its clients first,
// then the mesh.
//
// Each Mesh is independent (its own broker, keys and temporary directory), so parallel tests may
// each start their own. The package owns no agent: the mesh runs no supervisor and spawns no
// process; the agent under test runs in the test.
package cotaltest
