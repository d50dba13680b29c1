package delivery_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/delivery"
	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// feedConfig returns the connections a membership feed runs on, reconciled every interval: a
// system-account observer that may list the space account's connections (and nothing else: not
// even subscribe its connection events), and a writer on the membership bucket.
func feedConfig(t *testing.T, m *meshtest.Mesh, interval time.Duration) *delivery.FeedConfig {
	t.Helper()
	nc, account := m.ConnzObserver(t)
	writer := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileMembership, Name: "membership"}))
	return &delivery.FeedConfig{Observer: nc, Account: account, Writer: writer.Conn, Interval: interval}
}

// runFeedDaemon runs a delivery daemon that writes the membership feed of feed.
func runFeedDaemon(t *testing.T, m *meshtest.Mesh, feed *delivery.FeedConfig) {
	t.Helper()
	c := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileDelivery, Name: "delivery"}))
	d, err := delivery.New(c.Conn, delivery.Config{Space: m.Space, Holder: "local.delivery", Standby: 100 * time.Millisecond, Feed: feed})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := d.Run(ctx); err != nil {
			t.Errorf("daemon: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// feedReader reads the membership feed as a dashboard does, on an observer credential.
type feedReader struct {
	t  *testing.T
	nc *nats.Conn
	b  wire.Bucket
}

func newFeedReader(t *testing.T, m *meshtest.Mesh) *feedReader {
	t.Helper()
	c := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileObserver, Name: "dashboard"}))
	return &feedReader{t: t, nc: c.Conn, b: meshwire.MembershipBucket(m.Space)}
}

// raw returns key's row, nil when it has none.
func (r *feedReader) raw(key string) []byte {
	r.t.Helper()
	e, err := kvget.Get(r.t.Context(), r.nc, r.b, key)
	if errors.Is(err, kvget.ErrNotFound) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	if e.Deleted {
		return nil
	}
	return e.Value
}

// row returns p's membership row, nil when it has none.
func (r *feedReader) row(p wire.Principal) *meshwire.MembershipRow {
	r.t.Helper()
	b := r.raw(p.String())
	if b == nil {
		return nil
	}
	var row meshwire.MembershipRow
	if err := json.Unmarshal(b, &row); err != nil {
		r.t.Fatalf("row of %s = %s: %v", p, b, err)
	}
	return &row
}

// awaitRow waits until p's row lists live and durable (nil: until p has no row).
func (r *feedReader) awaitRow(p wire.Principal, live, durable []string, what string) {
	r.t.Helper()
	meshtest.Eventually(r.t, wait, what, func() bool {
		row := r.row(p)
		if live == nil && durable == nil {
			return row == nil
		}
		return row != nil && slices.Equal(row.Live, live) && slices.Equal(row.Durable, durable)
	})
}

// joinDurable joins channel on c as a durable member, once the daemon serves durable joins.
func joinDurable(t *testing.T, c *cotal.Client, channel string) {
	t.Helper()
	meshtest.Eventually(t, wait+delivery.LeaseTTL, "a durable join of "+channel, func() bool {
		r, err := c.Join(t.Context(), channel)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Durable {
			_ = c.Leave(t.Context(), channel) // the daemon was not active yet; try again
		}
		return r.Durable
	})
}

// TestMembershipFeedFollowsJoinsLeavesAndConnections: the active daemon writes the membership
// feed SPEC §8 describes, one row per principal under its dot-form, {live, durable, observedAt},
// plus the feed's heartbeat. With no periodic reconcile, the events alone keep it current: a
// durable join shows the channel both live (the broker's view of the subscription) and durable;
// a leave removes the row; a disconnect leaves the durable membership, which outlives the
// connection.
func TestMembershipFeedFollowsJoinsLeavesAndConnections(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	runFeedDaemon(t, m, feedConfig(t, m, time.Hour))
	feed := newFeedReader(t, m)

	var beat meshwire.MembershipFeedRow
	meshtest.Eventually(t, wait+delivery.LeaseTTL, "the feed's heartbeat", func() bool {
		b := feed.raw(meshwire.MembershipFeedKey)
		return b != nil && json.Unmarshal(b, &beat) == nil && beat.ObservedAt > 0
	})

	general := []string{"general"}
	aliceCred := m.AgentCred(t, ledger.Request{Name: "alice", Subscribe: general})
	alice := connect(t, m, aliceCred.Creds, nil)
	joinDurable(t, alice, "general")
	feed.awaitRow(aliceCred.Principal, general, general, "alice's row after her durable join")

	var fields map[string]json.RawMessage
	if err := json.Unmarshal(feed.raw(aliceCred.Principal.String()), &fields); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"durable", "live", "observedAt"}) {
		t.Errorf("alice's row has the fields %v, want durable, live, observedAt", keys)
	}
	if row := feed.row(aliceCred.Principal); row.ObservedAt < beat.ObservedAt {
		t.Errorf("alice's row was observed at %d, before the first heartbeat at %d", row.ObservedAt, beat.ObservedAt)
	}

	if err := alice.Leave(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	feed.awaitRow(aliceCred.Principal, nil, nil, "alice's row to go with her leave")

	joinDurable(t, alice, "general")
	feed.awaitRow(aliceCred.Principal, general, general, "alice's row after she joins again")
	if err := alice.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	feed.awaitRow(aliceCred.Principal, []string{}, general, "alice's row after she disconnects")

	var last meshwire.MembershipFeedRow
	if err := json.Unmarshal(feed.raw(meshwire.MembershipFeedKey), &last); err != nil {
		t.Fatal(err)
	}
	if last.Count != 1 || last.ObservedAt <= beat.ObservedAt {
		t.Errorf("the heartbeat after the disconnect is %+v, want a count of 1 observed after %d", last, beat.ObservedAt)
	}
}

// TestMembershipFeedShowsLiveSubscriptions: a live join, a wildcard one included, shows in the
// feed as the pattern the connection subscribes, with no durable membership, and goes at the
// leave. A live join or leave raises no event, so the periodic reconcile finds them.
func TestMembershipFeedShowsLiveSubscriptions(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	runFeedDaemon(t, m, feedConfig(t, m, 300*time.Millisecond))
	feed := newFeedReader(t, m)

	team := []string{"team.>"}
	bobCred := m.AgentCred(t, ledger.Request{Name: "bob", Subscribe: team})
	bob := connect(t, m, bobCred.Creds, nil)
	res, err := bob.Join(t.Context(), "team.>")
	if err != nil {
		t.Fatal(err)
	}
	if res.Durable {
		t.Fatalf("a wildcard join is durable: %+v", res)
	}
	feed.awaitRow(bobCred.Principal, team, []string{}, "bob's row after his live join")
	if err := bob.Leave(t.Context(), "team.>"); err != nil {
		t.Fatal(err)
	}
	feed.awaitRow(bobCred.Principal, nil, nil, "bob's row to go with his leave")
}
