// Package agent implements `cotal agent`: a small agent process that mints and provisions its own
// credential, joins its channels, and shows what it surfaces.
package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/cli/agentflags"
	"github.com/gocotal/cotal/internal/cli/console"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/wire"
)

// Options are the inputs of `cotal agent`.
type Options struct {
	*factory.Factory
	agentflags.Flags
	Echo bool
	JSON bool
}

// Surfaced is one line of `cotal agent --json`; the field names are a stable interface.
type Surfaced struct {
	Kind       wire.DeliveryKind  `json:"kind"`
	Historical bool               `json:"historical"`
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
			"--echo it answers each direct message. On Ctrl-C it writes offline and retires its\n" +
			"lifecycle (its durables are deleted; its credential binds nothing again).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return agentRun(cmd.Context(), o) },
	}
	fs := cmd.Flags()
	o.Target.Register(fs)
	o.Flags.Register(fs, "the agent's name (its actor token); required")
	fs.BoolVar(&o.Echo, "echo", false, "answer each direct message")
	fs.BoolVar(&o.JSON, "json", false, "print one JSON object per surfaced message")
	return cmd
}

func agentRun(ctx context.Context, o *Options) error {
	if err := agentflags.ValidName("--name", o.Name); err != nil {
		return err
	}
	_, st, sp, err := o.Mesh("cotal agent needs an authenticated mesh: it runs on its own credential")
	if err != nil {
		return err
	}
	cred, stop, err := o.StartAgent(ctx, o.Request())
	if err != nil {
		return err
	}
	defer stop()
	// Echoes are sent from the main loop, not the handler: the handler may run during Connect,
	// before there is a client to send with.
	echoes := make(chan *cotal.Delivery, 64)
	enc := json.NewEncoder(o.IO.Out)
	handler := func(_ context.Context, dl *cotal.Delivery) error {
		if o.JSON {
			if err := enc.Encode(Surfaced{Kind: dl.Kind, Historical: dl.Historical, Message: dl.Message}); err != nil {
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
	c, err := cotal.Connect(ctx, st.URL, cotal.WithCredsData(cred.Creds), cotal.WithHandler(handler))
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
	fmt.Fprintf(o.IO.ErrOut, "agent %s (lifecycle %s) joined %q in space %s; Ctrl-C to stop\n", cred.Principal, cred.LifecycleUID, o.Subscribe, sp)
	for {
		select {
		case <-ctx.Done():
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			return c.Close(cctx)
		case err := <-c.Errors():
			// An error can quote what a peer wrote (a rejected message's subject, say).
			fmt.Fprintf(o.IO.ErrOut, "broker: %s\n", wire.SanitizeForTerminal(err.Error()))
		case dl := <-echoes:
			reply := []wire.Part{wire.TextPart("echo: " + console.Summary(dl.Message))}
			if _, err := c.DirectMessage(ctx, dl.Sender, reply, cotal.ReplyTo(dl.Message.ID)); err != nil {
				fmt.Fprintf(o.IO.ErrOut, "echo to %s: %v\n", dl.Sender, err)
			}
		}
	}
}
