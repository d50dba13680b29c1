package runhost

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/lang"
)

// meshHandler performs a hosted run's effects. A sleep's or a checkpoint's deadline counts from
// the step's recorded start, and what resolves a checkpoint is a record on the mesh, so a run
// taken back after its host died waits out what is left, and sees what was answered while it was
// down. A spawn and a turn go to the manager's seats: a spawn names its agent after its step's
// request id, so a replay or a recovery starts none twice. A wait observes the mesh from its
// step's recorded start. A conclave is a channel its members are told of (conclave.go). An
// effect this host cannot perform yet (a spawn or a turn before its manager serves seats) is
// refused as a capability (L5016): the run is held, not failed, and a resume on a host that can
// perform it goes on from there.
type meshHandler struct {
	h *Host
	r *hosted
	// revoke stops the run, as revoked, when an effect finds its revocation marker.
	revoke context.CancelCauseFunc
	// runCtx is the run's own context: an effect's context that ends while it lives is a branch
	// the run cut.
	runCtx context.Context
}

// Now is the host's clock.
func (m *meshHandler) Now() int64 { return now() }

// Perform performs one effect.
func (m *meshHandler) Perform(ctx context.Context, req *lang.Request) (*lang.Outcome, error) {
	switch req.Kind {
	case "sleep":
		d, err := durationArg(req, 0)
		if err != nil {
			return nil, err
		}
		if err := until(ctx, req.StartedAt+d); err != nil {
			return nil, err
		}
		return &lang.Outcome{}, nil
	case "checkpoint":
		return m.checkpoint(ctx, req)
	case "notify":
		return m.notify(ctx, req)
	case "monitor":
		return m.monitor(req)
	case "wait":
		return m.wait(ctx, req)
	case "spawn", "turn", "ask":
		seats := m.h.seatsOf()
		if seats == nil {
			break
		}
		if req.Kind == "spawn" {
			return m.spawn(ctx, seats, req)
		}
		release, err := m.r.takeTurn(ctx, req)
		if err != nil {
			return nil, err
		}
		defer release()
		if req.Kind == "ask" {
			return m.ask(ctx, seats, req)
		}
		return m.turn(ctx, seats, req)
	}
	return nil, &lang.CapabilityRefusal{Code: "L5016", Message: req.Kind + " is not durable on this host"}
}

// durationArg reads the duration argument i of req, in ms.
func durationArg(req *lang.Request, i int) (int64, error) {
	if i >= len(req.Args) {
		return 0, fmt.Errorf("%s takes a duration", req.Kind)
	}
	s, _ := req.Args[i].(string)
	return lang.ParseDuration(s)
}

// until waits until the wall clock reaches deadline (Unix ms).
func until(ctx context.Context, deadline int64) error {
	wait := time.Until(time.UnixMilli(deadline))
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// checkpoint waits for the step's answer, raced against its timeout: the first answer recorded
// for its token (its request id) resolves it, whenever it was given.
func (m *meshHandler) checkpoint(ctx context.Context, req *lang.Request) (*lang.Outcome, error) {
	token := req.RequestID
	prompt, _ := req.Args[1].(string)
	wake, closeOpen := m.r.openFor(req.Key, openPoint{token: token, prompt: prompt})
	defer closeOpen()
	a, err := m.h.readAnswer(ctx, m.r.mediator, token)
	if err != nil {
		return nil, err
	}
	if a == nil {
		var expiry <-chan time.Time
		if t, ok := req.Option("timeout").(string); ok {
			d, err := lang.ParseDuration(t)
			if err != nil {
				return nil, err
			}
			timer := time.NewTimer(time.Until(time.UnixMilli(req.StartedAt + d)))
			defer timer.Stop()
			expiry = timer.C
		}
		select {
		case got := <-wake:
			a = &got
		case <-expiry:
			out := lang.NewRecord()
			out.Set("outcome", "expired")
			out.Set("at", float64(now()))
			return &lang.Outcome{Result: out}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	out := lang.NewRecord()
	out.Set("outcome", "resolved")
	for k, raw := range map[string]json.RawMessage{"value": a.Value, "artifact": a.Artifact} {
		if len(raw) == 0 {
			continue
		}
		v, err := lang.ParseJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("the answer's %s: %w", k, err)
		}
		out.Set(k, v)
	}
	out.Set("by", a.By)
	out.Set("answerId", a.AnswerID)
	out.Set("at", float64(a.At))
	return &lang.Outcome{Result: out}, nil
}

// Addressee returns the agent run runID's open step asks for a value (an ask), and whether the
// step is open: "" for a checkpoint, which anyone who may answer runs answers.
func (h *Host) Addressee(runID, step string) (string, bool) {
	h.mu.Lock()
	r := h.runs[runID]
	h.mu.Unlock()
	if r == nil {
		return "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.open[step]
	return p.seat, ok
}

// Answer records by's answer value to run runID's open checkpoint at step (its key, as the
// journal prints it), and wakes the run: the answer is create-only under the checkpoint's token,
// so the first answer given is the one the run takes.
func (h *Host) Answer(ctx context.Context, runID, step string, value json.RawMessage, by string) (meshwire.Answer, error) {
	h.mu.Lock()
	r := h.runs[runID]
	h.mu.Unlock()
	var p openPoint
	ok := false
	if r != nil {
		r.mu.Lock()
		p, ok = r.open[step]
		r.mu.Unlock()
	}
	if !ok {
		return meshwire.Answer{}, fmt.Errorf("run %s, step %s: %w here", runID, step, ErrNotWaiting)
	}
	v, err := lang.ParseJSON(value)
	if err == nil {
		_, err = lang.Canonical(v)
	}
	if err != nil {
		return meshwire.Answer{}, fmt.Errorf("%w: %v", ErrBadAnswer, err)
	}
	a, err := meshwire.NewAnswer(p.token, by, value, nil, now())
	if err != nil {
		return meshwire.Answer{}, err
	}
	data, err := json.Marshal(a)
	if err != nil {
		return meshwire.Answer{}, err
	}
	subject := h.recordsBucket().Subject(meshwire.RecordKey(meshwire.RecordAnswer, h.cfg.Serve.Endpoint, p.token, a.AnswerID))
	if _, err := r.js.Publish(ctx, subject, data, jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
		return meshwire.Answer{}, fmt.Errorf("record the answer to %s: %w", step, err)
	}
	r.mu.Lock()
	wake := r.answers[p.token]
	r.mu.Unlock()
	if wake != nil {
		select {
		case wake <- a:
		default:
		}
	}
	return a, nil
}
