package endpoints

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/contract"
	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/wire"
)

// DefaultTimeout bounds an invoke, the follow of a goal included: past a manager's 30 s
// readiness deadline, so a spawn's goal ends within it.
const DefaultTimeout = time.Minute

// InvokeOptions are the inputs of `cotal invoke`.
type InvokeOptions struct {
	*factory.Factory
	Endpoint string
	Command  string
	// Args is the command's args as JSON; empty sends none.
	Args    string
	Timeout time.Duration
	// Mode and TargetLifecycle (--target) address a targeted command; Instance pins one
	// instance.
	Mode            string
	TargetLifecycle string
	Instance        string
	// Goal is the goal the reserved cancel command cancels.
	Goal string
	JSON bool
}

// Result is what `cotal invoke --json` prints, exactly one object: the reply's fields (v, id,
// ok, then data or error), the outcome the caller reads from it (executed, not-executed or
// unknown), and for a command that started a goal the goal's id and its terminal state, which
// is absent when --timeout ended the follow first. A request that got no reply (refused by the
// broker, no responder, no answer in time) is reported the same way, its error the caller's
// classification. The field names are a stable interface.
type Result struct {
	V       int                 `json:"v"`
	ID      string              `json:"id"`
	OK      bool                `json:"ok"`
	Data    json.RawMessage     `json:"data,omitempty"`
	Error   *wire.EndpointError `json:"error,omitempty"`
	Outcome wire.Outcome        `json:"outcome"`
	GoalID  string              `json:"goalId,omitempty"`
	State   string              `json:"state,omitempty"`
	// GoalData is the goal's terminal data: what it reached, or why it did not.
	GoalData json.RawMessage `json:"goalData,omitempty"`
}

// goalSucceeded is the one terminal goal state that is not a failure (SPEC §13.6).
const goalSucceeded = "succeeded"

// NewCmdInvoke returns the `cotal invoke` command.
func NewCmdInvoke(f *factory.Factory) *cobra.Command {
	o := &InvokeOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "invoke ENDPOINT COMMAND [--args JSON] [--mode MODE --target OWNER.ACTOR.UID] [--instance ID]",
		Short: "Call one command of an endpoint by name and print its reply and outcome",
		Long: "Describe ENDPOINT, pin COMMAND to the input and output digests it serves, send --args\n" +
			"(a JSON value; none by default) and print the reply and its outcome. A targeted command\n" +
			"takes --mode (one its contract admits) and, for every mode but self, --target naming the\n" +
			"target lifecycle. --instance calls one instance on its own rail, bound to the epoch its\n" +
			"describe answered at. When the reply starts a goal (its data carries a goalId), invoke\n" +
			"follows the goal's progress until its terminal state or --timeout. The reserved command\n" +
			"cancel stops a goal this operator started: --goal ID, and --args '{\"mode\":\"terminate\"}'\n" +
			"(graceful by default); add --instance (the acceptance's executor) when several instances serve.\n\n" +
			"Exit status: 0 when the command ran and its goal, if any, succeeded; 1 for an error reply,\n" +
			"a failed goal (failed, uncertain, expired, cancelled) or a goal still open at --timeout;\n" +
			"2 for bad flags or a mode the command does not admit; 4 when the broker or the endpoint\n" +
			"refused the caller (permission-denied, unauthenticated).",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Endpoint, o.Command = args[0], args[1]
			return invokeRun(cmd.Context(), o)
		},
	}
	fs := cmd.Flags()
	o.Target.Register(fs)
	fs.StringVar(&o.Args, "args", "", "the command's args, as JSON")
	fs.DurationVar(&o.Timeout, "timeout", DefaultTimeout, "how long the call and the follow of its goal may take")
	fs.StringVar(&o.Mode, "mode", "", fmt.Sprintf("a targeted command's authorization mode, one of %q", wire.AuthzModes))
	fs.StringVar(&o.TargetLifecycle, "target", "", "the target lifecycle of a targeted command, OWNER.ACTOR.UID")
	fs.StringVar(&o.Instance, "instance", "", "call this instance (its whole id, as cotal endpoints prints it) on its own rail")
	fs.StringVar(&o.Goal, "goal", "", "the goal the reserved cancel command cancels")
	fs.BoolVar(&o.JSON, "json", false, "print the reply, its outcome and a goal's state and terminal data (goalData) as one JSON object")
	return cmd
}

