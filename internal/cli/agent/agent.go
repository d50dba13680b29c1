// Package agent implements `cotal agent`: a small agent process that mints and provisions its own
// credential (or runs on the launch material a manager handed it), joins its channels, and shows
// what it surfaces.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/agentlock"
	"github.com/gocotal/cotal/internal/cli/agentflags"
	"github.com/gocotal/cotal/internal/cli/console"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/runhost"
	"github.com/gocotal/cotal/internal/termsafe"
	"github.com/gocotal/cotal/wire"
)

// Options are the inputs of `cotal agent`.
type Options struct {
	*factory.Factory
	agentflags.Flags
	Echo bool
	JSON bool
	// OnTurn is how the agent yields each turn a workflow run asks of it: done, blocked or
	// handoff (to HandoffTo); empty takes no turn.
	OnTurn    string
	HandoffTo string
	// OnAsk is the value (JSON) the agent answers each turn that asks for one with; empty
	// answers none.
	OnAsk string
	// TurnTakes is how long the agent works on each turn before it yields it: a model's work,
	// simulated.
	TurnTakes time.Duration
	// StartTakes is how long the agent waits before it joins the mesh: a harness's start,
	// simulated.
	StartTakes time.Duration
	// LaunchMaterial is the path of the launch material a manager handed the process
	// ($COTAL_LAUNCH_MATERIAL); empty when it was not spawned.
	LaunchMaterial string
}

// Surfaced is one line of `cotal agent --json`; the field names are a stable interface. Channel
// and Sender come from the subject the message arrived on, which the broker vouches for; the
// message's own channel field is what its sender wrote, and may differ.
type Surfaced struct {
	Kind       wire.DeliveryKind  `json:"kind"`
	Historical bool               `json:"historical"`
	Channel    string             `json:"channel,omitempty"`
	Sender     string             `json:"sender"`
	Message    *wire.CotalMessage `json:"message"`
}

// NewCmdAgent returns the `cotal agent` command.
func NewCmdAgent(f *factory.Factory) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a small agent: join, show what arrives, optionally echo direct messages",
		Long: "Run an agent local.NAME on the running mesh: it mints and provisions its own credential,\n" +
			"writes presence, joins --subscribe channels, and prints every message it surfaces, each\n" +
			"sender as its display name (control and bidi characters stripped) and its principal. With\n" +
			"--echo it answers each direct message. It resumes the agent's lifecycle, so it shows\n" +
			"every DM sent to the agent while no process ran it (--fresh starts a new one). One\n" +
			"process runs a name at a time: a second is refused, naming the first, unless --takeover,\n" +
			"which makes the first let go and exit non-zero. On Ctrl-C it writes offline and revokes\n" +
			"its credential; the lifecycle stays for the agent's next run.\n\n" +
			"Spawned by a manager (`cotal spawn -- cotal agent`), it runs instead on the credential of\n" +
			"the launch material at $" + manager.LaunchMaterialEnv + ", which names its mesh, space and identity;\n" +
			"the manager retires that lifecycle when the process ends. With --on-turn it takes the turns a\n" +
			"workflow run asks of it (`turn` in Cotal Lang) and yields each as told, printing\n" +
			"`turn GOAL: taken` as it takes a turn and `turn GOAL: STATUS` as it yields it, --turn-takes\n" +
			"after; with --on-ask it answers each `ask` with that value first, printing `ask GOAL: VALUE`.\n" +
			"A turn taken inside a `conclave` joins the conclave's channel and says there that the agent\n" +
			"takes it (`conclave CHANNEL: said STEP`). --start-takes delays its joining the mesh. A run can\n" +
			"be tried with no model behind its agents.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.LaunchMaterial = os.Getenv(manager.LaunchMaterialEnv)
			switch {
			case o.OnTurn != "" && o.OnTurn != "done" && o.OnTurn != "blocked" && o.OnTurn != "handoff":
				return &exit.UsageError{Err: fmt.Errorf("--on-turn %q: must be done, blocked or handoff", o.OnTurn)}
			case (o.OnTurn == "handoff") != (o.HandoffTo != ""):
				return &exit.UsageError{Err: errors.New("--on-turn handoff names the agent it hands off to with --handoff-to, and only it does")}
			case o.OnAsk != "" && o.OnTurn == "":
				return &exit.UsageError{Err: errors.New("--on-ask answers the turns --on-turn takes: give --on-turn too")}
			case o.TurnTakes != 0 && o.OnTurn == "":
				return &exit.UsageError{Err: errors.New("--turn-takes paces the turns --on-turn takes: give --on-turn too")}
			case o.TurnTakes < 0:
				return &exit.UsageError{Err: fmt.Errorf("--turn-takes %s: must not be negative", o.TurnTakes)}
			case o.StartTakes < 0:
				return &exit.UsageError{Err: fmt.Errorf("--start-takes %s: must not be negative", o.StartTakes)}
			case o.OnAsk != "" && !json.Valid([]byte(o.OnAsk)):
				return &exit.UsageError{Err: fmt.Errorf("--on-ask %q: not a JSON value", o.OnAsk)}
			}
			return agentRun(cmd.Context(), o)
		},
	}
	fs := cmd.Flags()
	o.Target.Register(fs)
	o.Flags.Register(fs, "the agent's name (its actor token); required unless spawned by a manager")
	o.Flags.RegisterCapability(fs)
	o.Flags.RegisterRun(fs)
	fs.BoolVar(&o.Echo, "echo", false, "answer each direct message")
	fs.BoolVar(&o.JSON, "json", false, "print one JSON object per surfaced message")
	fs.StringVar(&o.OnTurn, "on-turn", "", "take each turn a workflow run asks of this agent, yielding done, blocked or handoff")
	fs.StringVar(&o.HandoffTo, "handoff-to", "", "the agent a handoff yield names (with --on-turn handoff)")
	fs.StringVar(&o.OnAsk, "on-ask", "", "the JSON value to answer each turn that asks for one (an ask) with, before yielding")
	fs.DurationVar(&o.TurnTakes, "turn-takes", 0, "how long each turn takes before the agent yields it (a model's work, simulated)")
	fs.DurationVar(&o.StartTakes, "start-takes", 0, "how long the agent waits before it joins the mesh (a harness's start, simulated)")
	return cmd
}

