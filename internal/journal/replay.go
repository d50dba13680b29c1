// Package journal reads a workflow run's journal (SPEC §14.4): a replay through a durable of its
// own, named by its takeover id, that reads every record of one run from the leader, checks the
// chain and deletes the durable after.
package journal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// Replay durable settings: an explicit-ack pull durable whose server-side reaper cleans up after
// a replay that could not delete it.
const (
	replayAckWait     = 60 * time.Second
	replayMaxPending  = 1000
	replayInactive    = 5 * time.Minute
	replayFetchExpiry = 15 * time.Second
)

// Replayed is a run's journal as one replay read it.
type Replayed struct {
	Records []meshwire.JournalRecord
	// LastSeq is the stream sequence of the last record, 0 for an empty journal: the expected
	// last-subject sequence of the run's next append.
	LastSeq uint64
}

// ConsumerConfig is the replay durable of one run and takeover.
func ConsumerConfig(space wire.Space, runID, takeoverID string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:           meshwire.WFJReplayDurable(runID, takeoverID),
		FilterSubject:     meshwire.WFJSubject(space, runID),
		AckPolicy:         jetstream.AckExplicitPolicy,
		AckWait:           replayAckWait,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		MaxAckPending:     replayMaxPending,
		InactiveThreshold: replayInactive,
	}
}

// Replay reads every record of run runID through the durable wfj_<runId>_<takeoverId>, which it
// creates and always deletes. It needs only the replay rows of a run-operator (or driver)
// credential for that run and takeover.
func Replay(ctx context.Context, js jetstream.JetStream, space wire.Space, runID, takeoverID string) (_ *Replayed, err error) {
	if err := meshwire.ValidateRunID(runID); err != nil {
		return nil, err
	}
	if err := meshwire.ValidateTakeoverID(takeoverID); err != nil {
		return nil, err
	}
	cfg := ConsumerConfig(space, runID, takeoverID)
	cons, err := js.CreateConsumer(ctx, meshwire.WFJStream(space), cfg)
	if err != nil {
		return nil, fmt.Errorf("create the replay durable of run %s: %w", runID, err)
	}
	info := cons.CachedInfo()
	if info.Delivered.Consumer != 0 || info.NumAckPending != 0 {
		return nil, fmt.Errorf("replay run %s: %w", runID, ErrRaced) // the durable is the other replay's to delete
	}
	defer func() {
		derr := js.DeleteConsumer(context.WithoutCancel(ctx), meshwire.WFJStream(space), cfg.Durable)
		if derr != nil && !errors.Is(derr, jetstream.ErrConsumerNotFound) {
			err = errors.Join(err, fmt.Errorf("delete the replay durable %s: %w", cfg.Durable, derr))
		}
	}()
	out := &Replayed{}
	for pending := info.NumPending; uint64(len(out.Records)) < pending; {
		batch := min(pending-uint64(len(out.Records)), replayMaxPending)
		fctx, cancel := context.WithTimeout(ctx, replayFetchExpiry)
		msgs, ferr := jsapi.Fetch(fctx, cons, int(batch), jetstream.FetchContext(fctx))
		cancel()
		for _, msg := range msgs {
			meta, err := msg.Metadata()
			if err != nil {
				return nil, fmt.Errorf("replay run %s: %w", runID, err)
			}
			rec, err := meshwire.ParseJournalRecord(msg.Data())
			if err != nil {
				return nil, fmt.Errorf("%w: run %s, stream seq %d: %v", ErrBroken, runID, meta.Sequence.Stream, err)
			}
			if err := msg.Ack(); err != nil {
				return nil, fmt.Errorf("replay run %s: ack: %w", runID, err)
			}
			out.Records = append(out.Records, rec)
			out.LastSeq = meta.Sequence.Stream
		}
		if ferr != nil {
			return nil, fmt.Errorf("replay run %s: %w", runID, ferr)
		}
		if len(msgs) == 0 {
			return nil, fmt.Errorf("replay run %s: %d of %d records arrived", runID, len(out.Records), pending)
		}
	}
	return out, checkChain(runID, out.Records)
}

// checkChain checks that records are ordinals 0, 1, ... of run runID, starting with the genesis
// activation (one that replayed nothing).
func checkChain(runID string, records []meshwire.JournalRecord) error {
	for i, r := range records {
		switch {
		case r.Run != runID:
			return fmt.Errorf("%w: record %d belongs to run %q", ErrBroken, i, r.Run)
		case r.N != int64(i):
			return fmt.Errorf("%w: record %d has ordinal %d", ErrBroken, i, r.N)
		case i == 0 && (r.Kind != meshwire.JournalActivation || r.ReplayedTo != 0):
			return fmt.Errorf("%w: run %s does not start with its genesis activation", ErrBroken, runID)
		}
	}
	return nil
}