// invocation is an invoke's validated flags.
type invocation struct {
	endpoint wire.EndpointName
	instance wire.LifecycleUID
	args     json.RawMessage
	mode     wire.AuthzMode
	target   *wire.Target
	goal     string
}

// parse validates the arguments and flags; each error is a usage error naming its flag.
func (o *InvokeOptions) parse() (*invocation, error) {
	usage := func(format string, args ...any) (*invocation, error) {
		return nil, &exit.UsageError{Err: fmt.Errorf(format, args...)}
	}
	var in invocation
	var err error
	if in.endpoint, in.instance, err = parseEndpoint(o.Endpoint, o.Instance); err != nil {
		return nil, err
	}
	if err := wire.ValidateCommand(o.Command); err != nil {
		return usage("COMMAND: %w", err)
	}
	if o.Args != "" {
		if !json.Valid([]byte(o.Args)) {
			return usage("--args %q: not a JSON value", o.Args)
		}
		in.args = json.RawMessage(o.Args)
	}
	switch {
	case o.Command == wire.CommandCancel && o.Goal == "":
		return usage("cancel names the goal it cancels: add --goal ID")
	case o.Command != wire.CommandCancel && o.Goal != "":
		return usage("--goal is for the reserved cancel command, not %s", o.Command)
	case o.Goal != "":
		if err := wire.ValidateIDToken("--goal", o.Goal); err != nil {
			return usage("%w", err)
		}
		in.goal = o.Goal
	}
	if o.Timeout <= 0 {
		return usage("--timeout %s: must be positive", o.Timeout)
	}
	if o.Mode != "" {
		if in.mode, err = wire.ParseAuthzMode(o.Mode); err != nil {
			return usage("--mode: %w", err)
		}
	}
	if o.TargetLifecycle != "" {
		l, err := wire.ParseLifecycle(o.TargetLifecycle)
		if err != nil {
			return usage("--target: %w", err)
		}
		in.target = &wire.Target{Owner: l.Principal.Owner(), Actor: l.Principal.Actor(), LifecycleUID: string(l.UID)}
	}
	switch {
	case in.mode.TargetTokens() > 0 && in.target == nil:
		return usage("--mode %s names a target: add --target OWNER.ACTOR.UID", in.mode)
	case in.mode.TargetTokens() == 0 && in.target != nil:
		return usage("--target needs a --mode that names a target, not %q", in.mode)
	}
	return &in, nil
}

// admits checks the mode against the command's contract: none for an untargeted command, one of
// its modes for a targeted one.
func (in *invocation) admits(name string, c contract.Command) error {
	switch {
	case !c.Targeted && in.mode != wire.ModeNone:
		return &exit.UsageError{Err: fmt.Errorf("%s %s is not targeted: drop --mode and --target", in.endpoint, name)}
	case c.Targeted && !slices.Contains(c.Modes, in.mode):
		return &exit.UsageError{Err: fmt.Errorf("%s %s is targeted: --mode must be one of %q", in.endpoint, name, c.Modes)}
	}
	return nil
}

func invokeRun(ctx context.Context, o *InvokeOptions) error {
	in, err := o.parse()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	ctl, err := o.Control(ctx)
	if err != nil {
		return err
	}
	defer ctl.Close()
	res := &Result{V: wire.EndpointEnvelopeVersion, ID: wire.NewNonce()}
	goalData, err := o.invoke(ctx, ctl, in, res)
	if _, usage := errors.AsType[*exit.UsageError](err); usage {
		return err
	}
	switch {
	case o.JSON && res.Outcome != "":
		if jerr := json.NewEncoder(o.IO.Out).Encode(res); jerr != nil {
			return jerr
		}
	case !o.JSON && (err == nil || res.GoalID != ""):
		if perr := o.print(res, goalData); perr != nil {
			return perr
		}
	}
	return factory.Refusal(err)
}

