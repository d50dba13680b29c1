package runhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/lang"
	"github.com/gocotal/cotal/wire"
)

// hosted is one run this host drives: its connections, its journal, and what it knows of it.
type hosted struct {
	id, takeover     string
	driver, mediator *nats.Conn
	js               jetstream.JetStream
	journal          *Journal
	recorded         []lang.Entry // the journal's writes before this takeover, for the resume
	pins             lang.Pins
	statusRev        uint64
	done             chan struct{}

	mu      sync.Mutex
	state   meshwire.RunState
	err     string
	value   json.RawMessage
	watched map[string]bool                 // the agents the run monitors, by principal
	open    map[string]openPoint            // the checkpoints waited on, by step key
	answers map[string]chan meshwire.Answer // by checkpoint token: a waiting checkpoint's wake
	// conclaves are the conclaves the run is inside, by step key.
	conclaves map[string]openConclave
	// turning holds, per agent, the turn or ask under way: one at a time.
	turning map[string]chan struct{}
	// roster are the agents the run spawned, by principal: live, and (once rosterRead) in the
	// spawn steps the journal recorded before this host took it.
	roster     map[string]SeatSpec
	rosterRead bool
}

// openPoint is a step the run waits on an answer to: a checkpoint, or an ask (whose seat, the
// agent asked, may answer it too).
type openPoint struct {
	token, prompt, seat string
}

// openFor opens p at step key, and returns the channel its answer wakes and the func that closes
// it again.
func (r *hosted) openFor(key string, p openPoint) (<-chan meshwire.Answer, func()) {
	wake := make(chan meshwire.Answer, 1)
	r.mu.Lock()
	if r.open == nil {
		r.open = map[string]openPoint{}
	}
	r.open[key] = p
	r.answers[p.token] = wake
	r.mu.Unlock()
	return wake, func() {
		r.mu.Lock()
		delete(r.open, key)
		delete(r.answers, p.token)
		r.mu.Unlock()
	}
}

func now() int64 { return time.Now().UnixMilli() }

func (r *hosted) close() {
	if r.mediator != nil {
		r.mediator.Close()
	}
	if r.driver != nil {
		r.driver.Close()
	}
}

func (r *hosted) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// take takes the run's journal and records it running: a fresh run's spec is written once, a
// resumed run's is read back for its pins (and a run whose status shows it ended is errEnded).
func (r *hosted) take(ctx context.Context, h *Host, source string, fresh bool) error {
	spec, status, err := r.records(ctx, h)
	if err != nil {
		return err
	}
	switch {
	case fresh && spec != nil:
		return fmt.Errorf("run %s exists already", r.id)
	case !fresh && spec == nil:
		return fmt.Errorf("run %s: %w on endpoint %s", r.id, ErrNoRun, h.cfg.Serve.Endpoint)
	case status != nil && (status.State == meshwire.RunCompleted || status.State == meshwire.RunFailed):
		return fmt.Errorf("run %s %s: %w", r.id, status.State, ErrEnded)
	}
	if err := revocation(ctx, r.mediator, h.cfg.Space, h.cfg.Serve.Endpoint, r.id); err != nil {
		return fmt.Errorf("run %s: %w", r.id, err) // no host takes a revoked run back
	}
	t, err := Take(ctx, r.js, h.cfg.Space, r.id, r.takeover, Holder{Name: string(h.cfg.Serve.Instance), Epoch: h.cfg.Serve.Epoch}, now)
	if err != nil {
		return err
	}
	r.journal, r.recorded = t.Journal, t.Entries
	if fresh {
		r.pins = lang.Pins{Seed: r.id, StartedAt: now(), YieldEvery: lang.DefaultYieldEvery, StepBudget: lang.DefaultStepBudget,
			EffectCeiling: lang.DefaultEffectCeiling, LanguageVersion: lang.LanguageVersion}
		data, err := json.Marshal(meshwire.RunSpec{V: 1, Run: r.id, Pins: r.pins, CreatedAt: now()})
		if err != nil {
			return err
		}
		if _, err := r.put(ctx, h, meshwire.RecordSpecLeaf, data, 0); err != nil {
			return fmt.Errorf("record run %s: %w", r.id, err)
		}
	} else {
		r.pins = spec.Pins
	}
	if err := r.keepProgram(ctx, h, source); err != nil {
		return err
	}
	return r.setStatus(ctx, h, meshwire.RunRunning, t.FencingToken)
}

// keepProgram records source as the run's program on the mesh, unless it is recorded already:
// a host that did not start the run takes it over from there.
func (r *hosted) keepProgram(ctx context.Context, h *Host, source string) error {
	data, rev, err := readRunRecord(ctx, r.mediator, h.cfg.Space, h.cfg.Serve.Endpoint, r.id, meshwire.RecordProgramLeaf)
	if err != nil {
		return err
	}
	if data != nil {
		if p, err := meshwire.ParseRunProgram(data, r.id); err == nil && p.ProgramHash == lang.ProgramHash(source) {
			return nil
		}
	}
	if data, err = json.Marshal(meshwire.NewRunProgram(r.id, source, now())); err != nil {
		return err
	}
	if _, err := r.put(ctx, h, meshwire.RecordProgramLeaf, data, rev); err != nil {
		return fmt.Errorf("record run %s's program: %w", r.id, err)
	}
	return nil
}

