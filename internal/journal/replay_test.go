package journal_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/broker/brokertest"
	"github.com/gocotal/cotal/internal/journal"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
)

const sp = wire.Space("main")

func openJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	js := brokertest.JetStream(t)
	if _, err := space.Provision(t.Context(), js, sp, wire.ChannelDefaults{DeliveryClass: wire.ClassDurable}); err != nil {
		t.Fatal(err)
	}
	return js
}

// appendRecord appends to a run's journal the way a driver does: compare-and-set on the run
// subject's last sequence.
func appendRecord(t *testing.T, js jetstream.JetStream, runID string, expect uint64, body string) uint64 {
	t.Helper()
	msg := nats.NewMsg(meshwire.WFJSubject(sp, runID))
	msg.Data = []byte(body)
	msg.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatUint(expect, 10))
	ack, err := js.PublishMsg(t.Context(), msg)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

func activation(run string, n int) string {
	return fmt.Sprintf(`{"v":1,"kind":"activation","run":%q,"n":%d,"holder":"local.mgr","fencingToken":1,"epoch":1,"replayedTo":0,"at":1}`, run, n)
}

func step(run string, n int) string {
	return fmt.Sprintf(`{"v":1,"kind":"step","run":%q,"n":%d,"at":2,"entry":{"i":%d}}`, run, n, n)
}

func TestReplay(t *testing.T) {
	t.Parallel()
	js := openJS(t)
	ctx := t.Context()
	seq := appendRecord(t, js, "r-1", 0, activation("r-1", 0))
	// Another run interleaved in the stream is not part of r-1's replay.
	appendRecord(t, js, "r-2", 0, activation("r-2", 0))
	const steps = 1200 // more than one fetch batch
	for n := 1; n <= steps; n++ {
		seq = appendRecord(t, js, "r-1", seq, step("r-1", n))
	}
	got, err := journal.Replay(ctx, js, sp, "r-1", "tk1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Records) != steps+1 || got.LastSeq != seq || got.Records[0].Kind != meshwire.JournalActivation || string(got.Records[steps].Entry) != fmt.Sprintf(`{"i":%d}`, steps) {
		t.Fatalf("replayed %d records up to seq %d, want %d up to %d", len(got.Records), got.LastSeq, steps+1, seq)
	}
	// The durable is gone after the replay, so the same takeover id can replay again.
	if _, err := js.Consumer(ctx, meshwire.WFJStream(sp), meshwire.WFJReplayDurable("r-1", "tk1")); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("the replay durable outlived its replay: %v", err)
	}
	empty, err := journal.Replay(ctx, js, sp, "r-3", "tk1")
	if err != nil || len(empty.Records) != 0 || empty.LastSeq != 0 {
		t.Errorf("an empty journal replayed as %+v, %v", empty, err)
	}
}

func TestReplayRefusesABrokenJournal(t *testing.T) {
	t.Parallel()
	js := openJS(t)
	i := 0
	for name, records := range map[string][]string{
		"a gap":                 {activation("r-1", 0), step("r-1", 2)},
		"no genesis activation": {step("r-1", 0)},
		"a malformed record":    {activation("r-1", 0), `{"v":1,"kind":"step"}`},
		"another run's record":  {activation("r-1", 0), step("r-9", 1)},
	} {
		i++
		t.Run(name, func(t *testing.T) {
			run := "broken" + strconv.Itoa(i) // a run of its own per case
			var seq uint64
			for _, r := range records {
				seq = appendRecord(t, js, run, seq, strings.ReplaceAll(r, `"run":"r-1"`, `"run":"`+run+`"`))
			}
			if _, err := journal.Replay(t.Context(), js, sp, run, "tk"); !errors.Is(err, journal.ErrBroken) {
				t.Errorf("replaying a journal with %s = %v, want ErrBroken", name, err)
			}
		})
	}
	if _, err := journal.Replay(t.Context(), js, sp, "r.1", "tk"); err == nil {
		t.Error("a dotted run id was replayed")
	}
}
