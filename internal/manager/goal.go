package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/wire"
)

// goal follows one spawn from its acceptance to its terminal fact.
type goal struct {
	svc         *Service
	caller      wire.Lifecycle // who asked: the goal's subjects are scoped to it
	id          string         // the goal id: the spawn request's id
	fingerprint string
	name        string
	agent       wire.Lifecycle // what was spawned
}

// ProgressEvent is a spawn goal's progress on the event plane, as the reference publishes it:
// phases handoff, launched, presence, then terminal with the state and its data.
type ProgressEvent struct {
	V      int             `json:"v"`
	GoalID string          `json:"goalId"`
	Phase  string          `json:"phase"`
	State  string          `json:"state,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// ResultFact is a goal's terminal result on the fact plane, written create-only: the first
// terminal fact wins (SPEC §13.6).
type ResultFact struct {
	V             int              `json:"v"`
	GoalID        string           `json:"goalId"`
	Fingerprint   string           `json:"fingerprint"`
	State         string           `json:"state"`
	OutcomeDigest string           `json:"outcomeDigest"`
	Data          json.RawMessage  `json:"data,omitempty"`
	Committer     Committer        `json:"committer"`
	TS            wire.EpochMillis `json:"ts"`
}

// Committer is the incarnation that wrote a result fact.
type Committer struct {
	InstanceID string `json:"instanceId"`
	Epoch      int64  `json:"epoch"`
}

// IsTerminalPhase reports whether a progress event is a goal's last.
func (e *ProgressEvent) IsTerminalPhase() bool { return e.Phase == phaseTerminal }

// progress publishes one progress event; the event stream captures it. A lost event is logged:
// the result fact, not the events, is the goal's outcome.
func (g *goal) progress(phase, state string, data json.RawMessage) {
	subject, err := g.svc.cfg.Space.EventSubject(wire.ManagerEndpoint, g.svc.cfg.Instance, g.svc.cfg.Epoch, wire.GoalProgressTopic(g.caller, g.id)...)
	if err == nil {
		raw, _ := json.Marshal(ProgressEvent{V: 1, GoalID: g.id, Phase: phase, State: state, Data: data}) // always encodes
		err = g.svc.cfg.Conn.Publish(subject, raw)
	}
	if err != nil {
		g.svc.cfg.Log.Warn("publish a goal's progress", "goal", g.id, "phase", phase, "err", err)
	}
}

// follow waits for the spawned agent's readiness and records the goal's outcome. It holds a
// goals slot, released when it returns.
func (g *goal) follow() {
	defer func() { <-g.svc.goals }()
	g.progress(phaseLaunched, "", nil)
	state, data := g.await()
	if state == "" {
		return // the manager is stopping: its agents with it, and the goal stays open
	}
	raw, _ := json.Marshal(data) // maps of strings and numbers always encode
	if err := g.commit(state, raw); err != nil {
		g.svc.cfg.Log.Error("record a spawn goal's result", "goal", g.id, "agent", g.agent, "err", err)
	}
	g.progress(phaseTerminal, state, raw)
}

// await returns succeeded once the agent's lifecycle is present, failed once its process is done
// first, uncertain when the readiness deadline passes with neither, and "" when the manager
// stops.
func (g *goal) await() (string, map[string]any) {
	ctx, cancel := context.WithTimeout(g.svc.ctx, g.svc.cfg.Readiness)
	defer cancel()
	who := map[string]any{"name": g.name, "id": g.agent.Principal.String(), "lifecycleUid": string(g.agent.UID)}
	w, err := g.svc.presence.Watch(ctx, wire.PresenceKey(g.agent.Principal))
	if err != nil {
		g.svc.cfg.Log.Warn("watch a spawned agent's presence", "agent", g.agent, "err", err)
		return GoalUncertain, map[string]any{"reason": fmt.Sprintf("the manager could not watch the agent's presence: %v; inspect it, do not re-issue", err)}
	}
	defer func() { _ = w.Stop() }() // the goal is settled either way
	done := g.svc.sup.Done(g.name)
	for {
		select {
		case e := <-w.Updates():
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			p, err := wire.DecodePresence(e.Key(), e.Value())
			if err != nil || p.Status == wire.StatusOffline || p.LifecycleUID != "" && p.LifecycleUID != g.agent.UID {
				continue
			}
			g.progress(phasePresence, "", nil)
			return GoalSucceeded, who
		case <-done:
			st, _ := g.svc.sup.Lookup(g.name)
			who["reason"] = fmt.Sprintf("the agent's process ended (%s, exit %d) before it was present", st.State, st.ExitCode)
			return GoalFailed, who
		case <-ctx.Done():
			if g.svc.ctx.Err() != nil {
				return "", nil
			}
			who["reason"] = fmt.Sprintf("not present within %s of its spawn; inspect it, do not re-issue", g.svc.cfg.Readiness)
			return GoalUncertain, who
		}
	}
}

// commit writes the goal's terminal result fact create-only: if a fact is already there, the
// first one wins and this one is dropped.
func (g *goal) commit(state string, data json.RawMessage) error {
	outcome, err := wire.Digest(data)
	if err != nil {
		return err
	}
	subject, err := g.svc.cfg.Space.FactSubject(wire.ManagerEndpoint, wire.GoalResultTopic(g.caller, g.id)...)
	if err != nil {
		return err
	}
	raw, _ := json.Marshal(ResultFact{V: 1, GoalID: g.id, Fingerprint: g.fingerprint, State: state, OutcomeDigest: outcome, Data: data,
		Committer: Committer{InstanceID: string(g.svc.cfg.Instance), Epoch: g.svc.cfg.Epoch}, TS: wire.MillisOf(time.Now())}) // always encodes
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = g.svc.js.Publish(ctx, subject, raw, jetstream.WithExpectLastSequencePerSubject(0))
	if apiErr, ok := errors.AsType[*jetstream.APIError](err); ok && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		g.svc.cfg.Log.Info("a spawn goal's result was already recorded; the first stands", "goal", g.id)
		return nil
	}
	return err
}
