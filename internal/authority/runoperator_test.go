package authority_test

import (
	"testing"

	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
)

// TestRunOperatorAtTheBroker: a run operator replays its one run's journal and the broker
// refuses it any other run's replay durable and any append to a journal.
func TestRunOperatorAtTheBroker(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	got, err := m.Ledger("").ReadJournal(ctx, "r-1")
	if err != nil {
		t.Fatalf("a run operator could not replay its run: %v", err)
	}
	if len(got.Records) != 0 {
		t.Errorf("a fresh journal replayed %d records", len(got.Records))
	}

	cred, err := m.Ledger("").RunOperator("r-1", "tk1")
	if err != nil {
		t.Fatal(err)
	}
	c := m.Connect(t, cred)
	other := "$JS.API.CONSUMER.CREATE." + meshwire.WFJStream(m.Space) + "." + meshwire.WFJReplayDurable("r-2", "tk1") + "." + meshwire.WFJSubject(m.Space, "r-2")
	for _, subject := range []string{other, meshwire.WFJSubject(m.Space, "r-1"), "$JS.API.STREAM.INFO." + meshwire.WFJStream(m.Space)} {
		if err := c.Publish(subject, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if refused, err := c.Refused("Publish", subject); err != nil || !refused {
			t.Errorf("a run operator of r-1 published to %s: refused=%v, %v", subject, refused, err)
		}
	}
}
