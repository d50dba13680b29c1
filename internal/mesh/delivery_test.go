package mesh_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
)

// TestMeshWritesTheMembershipFeed: the delivery daemon `cotal up` runs writes the membership
// feed on its own membership-rw credential and system observer: an agent's durable join shows
// in its row, live and durable.
func TestMeshWritesTheMembershipFeed(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t, meshtest.WithDaemons())
	ctx := t.Context()
	alice := m.AgentCred(t, ledger.Request{Name: "alice", Subscribe: []string{"general"}})
	c, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(alice.Creds), cotal.WithJoin("general"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)

	reader := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileMembership, Name: "reader"}))
	feed := meshwire.MembershipBucket(m.Space)
	var row meshwire.MembershipRow
	meshtest.Eventually(t, 30*time.Second, "alice's membership row", func() bool {
		e, err := kvget.Get(ctx, reader.Conn, feed, alice.Principal.String())
		if err != nil {
			if !errors.Is(err, kvget.ErrNotFound) {
				t.Logf("read the feed: %v", err)
			}
			return false
		}
		if json.Unmarshal(e.Value, &row) != nil {
			return false
		}
		return slices.Contains(row.Live, "general") && slices.Contains(row.Durable, "general")
	})
	if _, err := kvget.Get(ctx, reader.Conn, feed, meshwire.MembershipFeedKey); err != nil {
		t.Errorf("the feed's heartbeat row: %v", err)
	}
}