func agentRun(ctx context.Context, o *Options) error {
	if !sleepCtx(ctx, o.StartTakes) {
		return nil
	}
	url, creds, err := o.credential(ctx)
	if err != nil {
		return err
	}
	takenOver := make(chan agentlock.Holder, 1)
	if creds.agent != nil {
		defer creds.agent.Stop()
		creds.agent.Watch(func(by agentlock.Holder) { takenOver <- by })
	}
	// Echoes are sent from the main loop, not the handler: the handler may run during Connect,
	// before there is a client to send with.
	echoes := make(chan *cotal.Delivery, 64)
	enc := json.NewEncoder(o.IO.Out)
	handler := func(_ context.Context, dl *cotal.Delivery) error {
		if o.JSON {
			if err := enc.Encode(Surfaced{Kind: dl.Kind, Historical: dl.Historical, Channel: dl.Channel, Sender: dl.Sender.String(), Message: dl.Message}); err != nil {
				return err
			}
		} else {
			console.Line(o.IO.Out, time.Now(), dl)
		}
		if o.Echo && dl.Kind == wire.DeliveryDM {
			select {
			case echoes <- dl:
			default:
				fmt.Fprintf(o.IO.ErrOut, "echo to %s dropped: too many waiting\n", dl.Sender)
			}
		}
		return nil
	}
	c, err := cotal.Connect(ctx, url, append(creds.opts, cotal.WithHandler(handler))...)
	if err != nil {
		return err
	}
	for _, ch := range o.Subscribe {
		res, err := c.Join(ctx, ch)
		if err != nil {
			_ = c.Close(context.WithoutCancel(ctx)) // the join error is the one to report
			return err
		}
		switch {
		case res.Durable:
			fmt.Fprintf(o.IO.ErrOut, "joined %s durable (generation %d)\n", ch, res.Generation)
		case res.Backstop != "":
			fmt.Fprintf(o.IO.ErrOut, "%s: %s\n", ch, res.Backstop)
		default:
			fmt.Fprintf(o.IO.ErrOut, "joined %s (%s)\n", ch, res.Config.DeliveryClass)
		}
	}
	var lifecycle wire.LifecycleUID
	if g := c.Grant(); g != nil {
		lifecycle = g.Lifecycle
	}
	which := "lifecycle"
	if creds.agent != nil {
		which = "new lifecycle"
		if creds.agent.Resumed {
			which = "resumed lifecycle"
		}
	}
	fmt.Fprintf(o.IO.ErrOut, "agent %s (%s %s) joined %q in space %s; Ctrl-C to stop\n", c.Principal(), which, lifecycle, o.Subscribe, c.Space())
	if o.OnTurn != "" {
		go takeTurns(ctx, o, c, manager.NewClient(c.Conn(), c.Space(), wire.Lifecycle{Principal: c.Principal(), UID: lifecycle}, c.Principal().Actor()))
	}
	for {
		select {
		case <-ctx.Done():
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			return c.Close(cctx)
		case by := <-takenOver:
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = c.Close(cctx) // the other process is the agent now; a failed offline write only ages out
			return fmt.Errorf("%s was taken over by %s", c.Principal(), by)
		case err := <-c.Errors():
			// An error can quote what a peer wrote (a rejected message's subject, say).
			fmt.Fprintf(o.IO.ErrOut, "broker: %s\n", termsafe.Sanitize(err.Error()))
		case dl := <-echoes:
			reply := []wire.Part{wire.TextPart("echo: " + console.Summary(dl.Message))}
			if _, err := c.DirectMessage(ctx, dl.Sender, reply, cotal.ReplyTo(dl.Message.ID)); err != nil {
				fmt.Fprintf(o.IO.ErrOut, "echo to %s: %v\n", dl.Sender, err)
			}
		}
	}
}

