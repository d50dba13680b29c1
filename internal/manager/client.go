package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/internal/runhost"
	"github.com/gocotal/cotal/internal/sessiongrant"
	"github.com/gocotal/cotal/wire"
)

// Following a spawn: the reference's caller waits at least 40 s for the terminal event, and 10 s
// past an acceptance's readiness deadline.
const (
	followFloor = 40 * time.Second
	followSlack = 10 * time.Second
)

// PsDeadline and PsReconcile bound a ps scatter, as the reference's CLI bounds it.
const (
	PsDeadline  = 8 * time.Second
	PsReconcile = 3 * time.Second
)

// Client calls the manager endpoint of a space as one caller: the CLI's instrument, or an agent
// holding the spawn capability. It is safe for concurrent use.
type Client struct {
	caller *endpoint.Caller
	nc     *nats.Conn
	space  wire.Space
	me     wire.Lifecycle
	// Any, when set, despawns in mode any (the operator's instrument); otherwise in mode owner,
	// the caller's own owner.
	Any bool
	// Pinned, when set, sends every call to that one instance on its own rail: a manager-caller
	// view (SPEC §10), whose grant holds no other rail and no registry read.
	Pinned wire.LifecycleUID
}

// NewClient returns a client on nc calling as me.
func NewClient(nc *nats.Conn, space wire.Space, me wire.Lifecycle, name string) *Client {
	return &Client{caller: endpoint.NewCaller(nc, space, me, name), nc: nc, space: space, me: me}
}

// Caller returns the client's endpoint caller.
func (c *Client) Caller() *endpoint.Caller { return c.caller }

// SpawnArgs are spawn's args, the contract's input. This manager reads name, agent (or
// defaultAgent), role, cwd, the channel lists and launchOptions (its command and env: host launch
// authority; its runtime); it refuses the others by name as unimplemented.
type SpawnArgs struct {
	Name            string         `json:"name"`
	Agent           string         `json:"agent,omitempty"`
	DefaultAgent    string         `json:"defaultAgent,omitempty"`
	Role            string         `json:"role,omitempty"`
	Config          string         `json:"config,omitempty"`
	Identity        string         `json:"identity,omitempty"`
	Model           string         `json:"model,omitempty"`
	Variant         string         `json:"variant,omitempty"`
	LaunchOptions   *LaunchOptions `json:"launchOptions,omitempty"`
	Resume          string         `json:"resume,omitempty"`
	ContinueSession string         `json:"continueSession,omitempty"`
	Events          bool           `json:"events,omitempty"`
	Cwd             string         `json:"cwd,omitempty"`
	// Prompt is a kickoff message: the agent's first turn, once its session is up.
	Prompt         string   `json:"prompt,omitempty"`
	Subscribe      []string `json:"subscribe,omitempty"`
	AllowSubscribe []string `json:"allowSubscribe,omitempty"`
	// AllowPublish nil leaves the default (the concrete channels of Subscribe); an empty list
	// is a declared "none", as an agent file's omitted allowPublish is.
	AllowPublish []string        `json:"allowPublish,omitzero"`
	ShareTools   string          `json:"shareTools,omitempty"`
	Supervise    json.RawMessage `json:"supervise,omitempty"`
	// instructions are the agent's system prompt, which the manager takes from a persona or a
	// launch spec, never from a caller's arguments.
	instructions string
	// cotalArgs are the arguments cotal's own agent takes from a persona's hints.
	cotalArgs []string
}

// LaunchOptions carry a raw command (command and env: host launch authority) and the runtime. The
// contract leaves launchOptions free-form; this manager reads these three members.
type LaunchOptions struct {
	Command []string `json:"command,omitempty"`
	Env     []string `json:"env,omitempty"`
	// Runtime is "pty" (the default when empty) or "headless"; it needs no launch authority.
	Runtime string `json:"runtime,omitempty"`
}

// Acceptance is spawn's reply: the agent's lifecycle, the goal that follows its readiness and the
// incarnation that executes it.
type Acceptance struct {
	Name                string   `json:"name"`
	Owner               string   `json:"owner"`
	Actor               string   `json:"actor"`
	UID                 string   `json:"uid"`
	GoalID              string   `json:"goalId"`
	Fingerprint         string   `json:"fingerprint"`
	ReadinessDeadlineMs int64    `json:"readinessDeadlineMs,omitempty"`
	Executor            Executor `json:"executor"`
}

