package runhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gocotal/cotal/lang"
	"github.com/gocotal/cotal/wire"
)

// Seats are the agents a run spawns and takes turns from: the hosting manager's.
type Seats interface {
	// Spawn starts the agent sp describes, or finds it running (a replay or a recovery spawns
	// nothing twice), and returns its principal.
	Spawn(ctx context.Context, sp SeatSpec) (wire.Principal, error)
	// Conclaves tells the agent name the conclave channels it is a member of now: ErrSeatGone
	// when no such agent runs, an error when its grant does not cover one of them.
	Conclaves(name string, channels []string) error
	// EndTurn withdraws the agent name's open turn goalID: the branch that asked it was cut.
	EndTurn(name, goalID string)
	// Turn asks the agent name for one turn under goalID, and returns its yield: ErrSeatGone
	// when no such agent runs, ErrSeatDown when it stops during the turn, ErrTurnDeadline when it
	// does not yield by deadline.
	Turn(ctx context.Context, name, goalID, payload string, deadline time.Time) (SeatYield, error)
}

// SeatYield is how a seat ended its turn: done, blocked or handoff (to), with a note.
type SeatYield struct {
	Status, To, Note string
	At               int64
}

// The refusals a seat's turn reports.
var (
	// ErrSeatGone: no agent of that name runs (its manager stopped since the run spawned it).
	ErrSeatGone = errors.New("runhost: the agent does not run")
	// ErrSeatDown: the agent stopped during its turn.
	ErrSeatDown = errors.New("runhost: the agent is down")
	// ErrTurnDeadline: the agent did not yield by the turn's deadline.
	ErrTurnDeadline = errors.New("runhost: the turn's deadline elapsed")
)

// defaultTurnDeadline bounds a turn whose step names no deadline.
const defaultTurnDeadline = time.Hour

// TurnPayload is what a seat's pending turn carries: the run and the step that asks it, the
// notices the run wrote for the seat since its last turn, and, for an ask, the value it wants.
type TurnPayload struct {
	Run     string       `json:"run"`
	Step    string       `json:"step"`
	Notices []TurnNotice `json:"notices,omitempty"`
	Ask     *TurnAsk     `json:"ask,omitempty"`
	// Conclaves are the conclave channels the seat is a member of as the turn opens.
	Conclaves []string `json:"conclaves,omitempty"`
}

// TurnAsk is what a turn that asks for a value carries: the shape the value must have (the
// ask's schema, each field to its kind) and which of the ask's attempts this is. The seat
// answers the run's step (run-answer) with the value, then yields.
type TurnAsk struct {
	Schema   json.RawMessage `json:"schema"`
	Attempt  int             `json:"attempt"`
	Attempts int             `json:"attempts"`
}

// SetSeats gives the host the manager's seats, once it serves them: until then a spawn or a
// turn is refused as beyond this host (L5016), and the run is held.
func (h *Host) SetSeats(s Seats) {
	h.mu.Lock()
	h.seats = s
	h.mu.Unlock()
}

func (h *Host) seatsOf() Seats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seats
}