// readRunRecord reads one half of run runID's record on endpoint from the leader: its value and
// revision, nil when it was never written or was deleted.
func readRunRecord(ctx context.Context, nc *nats.Conn, space wire.Space, endpoint wire.EndpointName, runID, leaf string) ([]byte, uint64, error) {
	e, err := kvget.Get(ctx, nc, meshwire.RecordsBucket(space), meshwire.RecordKey(meshwire.RecordRun, endpoint, runID, leaf))
	if errors.Is(err, kvget.ErrNotFound) || err == nil && e.Deleted {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	return e.Value, e.Revision, nil
}

// records reads the run's spec and status records; nil for one not written.
func (r *hosted) records(ctx context.Context, h *Host) (*meshwire.RunSpec, *meshwire.RunStatus, error) {
	var spec *meshwire.RunSpec
	var status *meshwire.RunStatus
	data, _, err := readRunRecord(ctx, r.mediator, h.cfg.Space, h.cfg.Serve.Endpoint, r.id, meshwire.RecordSpecLeaf)
	if err != nil {
		return nil, nil, err
	}
	if data != nil {
		s, err := meshwire.ParseRunSpec(data)
		if err != nil {
			return nil, nil, fmt.Errorf("run %s's spec record: %w", r.id, err)
		}
		spec = &s
	}
	data, rev, err := readRunRecord(ctx, r.mediator, h.cfg.Space, h.cfg.Serve.Endpoint, r.id, meshwire.RecordStatusLeaf)
	if err != nil {
		return nil, nil, err
	}
	if data != nil {
		s, err := meshwire.ParseRunStatus(data)
		if err != nil {
			return nil, nil, fmt.Errorf("run %s's status record: %w", r.id, err)
		}
		status, r.statusRev = &s, rev
	}
	return spec, status, nil
}

// put writes one half of the run record on the driver's commit path, expecting rev as the key's
// last revision (0: create only).
func (r *hosted) put(ctx context.Context, h *Host, leaf string, data []byte, rev uint64) (uint64, error) {
	subject := h.recordsBucket().Subject(meshwire.RecordKey(meshwire.RecordRun, h.cfg.Serve.Endpoint, r.id, leaf))
	ack, err := r.js.Publish(ctx, subject, data, jetstream.WithExpectLastSequencePerSubject(rev))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// setStatus writes the run's status record at the revision the last one left.
func (r *hosted) setStatus(ctx context.Context, h *Host, state meshwire.RunState, fencing int64) error {
	st := meshwire.RunStatus{V: 1, State: state, Holder: string(h.cfg.Serve.Instance), Epoch: h.cfg.Serve.Epoch,
		FencingToken: fencing, JournalHigh: r.journal.Len() - 1, At: now()}
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	rev, err := r.put(ctx, h, meshwire.RecordStatusLeaf, data, r.statusRev)
	if err != nil {
		return fmt.Errorf("record run %s %s: %w", r.id, state, err)
	}
	r.statusRev = rev
	r.mu.Lock()
	r.state = state
	r.mu.Unlock()
	return nil
}

// drive runs the program to its end, or until the host stops (the run then stays running in
// its records, for the next host to take back).
func (r *hosted) drive(hostCtx context.Context, h *Host, source string) {
	defer close(r.done)
	ctx, revoke := context.WithCancelCause(hostCtx)
	defer revoke(nil)
	go r.watchRevocation(ctx, h, revoke)
	handler := &meshHandler{h: h, r: r, revoke: revoke, runCtx: ctx}
	res, err := lang.Run(ctx, source, lang.RunOptions{RunID: r.id, Handler: handler, Pins: &r.pins,
		Journal: r.recorded, Store: func(e lang.Entry) error { return r.journal.Append(ctx, e) }})
	if hostCtx.Err() != nil {
		return // the host stopped: the journal says where the run is
	}
	handler.releaseConclaves()
	state, why := meshwire.RunCompleted, ""
	if cause := context.Cause(ctx); errors.Is(cause, ErrRevoked) {
		err = cause // revoked while it ran: it ends failed, as revoked, wherever it was
	}
	switch {
	case err != nil:
		state, why = meshwire.RunFailed, err.Error()
	case res.Err != nil:
		state, why = meshwire.RunFailed, res.Err.Error()
		var f *lang.Fault
		if errors.As(res.Err, &f) && (f.Code == "L5025" || f.Code == "L5012") {
			state = meshwire.RunReleased
		}
	}
	if why != "" {
		h.cfg.Log.Warn("workflow run ended", "run", r.id, "state", state, "why", why)
	}
	r.mu.Lock()
	r.err = why
	r.mu.Unlock()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.setStatus(wctx, h, state, r.journal.fencing); err != nil {
		h.cfg.Log.Warn("run: could not record its end", "run", r.id, "state", state, "err", err)
	}
}

// status is the run's status as this host knows it.
func (r *hosted) status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := Status{RunID: r.id, State: r.state, Error: r.err}
	for key, p := range r.open {
		st.Open = append(st.Open, OpenCheckpoint{Step: key, Prompt: p.prompt})
	}
	return st
}
