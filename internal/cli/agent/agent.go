// Package agent implements `cotal agent`: a small agent process that mints and provisions its own
// credential, joins its channels, and shows what it surfaces.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/console"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/cli/target"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/wire"
)

// Options are the inputs of `cotal agent`.
type Options struct {
	IO *iostreams.IOStreams
	target.Flags
	Name         string
	Role         string
	Subscribe    []string
	AllowPublish []string
	Echo         bool
	JSON         bool
}

// Surfaced is one line of `cotal agent --json`; the field names are a stable interface.
type Surfaced struct {
	Kind       wire.DeliveryKind  `json:"kind"`
	Historical bool               `json:"historical"`
	Message    *wire.CotalMessage `json:"message"`
}

// NewCmdAgent returns the `cotal agent` command.
func NewCmdAgent(io *iostreams.IOStreams) *cobra.Command {
	o := &Options{IO: io}
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
	f := cmd.Flags()
	o.Register(f)
	f.StringVar(&o.Name, "name", "", "the agent's name (its actor token); required")
	f.StringVar(&o.Role, "role", "", "a role, to receive anycast tasks")
	f.StringSliceVar(&o.Subscribe, "subscribe", nil, "channels to join")
	f.StringSliceVar(&o.AllowPublish, "allow-publish", nil, "channels the agent may post to (default: the concrete channels of --subscribe)")
	f.BoolVar(&o.Echo, "echo", false, "answer each direct message")
	f.BoolVar(&o.JSON, "json", false, "print one JSON object per surfaced message")
	return cmd
}

func agentRun(ctx context.Context, o *Options) error {
	if err := wire.ValidateActor(o.Name); err != nil {
		return &exit.UsageError{Err: fmt.Errorf("--name: %w", err)}
	}
	d, st, sp, err := o.Resolve("cotal agent needs an authenticated mesh: it runs on its own credential")
	if err != nil {
		return err
	}
	auth, err := mesh.OpenAuthority(d)
	if err != nil {
		return err
	}
	req := mesh.MintRequest{
		Space: sp, Profile: authority.ProfileAgent, Name: o.Name, Subscribe: o.Subscribe,
		AllowPublish: o.AllowPublish, Role: o.Role,
	}
	cred, retire, err := auth.StartAgent(ctx, st.URL, req)
	var invalid *wire.ValidationError
	if errors.As(err, &invalid) {
		return &exit.UsageError{Err: err}
	}
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := retire(rctx); err != nil {
			fmt.Fprintf(o.IO.ErrOut, "retire lifecycle %s.%s: %v\n", cred.Principal, cred.LifecycleUID, err)
		}
	}()
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