// Executor is the manager incarnation that accepted a spawn.
type Executor struct {
	LifecycleUID string `json:"lifecycleUid"`
	Epoch        int64  `json:"epoch"`
}

// Spawned is a spawn followed to its end: the acceptance, the goal's terminal state and its data.
// State is empty when the follow ended first.
type Spawned struct {
	Acceptance Acceptance
	State      string
	Data       json.RawMessage
}

// Spawn asks any manager of the space to spawn an agent and follows the goal until it is terminal
// or ctx ends (a Spawned with no State). The progress subscription is in place before the request
// leaves, so no event is missed.
func (c *Client) Spawn(ctx context.Context, args SpawnArgs) (*Spawned, error) {
	return c.SpawnOn(ctx, "", args)
}

// SpawnOn is Spawn on manager instance, described and called on its own rail; when instance is
// empty, on the pinned one, or else on any manager.
func (c *Client) SpawnOn(ctx context.Context, instance wire.LifecycleUID, args SpawnArgs) (*Spawned, error) {
	return c.goal(ctx, instance, CommandSpawn, args)
}

// LaunchArgs are launch's arguments: the agent Name of run RunID, and the run's launch spec
// inline when the manager is not on this host.
type LaunchArgs struct {
	RunID string          `json:"runId"`
	Name  string          `json:"name"`
	Spec  json.RawMessage `json:"spec,omitempty"`
}

// Launch asks manager instance (the pinned one, or any, when empty) to start one agent of a
// manifest deploy, and follows its goal as Spawn does.
func (c *Client) Launch(ctx context.Context, instance wire.LifecycleUID, args LaunchArgs) (*Spawned, error) {
	return c.goal(ctx, instance, CommandLaunch, args)
}

// Ask calls an untargeted command on the pinned manager, or any, and decodes its reply into out.
func (c *Client) Ask(ctx context.Context, command string, args, out any) error {
	reply, err := c.callOne(ctx, command, args)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(reply.Data, out); err != nil {
		return fmt.Errorf("%s: the reply does not decode: %w", command, err)
	}
	return nil
}