// takeTurn waits, in dispatch order, until no other turn or ask of the run addresses the agent
// req does (spec §6.5: two concurrent turns on one handle are serialized at the dispatch, so
// an agent is never asked for two turns at once), and returns what ends this one's hold.
func (r *hosted) takeTurn(ctx context.Context, req *lang.Request) (func(), error) {
	agent, err := handleAgent(req.Kind, req.Args[0])
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.turning == nil {
		r.turning = map[string]chan struct{}{}
	}
	hold := r.turning[agent.String()]
	if hold == nil {
		hold = make(chan struct{}, 1)
		r.turning[agent.String()] = hold
	}
	r.mu.Unlock()
	select {
	case hold <- struct{}{}: // a blocked send queues behind the ones before it
		return func() { <-hold }, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// joinRoster records that the run spawned agent as sp.
func (r *hosted) joinRoster(agent wire.Principal, sp SeatSpec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.roster == nil {
		r.roster = map[string]SeatSpec{}
	}
	r.roster[agent.String()] = sp
}

// rosterSpec returns the seat to names (by its principal or its name) as the run spawned it:
// live, or in a spawn step the journal recorded before this host took the run; false when the
// run spawned no such agent.
func (r *hosted) rosterSpec(to string) (SeatSpec, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.rosterRead {
		r.readRoster()
	}
	for agent, sp := range r.roster {
		if p, err := wire.ParsePrincipal(agent); err == nil && (agent == to || p.Actor() == to) {
			return sp, true
		}
	}
	return SeatSpec{}, false
}

// readRoster adds to the roster, once, the spawns the journal recorded before this host took
// the run. The caller holds r.mu.
func (r *hosted) readRoster() {
	r.rosterRead = true
	if r.roster == nil {
		r.roster = map[string]SeatSpec{}
	}
	for _, e := range r.recorded {
		if e.Kind != "spawn" || e.State != lang.StateSettled || e.Status != lang.StatusOK {
			continue
		}
		var handle struct{ Agent, Persona string }
		if json.Unmarshal(e.Result, &handle) != nil {
			continue
		}
		p, err := wire.ParsePrincipal(handle.Agent)
		if err != nil {
			continue
		}
		var sp SeatSpec
		if json.Unmarshal(e.External, &sp) != nil || sp.Name == "" {
			// A spawn recorded before its seat was: its persona, under its name.
			sp = SeatSpec{Name: p.Actor(), Persona: handle.Persona, Channels: []string{ConclaveChannel(r.id)}}
		}
		r.roster[handle.Agent] = sp
	}
}

// respawn starts again, as the run spawned it, seat s its manager no longer runs.
func (m *meshHandler) respawn(ctx context.Context, seats Seats, s seat) error {
	sp, ok := m.r.rosterSpec(s.agent.String())
	if !ok {
		return fmt.Errorf("%s is no agent this run spawned", s.agent)
	}
	_, err := seats.Spawn(ctx, sp)
	return err
}

// runSeat reads the agent handle req addresses (its first argument), which must name an agent
// the run spawned: a handle is the run's own, never one a program made up to reach another
// agent on the manager.
func (m *meshHandler) runSeat(req *lang.Request, v lang.Value) (seat, error) {
	s, err := seatOf(req.Kind, v)
	if err != nil {
		return seat{}, err
	}
	if _, ok := m.r.rosterSpec(s.agent.String()); !ok {
		return seat{}, &lang.EffectError{Code: "L4000", Kind: "handler-fault", Message: fmt.Sprintf("%s: %s is no agent this run spawned", req.Kind, s.agent)}
	}
	return s, nil
}

// seatName is the agent a spawn step starts: its persona and a digest of the step's request id,
// so the same step, replayed or recovered, names the same agent.
func seatName(persona, requestID string) string {
	sum := sha256.Sum256([]byte(requestID))
	return persona + "_" + hex.EncodeToString(sum[:4])
}

// SeatSpec is the agent a spawn step starts: its name and persona, what the step sets over the
// persona (model, variant, role, the channels it joins), and the channels it is granted beyond
// the persona (the run's conclave channel).
type SeatSpec struct {
	Name     string   `json:"name"`
	Persona  string   `json:"persona"`
	Model    string   `json:"model,omitempty"`
	Variant  string   `json:"variant,omitempty"`
	Role     string   `json:"role,omitempty"`
	Join     []string `json:"join,omitempty"`
	Channels []string `json:"channels,omitempty"`
}

// beyondHost refuses a spawn option this host cannot honour: the run is held (L5016) for one that
// can, rather than run without what the program asked for.
func (m *meshHandler) beyondHost(req *lang.Request) error {
	refuse := func(why string) error {
		return &lang.CapabilityRefusal{Code: "L5016", Message: "spawn: " + why}
	}
	for _, opt := range []string{"worktree", "permits", "supervise"} {
		if v := req.Option(opt); v != nil && v != lang.Undefined {
			return refuse(opt + " is not available on this host")
		}
	}
	if v, _ := req.Option("onFork").(string); v == "adopt" {
		return refuse(`onFork "adopt" is not available on this host`)
	}
	if pl, ok := req.Option("placement").(*lang.Record); ok {
		ep, _ := pl.Get("endpoint")
		inst, _ := pl.Get("instanceId")
		if ep != string(m.h.cfg.Serve.Endpoint) || inst != string(m.h.cfg.Serve.Instance) {
			return refuse(fmt.Sprintf("placement on %v instance %v, which is not this host's manager", ep, inst))
		}
	}
	return nil
}

// seatSpecOf reads the seat a spawn step asks for.
func seatSpecOf(req *lang.Request) (SeatSpec, error) {
	str := func(r *lang.Record, k string) string {
		v, _ := r.Get(k)
		s, _ := v.(string)
		return s
	}
	var sp SeatSpec
	switch p := req.Args[0].(type) {
	case string:
		sp.Persona = p
	case *lang.Record:
		sp.Persona, sp.Model, sp.Variant = str(p, "persona"), str(p, "model"), str(p, "variant")
	}
	if err := wire.ValidateActor(sp.Persona); err != nil {
		return SeatSpec{}, &lang.EffectError{Code: "L4000", Kind: "handler-fault", Message: fmt.Sprintf("spawn: the persona %q is not a persona name: %v", sp.Persona, err)}
	}
	sp.Role, _ = req.Option("role").(string)
	if join, ok := req.Option("join").(*lang.Array); ok {
		for _, ch := range join.Elems {
			sp.Join = append(sp.Join, channelOf(ch))
		}
	}
	sp.Name = seatName(sp.Persona, req.RequestID)
	sp.Channels = []string{ConclaveChannel(req.RunID)}
	return sp, nil
}

// spawn performs a spawn step through the manager's seats. What it started is recorded with the
// step (its external), so a seat its manager no longer runs is started again as it was.
func (m *meshHandler) spawn(ctx context.Context, seats Seats, req *lang.Request) (*lang.Outcome, error) {
	if err := m.beyondHost(req); err != nil {
		return nil, err
	}
	sp, err := seatSpecOf(req)
	if err != nil {
		return nil, err
	}
	p, err := seats.Spawn(ctx, sp)
	if err != nil {
		return nil, &lang.EffectError{Code: "L4000", Kind: "handler-fault", Message: fmt.Sprintf("spawn %s from persona %s: %v", sp.Name, sp.Persona, err)}
	}
	m.r.joinRoster(p, sp)
	handle := lang.NewRecord()
	handle.Set("agent", p.String())
	handle.Set("persona", sp.Persona)
	if sp.Role != "" {
		handle.Set("role", sp.Role)
	}
	raw, _ := json.Marshal(sp) // strings always encode
	external, err := lang.ParseJSON(raw)
	if err != nil {
		return nil, err
	}
	return &lang.Outcome{Result: handle, External: external}, nil
}

// turn performs a turn step: the agent the handle names takes one turn, and its yield is the
// step's result.
func (m *meshHandler) turn(ctx context.Context, seats Seats, req *lang.Request) (*lang.Outcome, error) {
	seat, err := m.runSeat(req, req.Args[0])
	if err != nil {
		return nil, err
	}
	y, err := m.seatTurn(ctx, seats, req, seat, req.RequestID, nil)
	if err != nil {
		return nil, err
	}
	if _, in := m.r.rosterSpec(y.To); y.Status == "handoff" && !in {
		return nil, &lang.EffectError{Code: "L4005", Kind: "handoff-outside-run",
			Message: fmt.Sprintf("%s handed off to %q, which is no agent this run spawned", seat.agent, y.To)}
	}
	out := lang.NewRecord()
	out.Set("status", y.Status)
	if y.To != "" {
		out.Set("to", y.To)
	}
	if y.Note != "" {
		out.Set("note", y.Note)
	}
	out.Set("at", float64(y.At))
	return &lang.Outcome{Result: out}, nil
}

// seat is the agent a turn or an ask addresses: its principal and the persona its handle names.
type seat struct {
	agent   wire.Principal
	persona string
}

// seatOf reads the agent handle v an effect of kind addresses.
func seatOf(kind string, v lang.Value) (seat, error) {
	agent, err := handleAgent(kind, v)
	if err != nil {
		return seat{}, err
	}
	var persona string
	if handle, ok := v.(*lang.Record); ok {
		p, _ := handle.Get("persona")
		persona, _ = p.(string)
	}
	return seat{agent: agent, persona: persona}, nil
}

// seatTurn asks s for one turn under goalID, with the notices the run holds for it and ask when
// the turn asks for a value, by the step's deadline (counted from its recorded start). A seat
// whose manager stopped since the run spawned it is started again from its persona, as its
// manager would restart it. The notices it carried are consumed once it yields.
func (m *meshHandler) seatTurn(ctx context.Context, seats Seats, req *lang.Request, s seat, goalID string, ask *TurnAsk) (SeatYield, error) {
	deadline := defaultTurnDeadline
	if d, ok := req.Option("deadline").(string); ok {
		ms, err := lang.ParseDuration(d)
		if err != nil {
			return SeatYield{}, err
		}
		deadline = time.Duration(ms) * time.Millisecond
	}
	notices, refs, err := m.pendingNotices(ctx, s.agent.String())
	if err != nil {
		return SeatYield{}, err
	}
	payload, _ := json.Marshal(TurnPayload{Run: req.RunID, Step: req.Key, Notices: notices, Ask: ask, Conclaves: m.r.conclavesOf(s.agent.String())})
	at := time.UnixMilli(req.StartedAt).Add(deadline)
	y, err := seats.Turn(ctx, s.agent.Actor(), goalID, string(payload), at)
	if err != nil && ctx.Err() != nil && m.runCtx != nil && m.runCtx.Err() == nil {
		// The branch was cut: the turn is withdrawn, so the agent's next is not asked beside it.
		seats.EndTurn(s.agent.Actor(), goalID)
		return SeatYield{}, err
	}
	if errors.Is(err, ErrSeatGone) {
		if serr := m.respawn(ctx, seats, s); serr != nil {
			return SeatYield{}, &lang.EffectError{Code: "L4002", Kind: "agent-down", Message: fmt.Sprintf("%v; starting it again: %v", err, serr)}
		}
		y, err = seats.Turn(ctx, s.agent.Actor(), goalID, string(payload), at)
	}
	switch {
	case errors.Is(err, ErrSeatDown), errors.Is(err, ErrSeatGone):
		return SeatYield{}, &lang.EffectError{Code: "L4002", Kind: "agent-down", Message: err.Error()}
	case errors.Is(err, ErrTurnDeadline):
		return SeatYield{}, &lang.EffectError{Code: "L4003", Kind: "turn-deadline", Message: err.Error()}
	case err != nil:
		return SeatYield{}, err
	}
	return y, m.consumed(ctx, s.agent.String(), refs)
}
