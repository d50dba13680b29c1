// Package runhost hosts workflow runs on a mesh (SPEC §14): a Cotal Lang program driven against
// the mesh, its step journal appended to the run's own subject of the WFJ stream under the
// run's one-run driver credential, so a host that dies leaves a journal another resumes from.
package runhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/journal"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/metrics"
	"github.com/gocotal/cotal/lang"
	"github.com/gocotal/cotal/wire"
)

// Holder is who takes a run: its holder name (the hosting manager instance) and the epoch it
// serves at.
type Holder struct {
	Name  string
	Epoch int64
}

// ErrSuperseded reports a run another holder took: its activation outranks ours, or an append
// found the journal's head moved. The driver stops and never retries at the new head.
var ErrSuperseded = errors.New("runhost: the run was taken by another holder")

// Journal is a run's journal as its holder appends to it: one serial queue, each append fenced
// by the sequence the one before it left (Nats-Expected-Last-Subject-Sequence), so a second
// writer's append is refused rather than interleaved.
type Journal struct {
	js    jetstream.JetStream
	space wire.Space
	run   string
	now   func() int64
	// fencing is the fencing token its holder took the run under.
	fencing int64

	mu       sync.Mutex
	next     int64  // the ordinal of the next record
	last     uint64 // the stream sequence of the last record: the next append's expected one
	poisoned error  // an append whose outcome is unknown: nothing more is written
}

// Taken is a run's journal once its holder took it: the journal to append to, the steps it
// recorded before (every write, pending then settled, in order), the activations it held, and
// the fencing token the holder took it under.
type Taken struct {
	*Journal
	Entries      []lang.Entry
	Activations  []meshwire.JournalRecord
	FencingToken int64
}

// Take replays run runID's journal through the takeover's durable and appends h's activation at
// its head (SPEC §14.4), under the fencing token after the last activation's (1 for a fresh run,
// whose first record is its genesis activation). The activation is fenced by the replayed head:
// of two holders taking the run at once, the second's is refused (ErrSuperseded).
func Take(ctx context.Context, js jetstream.JetStream, space wire.Space, runID, takeoverID string, h Holder, now func() int64) (*Taken, error) {
	if h.Name == "" {
		return nil, fmt.Errorf("take run %s: a holder needs a name", runID)
	}
	rep, err := journal.Replay(ctx, js, space, runID, takeoverID)
	if err != nil {
		return nil, err
	}
	t := &Taken{Journal: &Journal{js: js, space: space, run: runID, now: now, next: int64(len(rep.Records)), last: rep.LastSeq}, FencingToken: 1}
	for _, r := range rep.Records {
		switch r.Kind {
		case meshwire.JournalActivation:
			t.Activations = append(t.Activations, r)
			t.FencingToken = max(t.FencingToken, r.FencingToken+1)
		case meshwire.JournalStep:
			var e lang.Entry
			if err := json.Unmarshal(r.Entry, &e); err != nil {
				return nil, fmt.Errorf("%w: run %s, record %d: its entry: %v", journal.ErrBroken, runID, r.N, err)
			}
			t.Entries = append(t.Entries, e)
		}
	}
	if err := lang.CheckJournal(runID, t.Entries); err != nil {
		return nil, fmt.Errorf("take run %s: %w", runID, err) // nothing is activated over it
	}
	t.fencing = t.FencingToken
	act := func(n int64) map[string]any {
		return map[string]any{"v": 1, "kind": meshwire.JournalActivation, "run": runID, "n": n,
			"holder": h.Name, "fencingToken": t.FencingToken, "epoch": h.Epoch, "replayedTo": n, "at": now()}
	}
	if err := t.append(ctx, act); err != nil {
		return nil, err
	}
	return t, nil
}

// Append writes one language journal write (a pending or a settled entry) as the run's next
// step record. It is lang.RunOptions.Store's shape: a refusal ends the run with L5010.
func (j *Journal) Append(ctx context.Context, e lang.Entry) error {
	entry, err := json.Marshal(e)
	if err != nil {
		return err
	}
	err = j.append(ctx, func(n int64) map[string]any {
		return map[string]any{"v": 1, "kind": meshwire.JournalStep, "run": j.run, "n": n, "at": j.now(), "entry": json.RawMessage(entry)}
	})
	if err == nil && e.State == lang.StateSettled {
		metrics.RunSteps.WithLabelValues(e.Kind, e.Status).Inc()
	}
	return err
}

// Len is the number of records the journal holds.
func (j *Journal) Len() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.next
}

// append writes the record record(n) builds for the next ordinal n.
func (j *Journal) append(ctx context.Context, record func(n int64) map[string]any) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.poisoned != nil {
		return j.poisoned
	}
	data, err := json.Marshal(record(j.next))
	if err != nil {
		return err
	}
	ack, err := j.js.Publish(ctx, meshwire.WFJSubject(j.space, j.run), data, jetstream.WithExpectLastSequencePerSubject(j.last))
	var apiErr *jetstream.APIError
	switch {
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence:
		j.poisoned = fmt.Errorf("append to run %s: %w: the journal moved past sequence %d", j.run, ErrSuperseded, j.last)
		return j.poisoned
	case err != nil:
		// The broker may have taken it: the queue cannot know its head any more.
		j.poisoned = fmt.Errorf("append to run %s: %w", j.run, err)
		return j.poisoned
	}
	j.last = ack.Sequence
	j.next++
	return nil
}
