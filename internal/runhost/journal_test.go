package runhost_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/runhost"
	"github.com/gocotal/cotal/lang"
	"github.com/gocotal/cotal/wire"
)

// driver connects run runID's driver for takeover tk and returns its JetStream.
func driver(t *testing.T, m *meshtest.Mesh, runID, tk string) (*meshtest.Client, jetstream.JetStream) {
	t.Helper()
	serve := &authority.ServeRows{Endpoint: wire.ManagerEndpoint, Instance: wire.NewLifecycleUID(), Epoch: 1}
	cred, err := m.Ledger("").RunDriver(wire.DevOwner, runID, tk, serve, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c := m.Connect(t, cred)
	js, err := jetstream.New(c.Conn)
	if err != nil {
		t.Fatal(err)
	}
	return c, js
}

func now() int64 { return time.Now().UnixMilli() }

// TestJournalTakeover: a holder takes a fresh run with its genesis activation and appends steps;
// a later holder replays them and takes the run over under the next fencing token; the first
// holder's next append is refused by the broker's sequence check.
func TestJournalTakeover(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	_, js := driver(t, m, "r-1", "tka")
	first, err := runhost.Take(ctx, js, m.Space, "r-1", "tka", runhost.Holder{Name: "mgr-a", Epoch: 1}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Entries) != 0 || first.Len() != 1 {
		t.Fatalf("a fresh run: %d entries, %d records", len(first.Entries), first.Len())
	}
	pending := lang.Entry{V: 1, Run: "r-1", Kind: "sleep", Name: "nap", InputHash: "sha256:00", State: lang.StatePending}
	settled := pending
	settled.State, settled.Status = lang.StateSettled, lang.StatusOK
	for _, e := range []lang.Entry{pending, settled} {
		if err := first.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}

	_, js2 := driver(t, m, "r-1", "tkb")
	second, err := runhost.Take(ctx, js2, m.Space, "r-1", "tkb", runhost.Holder{Name: "mgr-b", Epoch: 1}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Entries) != 2 || second.Entries[1].State != lang.StateSettled || len(second.Activations) != 1 || second.Len() != 4 {
		t.Fatalf("the takeover replayed %+v, %d activations, %d records", second.Entries, len(second.Activations), second.Len())
	}
	if err := first.Append(ctx, settled); !errors.Is(err, runhost.ErrSuperseded) {
		t.Errorf("the superseded holder appended: %v", err)
	}
	if err := first.Append(ctx, settled); !errors.Is(err, runhost.ErrSuperseded) {
		t.Errorf("a poisoned queue appended again: %v", err)
	}
	if second.FencingToken != 2 {
		t.Errorf("the takeover's fencing token: %d", second.FencingToken)
	}
	_, js3 := driver(t, m, "r-1", "tkc")
	if _, err := runhost.Take(ctx, js3, m.Space, "r-1", "tkc", runhost.Holder{Name: "mgr-c", Epoch: 1}, now); err != nil {
		t.Fatal(err)
	}
	if err := second.Append(ctx, settled); !errors.Is(err, runhost.ErrSuperseded) {
		t.Errorf("the holder taken over appended: %v", err)
	}
}

// TestDriverAtTheBroker: a run's driver appends to its own run's journal and the broker refuses
// it another run's journal and another takeover's replay durable.
func TestDriverAtTheBroker(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	c, js := driver(t, m, "r-1", "tka")
	if _, err := js.Publish(t.Context(), meshwire.WFJSubject(m.Space, "r-1"), []byte(`{}`)); err != nil {
		t.Fatalf("the driver could not append to its own run: %v", err)
	}
	wfj := meshwire.WFJStream(m.Space)
	for _, subject := range []string{
		meshwire.WFJSubject(m.Space, "r-2"),
		"$JS.API.CONSUMER.CREATE." + wfj + "." + meshwire.WFJReplayDurable("r-2", "tka") + "." + meshwire.WFJSubject(m.Space, "r-2"),
		"$JS.API.CONSUMER.CREATE." + wfj + "." + meshwire.WFJReplayDurable("r-1", "tkz") + "." + meshwire.WFJSubject(m.Space, "r-1"),
		"$JS.API.STREAM.PURGE." + wfj,
	} {
		if err := c.Publish(subject, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if refused, err := c.Refused("Publish", subject); err != nil || !refused {
			t.Errorf("the driver of r-1 published to %s: refused=%v, %v", subject, refused, err)
		}
	}
}
