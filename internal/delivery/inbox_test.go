package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/broker/brokertest"
	"github.com/gocotal/cotal/internal/delivery"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
)

// apiAudit is the part of a JetStream API audit advisory the tests read.
type apiAudit struct {
	Subject  string `json:"subject"`
	Response string `json:"response"`
	at       time.Time
}

// audits collects the broker's audit of every JetStream API request on subject.
func audits(t *testing.T, nc *nats.Conn, subject string) func() []apiAudit {
	t.Helper()
	var mu sync.Mutex
	var got []apiAudit
	sub, err := nc.Subscribe(jsapi.AuditAdvisory, func(m *nats.Msg) {
		var a apiAudit
		if json.Unmarshal(m.Data, &a) == nil && a.Subject == subject {
			a.at = time.Now()
			mu.Lock()
			got = append(got, a)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() []apiAudit {
		mu.Lock()
		defer mu.Unlock()
		return append([]apiAudit(nil), got...)
	}
}

// openSpace starts a bare open broker with the space "main" provisioned and returns a connection
// to it.
func openSpace(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	js := brokertest.JetStream(t)
	nc := js.Conn()
	if _, err := space.Provision(t.Context(), js, "main", wire.ChannelDefaults{DeliveryClass: wire.ClassDurable}); err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// runOpenDaemon runs a delivery daemon for "main" on its own open connection to url, logging to
// log, with an optional handler hook; it stops at cleanup.
func runOpenDaemon(t *testing.T, url string, log *slog.Logger, hook func(context.Context, string) func()) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	d, err := delivery.New(nc, delivery.Config{Space: "main", Holder: "local.delivery", Log: log, Standby: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if hook != nil {
		delivery.SetHook(d, hook)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := d.Run(ctx); err != nil {
			t.Errorf("daemon: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// publishRetired stores an inbox entry for a lifecycle that has no ACL row, as the fan-out leaves
// one behind for a lifecycle retired since, and returns its sequence in the inbox stream.
func publishRetired(t *testing.T, js jetstream.JetStream, sp wire.Space) uint64 {
	t.Helper()
	ghost, err := wire.NewPrincipal("local", "ghost")
	if err != nil {
		t.Fatal(err)
	}
	life := wire.Lifecycle{Principal: ghost, UID: wire.NewLifecycleUID()}
	from := wire.EndpointRef{ID: "local.alice", Name: "alice"}
	msg := &wire.CotalMessage{ID: "m1", TS: wire.MillisOf(time.Now()), Space: string(sp), From: from, Channel: "general", Parts: say("for a ghost")}
	body, err := json.Marshal(meshwire.InboxEntry{Msg: msg, Channel: "general", Seq: 1, Reason: meshwire.ReasonDurableChannel, Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(t.Context(), meshwire.DinboxSubject(sp, life), body)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// readerSettled reports whether the reader holds nothing pending or unacknowledged.
func readerSettled(ctx context.Context, js jetstream.JetStream, sp wire.Space) bool {
	c, err := js.Consumer(ctx, meshwire.InboxStream(sp), meshwire.ReaderDurable)
	if err != nil {
		return false
	}
	info := c.CachedInfo()
	return info.NumPending == 0 && info.NumAckPending == 0
}

// inboxMsgs returns how many entries the inbox stream holds.
func inboxMsgs(t *testing.T, js jetstream.JetStream, sp wire.Space) uint64 {
	t.Helper()
	st, err := js.Stream(t.Context(), meshwire.InboxStream(sp))
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().State.Msgs
}

// retiredWait bounds how long an entry for a retired lifecycle takes to reach its delete: its
// deliveries until the daemon gives the lifecycle up, two seconds apart, and the delete's retries.
const retiredWait = 40 * time.Second

// TestRetiredEntryIsDeleted: on an authenticated mesh, the daemon deletes an inbox entry of a
// retired lifecycle with its own least-privilege grant, and the broker's answer is a success.
func TestRetiredEntryIsDeleted(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	runDaemon(t, m, "delivery")
	js := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileDelivery, Name: "inspector"})).JS
	publishRetired(t, js, m.Space)
	meshtest.Eventually(t, retiredWait, "the entry of the retired lifecycle to be deleted", func() bool {
		return inboxMsgs(t, js, m.Space) == 0 && readerSettled(t.Context(), js, m.Space)
	})
}

// TestDeleteOfAGoneEntrySucceeds: an entry someone else deleted before the daemon did counts as
// deleted. The broker refuses the daemon's delete (a file stream answers "no message found"), and
// the daemon settles the entry without retrying it or reporting a failure.
func TestDeleteOfAGoneEntrySucceeds(t *testing.T) {
	meshtest.Long(t, "waits out delete retries")
	t.Parallel()
	nc, js := openSpace(t)
	sp := wire.Space("main")
	deletes := audits(t, nc, jsapi.MsgDelete+meshwire.InboxStream(sp))
	var seq atomic.Uint64
	var reads atomic.Int32
	hook := func(_ context.Context, handler string) func() {
		// The fifth delivery is the one the daemon gives the lifecycle up on: take the entry
		// away just before it deletes it.
		if handler == "reader" && reads.Add(1) == 5 {
			st, err := js.Stream(context.Background(), meshwire.InboxStream(sp))
			if err == nil {
				err = st.DeleteMsg(context.Background(), seq.Load())
			}
			if err != nil {
				t.Errorf("delete the entry ahead of the daemon: %v", err)
			}
		}
		return func() {}
	}
	logs := &meshtest.Logs{Min: slog.LevelDebug}
	runOpenDaemon(t, nc.ConnectedUrl(), slog.New(logs), hook)
	seq.Store(publishRetired(t, js, sp))

	meshtest.Eventually(t, retiredWait, "the daemon's delete of the entry already gone", func() bool { return len(deletes()) >= 2 })
	meshtest.Eventually(t, wait, "the reader to settle the entry", func() bool { return readerSettled(t.Context(), js, sp) })
	time.Sleep(3 * time.Second) // a nak would redeliver it within two seconds
	if n := reads.Load(); n != 5 {
		t.Errorf("the entry was read %d times, want 5: a gone entry must be settled, not retried", n)
	}
	got := deletes()
	if len(got) != 2 {
		t.Fatalf("%d deletes of the entry, want the test's and the daemon's: %+v", len(got), got)
	}
	// The test's delete succeeded (the hook reports otherwise), so the daemon's is the one the
	// broker answered "no message found". The two advisories may arrive in either order.
	gone := 0
	for _, a := range got {
		if strings.Contains(a.Response, jsapi.StoreNoMessage) {
			gone++
		}
	}
	if gone != 1 {
		t.Errorf("the deletes were answered %s and %s, want one refusal saying %q", got[0].Response, got[1].Response, jsapi.StoreNoMessage)
	}
	if recs := logs.At(slog.LevelWarn, "inbox entry"); len(recs) > 0 {
		t.Errorf("a delete of a gone entry was reported as a failure: %s: %s", recs[0].Message, meshtest.Attr(recs[0], "err"))
	}
}

// TestRefusedDeleteIsRetriedThenReported: an inbox stream that refuses message deletes (deny_delete)
// makes the daemon's delete fail for good. The daemon reads the broker's refusal, tries again with
// a growing backoff, the bounded number of times, then logs the permanent failure, naming the entry,
// which stays in the stream, and settles the delivery instead of retrying it forever.
func TestRefusedDeleteIsRetriedThenReported(t *testing.T) {
	meshtest.Long(t, "waits out delete retries")
	t.Parallel()
	nc, js := openSpace(t)
	sp := wire.Space("main")
	st, err := js.Stream(t.Context(), meshwire.InboxStream(sp))
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.DenyDelete = true
	if _, err := js.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	deletes := audits(t, nc, jsapi.MsgDelete+meshwire.InboxStream(sp))
	logs := &meshtest.Logs{Min: slog.LevelDebug}
	runOpenDaemon(t, nc.ConnectedUrl(), slog.New(logs), nil)
	seq := publishRetired(t, js, sp)

	const failure = "cannot be deleted"
	meshtest.Eventually(t, retiredWait, "the permanent failure to be reported", func() bool { return len(logs.At(slog.LevelError, failure)) > 0 })
	rec := logs.At(slog.LevelError, failure)[0]
	if got := meshtest.Attr(rec, "seq"); got != fmt.Sprint(seq) {
		t.Errorf("the failure names sequence %s, want %d", got, seq)
	}
	if got := meshtest.Attr(rec, "err"); !strings.Contains(got, "message delete not permitted") {
		t.Errorf("the failure does not carry the broker's refusal: %s", got)
	}
	// The broker's audit of the last try may reach the test after the daemon's report of it.
	meshtest.Eventually(t, 5*time.Second, "every delete's audit", func() bool { return len(deletes()) >= delivery.DeleteAttempts })
	tries := deletes()
	if len(tries) != delivery.DeleteAttempts {
		t.Fatalf("%d deletes tried, want %d", len(tries), delivery.DeleteAttempts)
	}
	for i, try := range tries {
		if !strings.Contains(try.Response, `"err_code":10057`) {
			t.Errorf("try %d was answered %s", i+1, try.Response)
		}
	}
	for i := 2; i < len(tries); i++ {
		if before, gap := tries[i-1].at.Sub(tries[i-2].at), tries[i].at.Sub(tries[i-1].at); gap < before {
			t.Errorf("the wait before try %d (%s) is shorter than the one before try %d (%s)", i+1, gap, i, before)
		}
	}
	meshtest.Eventually(t, wait, "the reader to settle the entry", func() bool { return readerSettled(t.Context(), js, sp) })
	time.Sleep(3 * time.Second) // a nak would redeliver it within two seconds
	if n := len(deletes()); n != delivery.DeleteAttempts {
		t.Errorf("%d deletes after the failure was reported, want %d: a permanent failure is not retried", n, delivery.DeleteAttempts)
	}
	if n := inboxMsgs(t, js, sp); n != 1 {
		t.Errorf("the inbox stream holds %d entries, want the one the broker refused to delete", n)
	}
}