// turnPoll is how often an agent taking turns asks its manager for them: each ask is a describe
// and a call on the manager's class rail, for the agent's whole life, so not often.
const turnPoll = time.Second

// takeTurns yields, as --on-turn says, each turn the agent's manager holds for it, until ctx
// ends; each turn is printed once, as it is taken, after the notices it carries. In a conclave,
// the agent joins its channel and says there that it takes the turn.
func takeTurns(ctx context.Context, o *Options, c *cotal.Client, m *manager.Client) {
	taken := map[string]bool{}
	var conclaves runhost.Membership
	tick := time.NewTicker(turnPoll)
	defer tick.Stop()
	for {
		turns, err := m.TurnPending(ctx)
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(o.IO.ErrOut, "turns: %v\n", err)
		}
		for _, t := range turns {
			if taken[t.GoalID] {
				continue
			}
			var p runhost.TurnPayload
			if json.Unmarshal([]byte(t.Payload), &p) == nil {
				for _, n := range p.Notices {
					fmt.Fprintf(o.IO.Out, "notice %s: %s\n", termsafe.Sanitize(n.Step), termsafe.Sanitize(string(n.Fact)))
				}
			}
			fmt.Fprintf(o.IO.Out, "turn %s: taken\n", t.GoalID)
			sayInConclaves(ctx, o, c, &conclaves, p)
			if !sleepCtx(ctx, o.TurnTakes) {
				return
			}
			var value json.RawMessage
			if p.Ask != nil && o.OnAsk != "" {
				value = json.RawMessage(o.OnAsk)
			}
			err := m.AnswerAndYield(ctx, t, manager.TurnYieldArgs{Status: o.OnTurn, To: o.HandoffTo, Note: "cotal agent took the turn"}, value)
			if err != nil {
				fmt.Fprintf(o.IO.ErrOut, "turn %s: %v\n", t.GoalID, err)
				continue
			}
			taken[t.GoalID] = true
			if value != nil {
				fmt.Fprintf(o.IO.Out, "ask %s: %s\n", t.GoalID, termsafe.Sanitize(o.OnAsk))
			}
			fmt.Fprintf(o.IO.Out, "turn %s: %s\n", t.GoalID, o.OnTurn)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sayInConclaves joins the conclaves the turn p carries (leaving those it no longer does), and
// says in each that the agent takes the turn.
func sayInConclaves(ctx context.Context, o *Options, c *cotal.Client, ms *runhost.Membership, p runhost.TurnPayload) {
	if err := ms.Sync(ctx, c, p.Conclaves); err != nil {
		fmt.Fprintf(o.IO.ErrOut, "conclaves: %v\n", err)
	}
	for _, ch := range p.Conclaves {
		text := fmt.Sprintf("%s takes step %s of run %s", c.Principal().Actor(), p.Step, p.Run)
		if _, err := c.Post(ctx, ch, []wire.Part{wire.TextPart(text)}); err != nil {
			fmt.Fprintf(o.IO.ErrOut, "conclave %s: %v\n", ch, err)
			continue
		}
		fmt.Fprintf(o.IO.Out, "conclave %s: said %s\n", ch, termsafe.Sanitize(p.Step))
	}
}

// sleepCtx waits d, and reports false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// credentials are what the agent connects with: its options, and the agent the command runs by
// name (nil for a manager's).
type credentials struct {
	opts  []cotal.Option
	agent *factory.RunningAgent
}

// credential returns the broker URL and the credential the agent runs on: the launch material's
// when a manager spawned it, else a fresh lifecycle issued through the ledger of the running mesh.
func (o *Options) credential(ctx context.Context) (string, credentials, error) {
	if o.LaunchMaterial != "" {
		if o.Name != "" || o.Role != "" || len(o.AllowPublish) > 0 || len(o.Capabilities) > 0 || o.Fresh || o.Takeover {
			return "", credentials{}, &exit.UsageError{Err: fmt.Errorf("$%s carries the agent's name, role and access: drop --name, --role, --allow-publish, --capability, --fresh and --takeover", manager.LaunchMaterialEnv)}
		}
		m, err := manager.ReadMaterial(o.LaunchMaterial)
		if err != nil {
			return "", credentials{}, err
		}
		opts, err := factory.MaterialOptions(m)
		if err != nil {
			return "", credentials{}, err
		}
		return m.URL, credentials{opts: opts}, nil
	}
	if err := agentflags.ValidName("--name", o.Name); err != nil {
		return "", credentials{}, err
	}
	if err := agentflags.ValidCapabilities("--capability", o.Capabilities); err != nil {
		return "", credentials{}, err
	}
	_, st, sp, err := o.Mesh("cotal agent needs an authenticated mesh: it runs on its own credential")
	if err != nil {
		return "", credentials{}, err
	}
	agent, err := o.RunAgent(ctx, o.Request(), "cotal agent", o.Fresh, o.Takeover)
	if err != nil {
		return "", credentials{}, err
	}
	return st.URL, credentials{opts: []cotal.Option{cotal.WithCredsData(agent.Cred.Creds), cotal.WithSpace(string(sp))}, agent: agent}, nil
}