// invoke describes the endpoint, calls the command and follows its goal, filling res, and returns
// the goal's terminal data. Its error names the command and the outcome.
func (o *InvokeOptions) invoke(ctx context.Context, ctl *factory.Control, in *invocation, res *Result) (json.RawMessage, error) {
	failed := func(err error) (json.RawMessage, error) {
		e, ok := errors.AsType[*wire.EndpointError](err)
		if !ok {
			e = wire.NewEndpointError(wire.CodeInternal, wire.OutcomeUnknown, "%v", err)
		}
		res.OK, res.Data, res.Error, res.Outcome = false, nil, e, endpoint.Outcome(err)
		return nil, fmt.Errorf("%s %s: %w (outcome %s)", in.endpoint, o.Command, err, res.Outcome)
	}
	r, err := ctl.Caller().Describe(ctx, in.endpoint, in.instance)
	if err != nil {
		return failed(fmt.Errorf("describe: %w", err))
	}
	var args any
	if in.args != nil {
		args = in.args
	}
	var call endpoint.Call
	if in.goal != "" {
		// The reserved cancel is in no contract: no digests, and the goal named.
		call = endpoint.Call{Endpoint: in.endpoint, Command: wire.CommandCancel, Args: args, GoalID: in.goal}
	} else {
		if call, err = r.Call(o.Command, args); err != nil {
			return failed(err)
		}
		if err := in.admits(o.Command, r.Commands[o.Command]); err != nil {
			return nil, err
		}
	}
	call.ID, call.Mode, call.Target = res.ID, in.mode, in.target
	if in.instance != "" {
		call.Address, call.Instance = wire.AddressInst, in.instance
		call.Bind = &wire.Bind{InstanceID: string(in.instance), Epoch: r.From.Epoch}
	}
	// The goal's progress is subscribed before the request leaves, so no event is missed.
	events := make(chan *nats.Msg, 64)
	sub, err := ctl.Conn.ChanSubscribe(ctl.Space.GoalProgressFilter(in.endpoint, ctl.Me), events)
	if err != nil {
		return nil, fmt.Errorf("follow the goals of %s: %w", in.endpoint, err)
	}
	defer func() { _ = sub.Unsubscribe() }() // the follow is over either way
	reply, err := ctl.Caller().Call(ctx, call)
	if err != nil {
		return failed(err)
	}
	res.V, res.ID, res.OK, res.Data, res.Outcome = reply.V, reply.ID, true, reply.Data, wire.OutcomeExecuted
	if in.goal != "" { // a cancel answers with the terminal state that won; nothing to follow
		var won manager.CancelResult
		if err := json.Unmarshal(reply.Data, &won); err == nil {
			res.GoalID, res.State = won.GoalID, won.State
		}
		return nil, nil
	}
	if res.GoalID = goalOf(reply.Data); res.GoalID == "" {
		return nil, nil
	}
	ev := manager.FollowGoal(ctx, events, res.GoalID)
	if ev == nil {
		return nil, fmt.Errorf("%s %s: goal %s did not end within --timeout %s; its outcome is unknown", in.endpoint, o.Command, res.GoalID, o.Timeout)
	}
	res.State, res.GoalData = ev.State, ev.Data
	if ev.State != goalSucceeded {
		return ev.Data, fmt.Errorf("%s %s: goal %s ended %s: %s", in.endpoint, o.Command, res.GoalID, ev.State, ev.Data)
	}
	return ev.Data, nil
}

// goalOf returns the goal a reply started: the string goalId of an object's data, or "".
func goalOf(data json.RawMessage) string {
	var g struct {
		GoalID string `json:"goalId"`
	}
	if json.Unmarshal(data, &g) != nil {
		return ""
	}
	return g.GoalID
}

// print writes a reply's data, and a goal's terminal data, to Out, and its outcome and a goal's
// state to ErrOut.
func (o *InvokeOptions) print(res *Result, goalData json.RawMessage) error {
	switch {
	case o.Goal != "":
		fmt.Fprintf(o.IO.ErrOut, "%s cancel: goal %s is %s (outcome %s)\n", o.Endpoint, o.Goal, res.State, res.Outcome)
	case res.GoalID == "":
		fmt.Fprintf(o.IO.ErrOut, "%s %s: ok (outcome %s)\n", o.Endpoint, o.Command, res.Outcome)
	default:
		state := res.State
		if state == "" {
			state = "still open"
		}
		fmt.Fprintf(o.IO.ErrOut, "%s %s: accepted as goal %s (outcome %s); goal %s\n", o.Endpoint, o.Command, res.GoalID, res.Outcome, state)
	}
	if err := writeIndented(o.IO.Out, res.Data); err != nil {
		return err
	}
	return writeIndented(o.IO.Out, goalData)
}

// writeIndented writes a JSON value indented, on its own line; nothing for none or null.
func writeIndented(w io.Writer, data json.RawMessage) error {
	if len(data) == 0 || string(data) == "null" {
		return nil
	}
	var b bytes.Buffer
	if err := json.Indent(&b, data, "", "  "); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}
