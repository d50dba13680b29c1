package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gocotal/cotal/internal/jsapi"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/endpoint"
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
	// presence watches the presence of every agent of the goal's name, opened before the agent
	// started so its first presence row cannot race the watch's start; nil when it could not be
	// opened (watchErr). stopWatch ends it.
	presence  jetstream.KeyWatcher
	watchErr  error
	stopWatch context.CancelFunc
	exited    <-chan struct{} // closed when that agent is done, whatever runs under its name later
	cancel    chan string     // a cancel's mode; buffered, the first one counts
	done      chan struct{}   // closed once result is set
	result    *ResultFact     // the terminal fact this goal committed; set before done closes
}

// goalKey names a goal: its id, scoped to the caller that started it.
type goalKey struct {
	caller wire.Lifecycle
	id     string
}

// goalRetention is how long a settled goal's outcome is kept to answer a late cancel (SPEC §13.6:
// results are kept at least 24 h).
const goalRetention = 24 * time.Hour

// settled returns the goal's terminal fact, or nil while it is open.
func (g *goal) settled() *ResultFact {
	select {
	case <-g.done:
		return g.result
	default:
		return nil
	}
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

// watchPresence opens the presence watch of the agents named name for a goal, before the agent
// starts: any owner's, since the principal is known only once it is issued; await keeps the one
// the goal spawned.
func (g *goal) watchPresence(name string) {
	ctx, cancel := context.WithCancel(g.svc.ctx)
	g.stopWatch = cancel
	g.presence, g.watchErr = g.svc.presence.Watch(ctx, "*."+name)
}

// follow waits for the spawned agent's readiness and records the goal's outcome. It holds a
// goals slot, released when it returns.
func (g *goal) follow() {
	defer func() { <-g.svc.goals }()
	// The watch ends with its context: nats.go unsubscribes in a goroutine of its own, which then
	// waits out the delete of its consumer, a request the manager's credential may not make. A
	// KeyWatcher.Stop here would make the goal wait those seconds too.
	defer g.stopWatch()
	g.progress(phaseLaunched, "", nil)
	state, data := g.await()
	if state == "" {
		return // the manager is stopping: its agents with it, and the goal stays open
	}
	g.settle(state, data)
}

// settle ends the goal in state with data: its result fact, then its terminal progress event.
func (g *goal) settle(state string, data map[string]any) {
	raw, _ := json.Marshal(data) // maps of strings and numbers always encode
	fact, err := g.commit(state, raw)
	if err != nil {
		g.svc.cfg.Log.Error("record a goal's result", "goal", g.id, "agent", g.agent, "err", err)
	}
	g.result = fact
	close(g.done)
	g.progress(phaseTerminal, state, raw)
}

// await returns succeeded once the agent's lifecycle is present, failed once its process is done
// first, cancelled once a cancel has stopped the agent, uncertain when the readiness deadline
// passes with none of these, and "" when the manager stops. Whichever comes first is the goal's
// one terminal state.
func (g *goal) await() (string, map[string]any) {
	ctx, cancel := context.WithTimeout(g.svc.ctx, g.svc.cfg.Readiness)
	defer cancel()
	who := map[string]any{"name": g.name, "id": g.agent.Principal.String(), "lifecycleUid": string(g.agent.UID)}
	if g.presence == nil {
		g.svc.cfg.Log.Warn("watch a spawned agent's presence", "agent", g.agent, "err", g.watchErr)
		return GoalUncertain, map[string]any{"reason": fmt.Sprintf("the manager could not watch the agent's presence: %v; inspect it, do not re-issue", g.watchErr)}
	}
	for {
		select {
		case e := <-g.presence.Updates():
			if e == nil || !presentAs(e, g.agent) {
				continue
			}
			g.progress(phasePresence, "", nil)
			return GoalSucceeded, who
		case mode := <-g.cancel:
			g.progress(phaseCancelling, "", nil)
			graceful := mode != endpoint.CancelTerminate
			if st, ok := g.svc.sup.Lookup(g.name); ok && st.LifecycleUID == g.agent.UID { // never a successor
				if err := g.svc.sup.StopAgent(g.svc.ctx, g.name, graceful); err != nil && g.svc.ctx.Err() == nil {
					g.svc.cfg.Log.Warn("stop a cancelled spawn's agent", "agent", g.agent, "err", err)
				}
			}
			who["reason"] = fmt.Sprintf("cancelled by its caller (%s); the agent was stopped", mode)
			return GoalCancelled, who
		case <-g.exited:
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

// presentAs reports whether the presence watch entry e shows the agent who present: its row
// written, not offline, and of its lifecycle (a row that names none is taken as its).
func presentAs(e jetstream.KeyValueEntry, who wire.Lifecycle) bool {
	if e.Operation() != jetstream.KeyValuePut || e.Key() != wire.PresenceKey(who.Principal) {
		return false
	}
	p, err := wire.DecodePresence(e.Key(), e.Value())
	return err == nil && p.Status != wire.StatusOffline && (p.LifecycleUID == "" || p.LifecycleUID == who.UID)
}

// commit writes the goal's terminal result fact create-only and returns it: if a fact is already
// there, the first one wins and this one is dropped. The fact is returned either way, so the
// outcome a later cancel is answered with is the one this goal reached.
func (g *goal) commit(state string, data json.RawMessage) (*ResultFact, error) {
	outcome, err := wire.Digest(data)
	if err != nil {
		return nil, err
	}
	fact := &ResultFact{V: 1, GoalID: g.id, Fingerprint: g.fingerprint, State: state, OutcomeDigest: outcome, Data: data,
		Committer: Committer{InstanceID: string(g.svc.cfg.Instance), Epoch: g.svc.cfg.Epoch}, TS: wire.MillisOf(time.Now())}
	subject, err := g.svc.cfg.Space.FactSubject(wire.ManagerEndpoint, wire.GoalResultTopic(g.caller, g.id)...)
	if err != nil {
		return fact, err
	}
	raw, _ := json.Marshal(fact) // always encodes
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = g.svc.js.Publish(ctx, subject, raw, jetstream.WithExpectLastSequencePerSubject(0))
	if jsapi.Conflict(err) {
		g.svc.cfg.Log.Info("a spawn goal's result was already recorded; the first stands", "goal", g.id)
		return fact, nil
	}
	return fact, err
}

// cancelGoal is the reserved cancel command: the caller's own goal (its id, scoped to the
// subject's caller; the operator's instrument, whose every CLI run is a fresh lifecycle, reaches
// any goal of this manager by id) is asked to stop, and the reply is the terminal state that won, cancelled or
// a completion that got there first. An unknown goal, or one already settled, is
// failed-precondition; a settled one's outcome is attached as a DetailGoalOutcome detail.
func (svc *Service) cancelGoal(ctx context.Context, req *endpoint.Request, mode string) (any, error) {
	g := svc.goal(ctx, req.Caller(), req.Envelope.GoalID)
	if g == nil {
		return nil, notExecuted(wire.CodeFailedPrecondition, "this manager holds no goal %s of %s", req.Envelope.GoalID, req.Caller())
	}
	if fact := g.settled(); fact != nil {
		return nil, settledRefusal(fact)
	}
	select {
	case g.cancel <- mode:
	default: // a cancel is already under way: this one waits for the same end
	}
	select {
	case <-g.done:
	case <-ctx.Done():
		return nil, wire.NewEndpointError(wire.CodeDeadlineExceeded, wire.OutcomeUnknown, "goal %s is cancelling; follow its progress for the end", g.id)
	}
	if g.result == nil {
		return nil, wire.NewEndpointError(wire.CodeInternal, wire.OutcomeUnknown, "goal %s ended without a recorded result", g.id)
	}
	return CancelResult{GoalID: g.id, State: g.result.State}, nil
}

// goal returns the goal id that caller may cancel: its own, or for the operator's instrument
// (host launch authority) any goal of this manager with that id; nil when there is none.
func (svc *Service) goal(ctx context.Context, caller wire.Lifecycle, id string) *goal {
	svc.mu.Lock()
	g := svc.goalIndex[goalKey{caller: caller, id: id}]
	svc.mu.Unlock()
	if g != nil || !svc.cfg.HostLaunch(ctx, caller) {
		return g
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	for k, other := range svc.goalIndex {
		if k.id == id {
			return other
		}
	}
	return nil
}

// CancelResult is cancel's reply: the goal and the terminal state that won.
type CancelResult struct {
	GoalID string `json:"goalId"`
	State  string `json:"state"`
}

// settledRefusal is the failed-precondition of a cancel that came after its goal settled, with
// the cached outcome attached.
func settledRefusal(fact *ResultFact) *wire.EndpointError {
	e := notExecuted(wire.CodeFailedPrecondition, "goal %s is already %s", fact.GoalID, fact.State)
	raw, _ := json.Marshal(fact) // always encodes
	e.Details = append(e.Details, wire.ErrorDetail{Kind: wire.DetailGoalOutcome, Extra: map[string]json.RawMessage{"outcome": raw}})
	return e
}

// track indexes a goal for cancel, and forgets the goals settled longer than goalRetention ago.
func (svc *Service) track(g *goal) {
	now := time.Now()
	svc.mu.Lock()
	defer svc.mu.Unlock()
	for k, old := range svc.goalIndex {
		if f := old.settled(); f != nil && now.Sub(f.TS.Time()) > goalRetention {
			delete(svc.goalIndex, k)
		}
	}
	svc.goalIndex[goalKey{caller: g.caller, id: g.id}] = g
}
