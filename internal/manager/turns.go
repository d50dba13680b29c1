package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/runhost"
	"github.com/gocotal/cotal/wire"
)

// The turn relay: a run asks one of its seats (an agent this manager spawned) for one turn;
// the seat pulls its pending turns (turn-pending) and reports how each ended (turn-yield). The
// manager relays and stays run-ignorant: the payload is the run's, opaque here.

// Yield is how a seat ended a turn: done, blocked, or handoff (to another agent), with a note.
type Yield struct {
	Status string `json:"status"`
	To     string `json:"to,omitempty"`
	Note   string `json:"note,omitempty"`
	At     int64  `json:"at"`
}

// The refusals of a turn.
var (
	// ErrSeatGone reports a seat this manager does not run.
	ErrSeatGone = errors.New("manager: no such seat runs")
	// ErrSeatDown reports a seat that stopped during its turn.
	ErrSeatDown = errors.New("manager: the seat is down")
	// ErrTurnDeadline reports a turn its seat did not yield before its deadline.
	ErrTurnDeadline = errors.New("manager: the turn's deadline elapsed")
)

// turn is one open turn.
type turn struct {
	goalID     string
	seat       string // the seat's principal
	payload    string
	acceptedAt int64
	deadlineAt int64
	yielded    chan Yield // buffered: the first yield
}

// turnTable holds the open turns, and the yields of the turns that ended, by goal id.
type turnTable struct {
	mu    sync.Mutex
	open  map[string]*turn
	ended map[string]Yield
}

// PendingTurn is one of a seat's pending turns, as turn-pending lists it.
type PendingTurn struct {
	GoalID     string `json:"goalId"`
	Payload    string `json:"payload"`
	AcceptedAt int64  `json:"acceptedAt"`
	DeadlineAt int64  `json:"deadlineAt"`
}