// goal calls a goal-bearing command (spawn, launch) and follows its goal.
func (c *Client) goal(ctx context.Context, instance wire.LifecycleUID, command string, args any) (*Spawned, error) {
	if instance == "" {
		instance = c.Pinned
	}
	r, err := c.caller.Describe(ctx, wire.ManagerEndpoint, instance)
	if err != nil {
		return nil, err
	}
	events := make(chan *nats.Msg, 64)
	sub, err := c.nc.ChanSubscribe(c.space.GoalProgressFilter(wire.ManagerEndpoint, c.me), events)
	if err != nil {
		return nil, fmt.Errorf("follow spawn goals: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }() // the follow is over either way
	call, err := r.Call(command, args)
	if err != nil {
		return nil, err
	}
	if instance != "" {
		call.Address, call.Instance = wire.AddressInst, instance
	}
	reply, err := c.caller.Call(ctx, call)
	if err != nil {
		return nil, err
	}
	out := &Spawned{}
	if err := json.Unmarshal(reply.Data, &out.Acceptance); err != nil {
		return nil, fmt.Errorf("%s: the acceptance does not decode: %w", command, err)
	}
	follow := max(followFloor, time.Duration(out.Acceptance.ReadinessDeadlineMs)*time.Millisecond+followSlack)
	fctx, cancel := context.WithTimeout(ctx, follow)
	defer cancel()
	if ev := FollowGoal(fctx, events, out.Acceptance.GoalID); ev != nil {
		out.State, out.Data = ev.State, ev.Data
	}
	return out, nil
}

// FollowGoal waits for goal's terminal progress event among events (the messages of a
// subscription to the caller's goal progress), or returns nil when ctx ends first.
func FollowGoal(ctx context.Context, events <-chan *nats.Msg, goal string) *ProgressEvent {
	for {
		select {
		case <-ctx.Done():
			return nil
		case msg := <-events:
			var ev ProgressEvent
			if json.Unmarshal(msg.Data, &ev) == nil && ev.GoalID == goal && ev.IsTerminalPhase() {
				return &ev
			}
		}
	}
}

// Find asks the managers of the space for the named agent and returns its row and the instance
// that runs it; not-found when none does. With the registry (records) it scatters inspect to
// every manager; without it (an agent, or a manager-caller view, which cannot read the registry)
// it asks the pinned instance, or else whichever manager answers the class rail.
func (c *Client) Find(ctx context.Context, records jetstream.KeyValue, name string) (*Row, wire.LifecycleUID, error) {
	args := map[string]string{"name": name}
	if records == nil {
		reply, err := c.callOne(ctx, CommandInspect, args)
		if err != nil {
			return nil, "", err
		}
		row, err := decodeRow(name, reply.Data)
		return row, reply.From.Instance, err
	}
	g, err := c.scatter(ctx, records, CommandInspect, args, 0)
	if err != nil {
		return nil, "", err
	}
	for id, r := range g.Replies {
		if r.OK {
			row, err := decodeRow(name, r.Data)
			return row, id, err
		}
	}
	return nil, "", wire.NewEndpointError(wire.CodeNotFound, wire.OutcomeNotExecuted, "no manager of space %s runs an agent %s", c.space, name)
}

func decodeRow(name string, data json.RawMessage) (*Row, error) {
	var row Row
	if err := json.Unmarshal(data, &row); err != nil {
		return nil, fmt.Errorf("inspect %s: the row does not decode: %w", name, err)
	}
	return &row, nil
}

// onSeat calls a targeted command on the named agent, at the manager that runs it (Find), pinned
// to the lifecycle found: on that instance's rail with the registry or a pinned client, on the
// class rail otherwise; in mode owner, or any for Client.Any. It returns the reply and the row
// found.
func (c *Client) onSeat(ctx context.Context, records jetstream.KeyValue, name, command string, args any) (*endpoint.Reply, *Row, error) {
	row, instance, err := c.Find(ctx, records, name)
	if err != nil {
		return nil, nil, err
	}
	p, err := wire.ParsePrincipal(row.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", command, name, err)
	}
	pinned := c.Pinned
	if records != nil {
		pinned = instance
	}
	r, err := c.caller.Describe(ctx, wire.ManagerEndpoint, pinned)
	if err != nil {
		return nil, nil, err
	}
	call, err := r.Call(command, args)
	if err != nil {
		return nil, nil, err
	}
	if pinned != "" {
		call.Address, call.Instance = wire.AddressInst, pinned
	}
	call.Mode = wire.ModeOwner
	if c.Any {
		call.Mode = wire.ModeAny
	}
	call.Target = &wire.Target{Owner: p.Owner(), Actor: p.Actor(), LifecycleUID: row.LifecycleUID}
	reply, err := c.caller.Call(ctx, call)
	return reply, row, err
}

// Despawn stops the named agent on the manager that runs it, pinned to the lifecycle found.
func (c *Client) Despawn(ctx context.Context, records jetstream.KeyValue, name string, graceful bool) (*Row, error) {
	_, row, err := c.onSeat(ctx, records, name, CommandDespawn, map[string]bool{"graceful": graceful})
	return row, err
}

// Attach asks the manager that runs the named agent for a session on its terminal and returns the
// grant: the session, already established for the caller's lifecycle, that the caller redeems
// its half of through the ledger.
func (c *Client) Attach(ctx context.Context, records jetstream.KeyValue, name string) (*SessionGrant, error) {
	reply, _, err := c.onSeat(ctx, records, name, CommandAttach, nil)
	if err != nil {
		return nil, err
	}
	var res attachResult
	if err := json.Unmarshal(reply.Data, &res); err != nil {
		return nil, fmt.Errorf("attach %s: the grant does not decode: %w", name, err)
	}
	g, err := sessiongrant.Parse(res.Grant)
	if err != nil {
		return nil, fmt.Errorf("attach %s: %w", name, err)
	}
	return g, nil
}

// Input types text into the named agent's terminal, then Enter unless enter is false, and returns
// the bytes written.
func (c *Client) Input(ctx context.Context, records jetstream.KeyValue, name, text string, enter bool) (int, error) {
	reply, _, err := c.onSeat(ctx, records, name, CommandInput, inputArgs{Text: text, Enter: &enter})
	if err != nil {
		return 0, err
	}
	var res inputResult
	if err := json.Unmarshal(reply.Data, &res); err != nil {
		return 0, fmt.Errorf("input %s: the reply does not decode: %w", name, err)
	}
	return res.Bytes, nil
}

// Cancel cancels a spawn goal the caller started, on the instance that accepted it and bound to
// the epoch it accepted it at: mode is endpoint.CancelGraceful or endpoint.CancelTerminate. It
// returns the terminal state that won (cancelled, or a completion that came first); a goal
// already settled is a failed-precondition *wire.EndpointError carrying its outcome.
func (c *Client) Cancel(ctx context.Context, a Acceptance, mode string) (*CancelResult, error) {
	instance := wire.LifecycleUID(a.Executor.LifecycleUID)
	call := endpoint.Call{Endpoint: wire.ManagerEndpoint, Command: wire.CommandCancel, Address: wire.AddressInst, Instance: instance,
		GoalID: a.GoalID, Bind: &wire.Bind{InstanceID: string(instance), Epoch: a.Executor.Epoch}, Args: endpoint.CancelArgs{Mode: mode}}
	reply, err := c.caller.Call(ctx, call)
	if err != nil {
		return nil, err
	}
	var out CancelResult
	if err := json.Unmarshal(reply.Data, &out); err != nil {
		return nil, fmt.Errorf("cancel %s: the reply does not decode: %w", a.GoalID, err)
	}
	return &out, nil
}

// Stop asks the manager that spawned the caller to stop it (mode self): an agent stopping itself.
func (c *Client) Stop(ctx context.Context, graceful bool) error {
	r, err := c.caller.Describe(ctx, wire.ManagerEndpoint, "")
	if err != nil {
		return err
	}
	call, err := r.Call(CommandStop, map[string]bool{"graceful": graceful})
	if err != nil {
		return err
	}
	call.Mode = wire.ModeSelf
	_, err = c.caller.Call(ctx, call)
	return err
}

// callOne describes the manager and calls command once: on the pinned instance's rail, or else
// on the class rail, where whichever manager the queue picks answers.
func (c *Client) callOne(ctx context.Context, command string, args any) (*endpoint.Reply, error) {
	r, err := c.caller.Describe(ctx, wire.ManagerEndpoint, c.Pinned)
	if err != nil {
		return nil, err
	}
	call, err := r.Call(command, args)
	if err != nil {
		return nil, err
	}
	if c.Pinned != "" {
		call.Address, call.Instance = wire.AddressInst, c.Pinned
	}
	return c.caller.Call(ctx, call)
}

// PsPinned asks the pinned instance alone for its agents: one call, with no claim that the
// space has no other manager. It returns the rows and the incarnation that answered.
func (c *Client) PsPinned(ctx context.Context) ([]Row, wire.EndpointReplyFrom, error) {
	if c.Pinned == "" {
		return nil, wire.EndpointReplyFrom{}, errors.New("ps of one instance needs a pinned client")
	}
	reply, err := c.callOne(ctx, CommandPs, nil)
	if err != nil {
		return nil, wire.EndpointReplyFrom{}, err
	}
	var rows []Row
	if err := json.Unmarshal(reply.Data, &rows); err != nil {
		return nil, reply.From, fmt.Errorf("manager %s: the rows do not decode: %w", c.Pinned, err)
	}
	return rows, reply.From, nil
}

// Ps gathers every manager's agents: the scatter's replies, classified (missing, churn,
// unexpected, late).
func (c *Client) Ps(ctx context.Context, records jetstream.KeyValue) (*endpoint.Gather, error) {
	ctx, cancel := context.WithTimeout(ctx, PsDeadline)
	defer cancel()
	return c.scatter(ctx, records, CommandPs, nil, PsReconcile)
}

// scatter sends command to every registered manager, pinned to the contract one of them
// describes.
func (c *Client) scatter(ctx context.Context, records jetstream.KeyValue, command string, args any, reconcile time.Duration) (*endpoint.Gather, error) {
	expected, err := endpoint.Instances(ctx, records, wire.ManagerEndpoint)
	if err != nil {
		return nil, err
	}
	r, err := c.caller.Describe(ctx, wire.ManagerEndpoint, "")
	if err != nil {
		return nil, err
	}
	call, err := r.Call(command, args)
	if err != nil {
		return nil, err
	}
	return c.caller.Scatter(ctx, call, expected, reconcile)
}

// Rows decodes the rows of a ps gather's replies (in-time and late), and returns them with the
// instance each came from.
func Rows(g *endpoint.Gather) ([]Row, error) {
	var rows []Row
	var errs []error
	add := func(r *endpoint.Reply) {
		if !r.OK {
			errs = append(errs, fmt.Errorf("manager %s: %w", r.From.Instance, r.Error))
			return
		}
		var batch []Row
		if err := json.Unmarshal(r.Data, &batch); err != nil {
			errs = append(errs, fmt.Errorf("manager %s: the rows do not decode: %w", r.From.Instance, err))
			return
		}
		rows = append(rows, batch...)
	}
	for _, r := range g.Replies {
		add(r)
	}
	for _, r := range g.Late {
		add(r)
	}
	return rows, errors.Join(errs...)
}

// RunStart hands a workflow program to a manager that hosts runs, which checks it, mints the
// run's id and drives it; file only labels its diagnostics. A refused program is a bad-request
// *wire.EndpointError with a DetailLangProblem detail per problem.
func (c *Client) RunStart(ctx context.Context, source, file string) (string, error) {
	var out struct {
		RunID string `json:"runId"`
	}
	err := c.runCall(ctx, CommandRunStart, "", RunStartArgs{Source: source, File: file}, &out)
	return out.RunID, err
}

// RunResume asks a manager to take run runID back from its journal.
func (c *Client) RunResume(ctx context.Context, runID string) error {
	return c.runCall(ctx, CommandRunResume, "", RunIDArgs{RunID: runID}, nil)
}

// RunAnswer answers run runID's open checkpoint at step with value (JSON), as the caller.
func (c *Client) RunAnswer(ctx context.Context, runID, step string, value json.RawMessage) (*RunAnswerReply, error) {
	var out RunAnswerReply
	err := c.runCall(ctx, CommandRunAnswer, wire.ModeSelf, RunAnswerArgs{RunID: runID, StepKey: step, Value: value}, &out)
	return &out, err
}

// RunStatus reads run runID: its record and its journal, a row per record (runhost.View's
// shape), decoded into out.
func (c *Client) RunStatus(ctx context.Context, runID string, out any) error {
	return c.runCall(ctx, CommandRunStatus, "", RunIDArgs{RunID: runID}, out)
}

// RunPs lists the runs recorded on the manager endpoint (runhost.Row's shape), into out.
func (c *Client) RunPs(ctx context.Context, out any) error {
	return c.runCall(ctx, CommandRunPs, "", nil, out)
}

// runCall calls a workflow-run or turn command on the class rail (in mode, when one is given) and
// decodes its result into out.
func (c *Client) runCall(ctx context.Context, command string, mode wire.AuthzMode, args, out any) error {
	r, err := c.caller.Describe(ctx, wire.ManagerEndpoint, c.Pinned)
	if err != nil {
		return err
	}
	call, err := r.Call(command, args)
	if err != nil {
		return err
	}
	call.Mode = mode
	if c.Pinned != "" {
		call.Address, call.Instance = wire.AddressInst, c.Pinned
	}
	reply, err := c.caller.Call(ctx, call)
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(reply.Data, out)
}

// TurnPending lists the caller's own pending turns (mode self), oldest first.
func (c *Client) TurnPending(ctx context.Context) ([]PendingTurn, error) {
	var out struct {
		Turns []PendingTurn `json:"turns"`
	}
	err := c.runCall(ctx, CommandTurnPending, wire.ModeSelf, nil, &out)
	return out.Turns, err
}

// TurnYield reports how the caller's turn goalID ended (mode self).
func (c *Client) TurnYield(ctx context.Context, args TurnYieldArgs) error {
	return c.runCall(ctx, CommandTurnYield, wire.ModeSelf, args, nil)
}

// AnswerAndYield ends the caller's turn t as args say; value, when given, first answers the ask
// the turn carries (run-answer on the run's step), so the run finds it when the yield wakes it.
func (c *Client) AnswerAndYield(ctx context.Context, t PendingTurn, args TurnYieldArgs, value json.RawMessage) error {
	if value != nil {
		var p runhost.TurnPayload
		if err := json.Unmarshal([]byte(t.Payload), &p); err != nil || p.Ask == nil {
			return fmt.Errorf("turn %s asks for no value: yield it without one", t.GoalID)
		}
		if _, err := c.RunAnswer(ctx, p.Run, p.Step, value); err != nil {
			return fmt.Errorf("answer %s of run %s: %w", p.Step, p.Run, err)
		}
	}
	args.GoalID = t.GoalID
	return c.TurnYield(ctx, args)
}