// SpawnSeat starts the seat sp describes for a workflow run, as the manager's own: from its
// persona (an agent file of the manager's catalog), with what the run's step sets over it, and
// granted to read and post on sp.Channels beyond what the persona grants. It returns once the
// seat is present on the mesh: an error when its process ends first, or it is not present
// within the manager's readiness deadline. A seat of that name already running is the one the
// run spawned before (a replay, or a recovery), and is not started again.
func (svc *Service) SpawnSeat(ctx context.Context, sp runhost.SeatSpec) (Status, error) {
	if st, ok := svc.sup.Lookup(sp.Name); ok && alive(st) {
		return st, nil
	}
	spec, err := svc.seatSpec(sp)
	if err != nil {
		return Status{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, svc.cfg.Readiness)
	defer cancel()
	// Watched before the seat starts, so its first presence row cannot come before the watch.
	w, err := svc.presence.Watch(wctx, "*."+sp.Name)
	if err != nil {
		return Status{}, fmt.Errorf("watch seat %s's presence: %w", sp.Name, err)
	}
	st, err := svc.sup.Spawn(ctx, spec)
	if errors.Is(err, ErrAlreadyExists) {
		// Another step of the run is starting the same seat (branches asking it at once): it
		// is the one this step asked for, once it runs.
		st, err = svc.awaitAlive(ctx, sp.Name, err)
	}
	if err != nil {
		return st, err
	}
	if err := svc.awaitPresent(wctx, w, st); err != nil {
		// Not up: stopped, so no seat the run does not know it has runs on with its grant.
		sctx, cancel := context.WithTimeout(svc.ctx, 10*time.Second)
		defer cancel()
		if serr := svc.sup.StopAgent(sctx, sp.Name, false); serr != nil && !errors.Is(serr, ErrNotFound) {
			svc.cfg.Log.Warn("stop a run's seat that did not come up", "seat", sp.Name, "err", serr)
		}
		return st, err
	}
	return st, nil
}

// seatSpec is the spec of the seat sp: its persona's, with the model, variant and role the step
// sets (a role only as the persona declares it: a run gives no agent a role its persona does
// not), joined to the channels the step names besides the persona's (within the persona's read
// access), and granted sp.Channels beyond the persona.
func (svc *Service) seatSpec(sp runhost.SeatSpec) (Spec, error) {
	if svc.cfg.Personas == "" {
		return Spec{}, errors.New("this manager keeps no persona catalog to spawn a run's seat from")
	}
	args := SpawnArgs{Name: sp.Name, Config: sp.Persona, Model: sp.Model, Variant: sp.Variant}
	capabilities, refusal := args.applyPersona(svc.cfg.Personas)
	if refusal != nil {
		return Spec{}, refusal
	}
	if sp.Role != "" && sp.Role != args.Role {
		return Spec{}, fmt.Errorf("role %s: persona %s declares %q; a run gives no agent a role its persona does not", sp.Role, sp.Persona, args.Role)
	}
	args.Config = ""
	if args.Cwd == "" {
		args.Cwd = svc.cfg.Workspace
	}
	read := args.AllowSubscribe
	if len(read) == 0 {
		read = args.Subscribe
	}
	for _, ch := range sp.Join {
		if !wire.ChannelInAllow(read, ch) {
			return Spec{}, fmt.Errorf("join %s: persona %s may not read it (%q)", ch, sp.Persona, read)
		}
		if !slices.Contains(args.Subscribe, ch) {
			args.Subscribe = append(args.Subscribe, ch)
		}
	}
	for _, ch := range sp.Channels {
		if err := wire.ValidateChannel(ch); err != nil {
			return Spec{}, err
		}
	}
	if len(sp.Channels) > 0 {
		// An empty read ACL defaults to the channels joined: keep that, and add to it.
		args.AllowSubscribe = append(slices.Clone(read), sp.Channels...)
		args.AllowPublish = append(args.AllowPublish, sp.Channels...)
	}
	spec, refusal := args.spec(false)
	if refusal != nil {
		return Spec{}, refusal
	}
	spec.Capabilities = capabilities
	return spec, nil
}

// awaitAlive waits until seat name runs; err when ctx ends first.
func (svc *Service) awaitAlive(ctx context.Context, name string, err error) (Status, error) {
	for {
		if st, ok := svc.sup.Lookup(name); ok && alive(st) {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return Status{}, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// awaitPresent waits, on the presence watch w, until the seat st is present on the mesh: an
// error when its process ends first, or ctx ends.
func (svc *Service) awaitPresent(ctx context.Context, w jetstream.KeyWatcher, st Status) error {
	p, err := wire.ParsePrincipal(st.Principal)
	if err != nil {
		return err
	}
	who := wire.Lifecycle{Principal: p, UID: st.LifecycleUID}
	exited := svc.sup.Done(st.Name)
	for {
		select {
		case e := <-w.Updates():
			if e != nil && presentAs(e, who) {
				return nil
			}
		case <-exited:
			return fmt.Errorf("seat %s's process ended before it joined the mesh", st.Name)
		case <-ctx.Done():
			return fmt.Errorf("seat %s did not join the mesh within %s: %w", st.Name, svc.cfg.Readiness, ctx.Err())
		}
	}
}

// Turn asks the seat name for one turn under goalID and waits for its yield. The same goal
// asked again (a recovery) joins the open turn, or gets the yield it ended with; a seat this
// manager does not run is ErrSeatGone, one that stops during the turn ErrSeatDown, and one that
// does not yield by deadline ErrTurnDeadline.
func (svc *Service) Turn(ctx context.Context, name, goalID, payload string, deadline time.Time) (Yield, error) {
	if err := ctx.Err(); err != nil {
		return Yield{}, err // asked by a branch already cut: no turn opens
	}
	st, ok := svc.sup.Lookup(name)
	if !ok || !alive(st) {
		return Yield{}, fmt.Errorf("seat %s: %w", name, ErrSeatGone)
	}
	t, opened := svc.turns.openTurn(goalID, st.Principal, payload, deadline)
	if t == nil {
		y := svc.turns.yieldOf(goalID)
		return y, nil
	}
	if opened {
		svc.tellTurn(t)
	}
	return svc.awaitYield(ctx, name, t, nil)
}

// EndTurn withdraws seat name's open turn goalID, unanswered: whoever asked it stopped waiting.
// The seat no longer finds it pending, and a yield of it is refused.
func (svc *Service) EndTurn(name, goalID string) {
	if st, ok := svc.sup.Lookup(name); ok {
		svc.turns.closeFor(st.Principal, goalID)
	}
}

// errTurnCancelled reports a turn its caller cancelled.
var errTurnCancelled = errors.New("manager: the turn was cancelled by its caller")

// awaitYield waits for the yield of seat name's open turn t: ErrSeatDown when the seat stops
// first, ErrTurnDeadline at the turn's deadline, errTurnCancelled when cancel fires (the turn
// is closed in each of these), ctx's error when ctx ends (the turn stays open).
func (svc *Service) awaitYield(ctx context.Context, name string, t *turn, cancel <-chan string) (Yield, error) {
	timer := time.NewTimer(time.Until(time.UnixMilli(t.deadlineAt)))
	defer timer.Stop()
	select {
	case y := <-t.yielded:
		return y, nil
	case <-svc.sup.Done(name):
		svc.turns.close(t.goalID)
		return Yield{}, fmt.Errorf("seat %s exited during its turn: %w", name, ErrSeatDown)
	case <-timer.C:
		svc.turns.close(t.goalID)
		return Yield{}, fmt.Errorf("seat %s: %w", name, ErrTurnDeadline)
	case mode := <-cancel:
		svc.turns.close(t.goalID)
		return Yield{}, fmt.Errorf("%w (%s)", errTurnCancelled, mode)
	case <-ctx.Done():
		return Yield{}, ctx.Err()
	}
}

// TurnArgs are turn's args: the payload the seat pulls back verbatim (the run's, opaque here),
// how long the whole turn may take, and the goal of the turn this one honors a handoff of.
type TurnArgs struct {
	Payload     string `json:"payload"`
	DeadlineMs  int64  `json:"deadlineMs"`
	HandoffFrom string `json:"handoffFrom,omitempty"`
}

// maxTurnDeadline bounds the turn command's deadlineMs: a month, beyond which a turn's goal
// would hold its slot for longer than any run waits.
const maxTurnDeadline = 31 * 24 * time.Hour

// TurnAcceptance is turn's reply: spawn's acceptance floor (the seat the goal is pinned to, the
// goal and the incarnation that executes it, with no readiness deadline) and the deadline the
// manager armed (Unix ms).
type TurnAcceptance struct {
	Acceptance
	DeadlineAt int64 `json:"deadlineAt"`
}

// turnCmd wakes the target seat for one turn on its caller's behalf: the agent that spawned the
// seat, or one with host launch authority. The reply is the acceptance; the goal settles
// succeeded with the yield (blocked and handoff are yields too), failed with the reason
// agent-down or turn-deadline, or cancelled.
func (svc *Service) turnCmd(ctx context.Context, req *endpoint.Request) (any, error) {
	var args TurnArgs
	if err := json.Unmarshal(req.Args(), &args); err != nil {
		return nil, notExecuted(wire.CodeBadRequest, "args: %v", err)
	}
	st, refusal := svc.seatOf(req)
	if refusal != nil {
		return nil, refusal
	}
	if caller := req.Caller(); st.SpawnedBy != caller.String() && !svc.cfg.HostLaunch(ctx, caller) {
		return nil, notExecuted(wire.CodePermissionDenied, "%s was not spawned by %s: an agent asks turns only of the agents it spawned", st.Name, caller.Principal)
	}
	if !alive(st) {
		return nil, notExecuted(wire.CodeFailedPrecondition, "%s is %s: it takes no turn", st.Name, st.State)
	}
	fingerprint, err := meshwire.Fingerprint(req.Route, req.Envelope)
	if err != nil {
		return nil, notExecuted(wire.CodeBadRequest, "fingerprint: %v", err)
	}
	if args.DeadlineMs > maxTurnDeadline.Milliseconds() {
		return nil, notExecuted(wire.CodeBadRequest, "deadlineMs %d: a turn may take at most %s", args.DeadlineMs, maxTurnDeadline)
	}
	deadline := time.Now().Add(time.Duration(args.DeadlineMs) * time.Millisecond)
	t, opened := svc.turns.openTurn(req.Envelope.ID, st.Principal, args.Payload, deadline)
	if t == nil || !opened {
		return nil, notExecuted(wire.CodeAlreadyExists, "turn %s was asked already", req.Envelope.ID)
	}
	select {
	case svc.goals <- struct{}{}:
	default:
		svc.turns.close(t.goalID)
		return nil, notExecuted(wire.CodeResourceExhausted, "this manager follows %d goals already", maxGoals)
	}
	p, _ := wire.ParsePrincipal(st.Principal) // the supervisor's own issue
	g := &goal{svc: svc, caller: req.Caller(), id: t.goalID, fingerprint: fingerprint, name: st.Name,
		agent: wire.Lifecycle{Principal: p, UID: st.LifecycleUID}, cancel: make(chan string, 1), done: make(chan struct{})}
	svc.track(g)
	svc.tellTurn(t)
	go g.followTurn(t, args.HandoffFrom) // owned: holds a goals slot that Stop waits for
	return TurnAcceptance{DeadlineAt: t.deadlineAt, Acceptance: Acceptance{Name: st.Name, Owner: p.Owner(), Actor: p.Actor(), UID: string(st.LifecycleUID),
		GoalID: g.id, Fingerprint: fingerprint, Executor: Executor{LifecycleUID: string(svc.cfg.Instance), Epoch: svc.cfg.Epoch}}}, nil
}

// followTurn waits for the turn t's end and records the goal's outcome. It holds a goals slot,
// released when it returns; a manager that stops leaves the goal open.
func (g *goal) followTurn(t *turn, handoffFrom string) {
	defer func() { <-g.svc.goals }()
	y, err := g.svc.awaitYield(g.svc.ctx, g.name, t, g.cancel)
	data := map[string]any{}
	if handoffFrom != "" {
		data["handoffFrom"] = handoffFrom
	}
	state := GoalSucceeded
	switch {
	case errors.Is(err, ErrSeatDown):
		state, data["reason"], data["detail"] = GoalFailed, "agent-down", err.Error()
	case errors.Is(err, ErrTurnDeadline):
		state, data["reason"], data["detail"] = GoalFailed, "turn-deadline", err.Error()
	case errors.Is(err, errTurnCancelled):
		state, data["reason"] = GoalCancelled, err.Error()
	case err != nil:
		return // the manager is stopping
	default:
		data["status"], data["at"] = y.Status, y.At
		if y.To != "" {
			data["to"] = y.To
		}
		if y.Note != "" {
			data["note"] = y.Note
		}
	}
	g.settle(state, data)
}

// alive reports whether a seat runs, or is being restarted.
func alive(st Status) bool { return st.State == StateRunning || st.State == StateRestarting }

// openTurn opens goalID's turn, or returns the one open already (opened false); nil when it
// ended.
func (tt *turnTable) openTurn(goalID, seat, payload string, deadline time.Time) (*turn, bool) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if _, ended := tt.ended[goalID]; ended {
		return nil, false
	}
	if t := tt.open[goalID]; t != nil {
		return t, false
	}
	if tt.open == nil {
		tt.open, tt.ended = map[string]*turn{}, map[string]Yield{}
	}
	t := &turn{goalID: goalID, seat: seat, payload: payload, acceptedAt: time.Now().UnixMilli(), deadlineAt: deadline.UnixMilli(), yielded: make(chan Yield, 1)}
	tt.open[goalID] = t
	return t, true
}

// tellTurnWithin bounds telling a seat's server of its turn.
const tellTurnWithin = 5 * time.Second

// tellTurn tells the seat's own server of the turn t just opened, in the background: a seat
// that is not told (no server, or one still starting) finds the turn by asking.
func (svc *Service) tellTurn(t *turn) {
	pending := PendingTurn{GoalID: t.goalID, Payload: t.payload, AcceptedAt: t.acceptedAt, DeadlineAt: t.deadlineAt}
	go func() {
		if err := svc.tellSeat(t.seat, HookTurn, pending); err != nil {
			svc.cfg.Log.Debug("turn: the seat's server was not told", "seat", t.seat, "goal", t.goalID, "err", err)
		}
	}()
}

// tellSeat tells the seat's own server of a hook event: an error when it has none, or it did
// not answer within tellTurnWithin.
func (svc *Service) tellSeat(seat, event string, payload any) error {
	tell := svc.sup.cfg.TellSeat
	if tell == nil {
		return errors.New("this manager tells its seats nothing")
	}
	p, err := wire.ParsePrincipal(seat)
	if err != nil {
		return err
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(svc.ctx, tellTurnWithin)
	defer cancel()
	return tell(ctx, p, event, b)
}

// SeatConclaves is what a seat is told of its conclaves: every conclave channel of a workflow
// run it is a member of now. A channel it joined as a conclave and no longer finds here is one
// it left.
type SeatConclaves struct {
	Channels []string `json:"channels"`
}

// TellConclaves tells the seat name the conclave channels it is a member of now, once its
// grant lets it read and post on each of them: ErrSeatGone when no such seat runs, an error
// naming the channel its grant does not cover. A seat with no server to tell (it finds them
// in its next turn's payload) is no error.
func (svc *Service) TellConclaves(name string, channels []string) error {
	st, spec, ok := svc.sup.lookupSpec(name)
	if !ok || !alive(st) {
		return fmt.Errorf("seat %s: %w", name, ErrSeatGone)
	}
	read := spec.AllowSubscribe
	if len(read) == 0 {
		read = spec.Subscribe
	}
	for _, ch := range channels {
		if !wire.ChannelInAllow(read, ch) || !slices.Contains(spec.AllowPublish, ch) {
			return fmt.Errorf("seat %s may not read and post on conclave channel %s: its grant reads %q and posts to %q", name, ch, read, spec.AllowPublish)
		}
	}
	if err := svc.tellSeat(st.Principal, HookConclaves, SeatConclaves{Channels: channels}); err != nil {
		svc.cfg.Log.Debug("conclaves: the seat's server was not told", "seat", name, "err", err)
	}
	return nil
}

func (tt *turnTable) yieldOf(goalID string) Yield {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return tt.ended[goalID]
}

func (tt *turnTable) close(goalID string) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	delete(tt.open, goalID)
}

// closeFor closes goalID's turn if it is seat's.
func (tt *turnTable) closeFor(seat, goalID string) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if t := tt.open[goalID]; t != nil && t.seat == seat {
		delete(tt.open, goalID)
	}
}

// pending lists seat's open turns, oldest first.
func (tt *turnTable) pending(seat string) []PendingTurn {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	out := []PendingTurn{}
	for _, t := range tt.open {
		if t.seat == seat {
			out = append(out, PendingTurn{GoalID: t.goalID, Payload: t.payload, AcceptedAt: t.acceptedAt, DeadlineAt: t.deadlineAt})
		}
	}
	slices.SortFunc(out, func(a, b PendingTurn) int { return int(a.AcceptedAt - b.AcceptedAt) })
	return out
}

// settle ends seat's turn goalID with y: false when seat has no such open turn.
func (tt *turnTable) settle(seat, goalID string, y Yield) bool {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	t := tt.open[goalID]
	if t == nil || t.seat != seat {
		return false
	}
	delete(tt.open, goalID)
	tt.ended[goalID] = y
	t.yielded <- y
	return true
}

func (svc *Service) turnPending(_ context.Context, req *endpoint.Request) (any, error) {
	return map[string]any{"turns": svc.turns.pending(req.Caller().Principal.String())}, nil
}

// TurnYieldArgs are turn-yield's args: the turn's goal id and how it ended.
type TurnYieldArgs struct {
	GoalID string `json:"goalId"`
	Status string `json:"status"`
	To     string `json:"to,omitempty"`
	Note   string `json:"note,omitempty"`
}

func (svc *Service) turnYield(_ context.Context, req *endpoint.Request) (any, error) {
	var args TurnYieldArgs
	if err := json.Unmarshal(req.Args(), &args); err != nil {
		return nil, notExecuted(wire.CodeBadRequest, "args: %v", err)
	}
	if args.Status == "handoff" && args.To == "" {
		return nil, notExecuted(wire.CodeBadRequest, "a handoff names the agent it hands off to (to)")
	}
	y := Yield{Status: args.Status, To: args.To, Note: args.Note, At: time.Now().UnixMilli()}
	if !svc.turns.settle(req.Caller().Principal.String(), args.GoalID, y) {
		return nil, notExecuted(wire.CodeNotFound, "%s has no open turn %s", req.Caller().Principal, args.GoalID)
	}
	return map[string]string{"goalId": args.GoalID, "state": "succeeded"}, nil
}
