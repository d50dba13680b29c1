// Package send implements `cotal send msg|dm|ask`: one-shot sends as the operator.
package send

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/cli/target"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/wire"
)

// Options are the inputs of `cotal send`.
type Options struct {
	IO *iostreams.IOStreams
	target.Flags
	As   string
	Kind string // msg, dm or ask
	To   string // channel, name or role
	Text string
}

// DefaultActor is the actor the CLI sends as unless --as names another.
const DefaultActor = "operator"

// NewCmdSend returns `cotal send` and its three subcommands. runF runs them; nil means sendRun.
func NewCmdSend(io *iostreams.IOStreams, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{IO: io}
	cmd := &cobra.Command{
		Use:   "send",
		Short: "Send one message: to a channel, to a peer, or to a role",
		Long: "Send one message as local.operator (or --as NAME) with a short-lived operator credential.\n" +
			"It reports what the broker stored, never that anyone received it.",
	}
	pf := cmd.PersistentFlags()
	o.Register(pf)
	pf.StringVar(&o.As, "as", DefaultActor, "the actor to send as")
	for _, sub := range []struct{ kind, use, short string }{
		{"msg", "msg CHANNEL TEXT", "Post TEXT to a channel (multicast)"},
		{"dm", "dm NAME TEXT", "Send TEXT to one peer, found by name in presence (unicast, durable)"},
		{"ask", "ask ROLE TEXT", "Hand TEXT to any one member of ROLE (anycast, durable)"},
	} {
		kind := sub.kind
		cmd.AddCommand(&cobra.Command{
			Use:   sub.use,
			Short: sub.short,
			Args:  cobra.MinimumNArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				o.Kind, o.To, o.Text = kind, args[0], strings.Join(args[1:], " ")
				if runF != nil {
					return runF(cmd.Context(), o)
				}
				return sendRun(cmd.Context(), o)
			},
		})
	}
	return cmd
}

func sendRun(ctx context.Context, o *Options) error {
	if err := wire.ValidateActor(o.As); err != nil {
		return &exit.UsageError{Err: fmt.Errorf("--as: %w", err)}
	}
	switch o.Kind {
	case "msg":
		if err := wire.ValidateChannel(o.To); err != nil {
			return &exit.UsageError{Err: err}
		}
	case "ask":
		if strings.TrimSpace(o.To) == "" {
			return &exit.UsageError{Err: fmt.Errorf("ROLE must not be empty")}
		}
	}
	d, st, sp, err := o.Resolve("")
	if err != nil {
		return err
	}
	c, err := mesh.Client(ctx, d, st, sp, authority.ProfileOperator, o.As, cotal.WithPresence(false))
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	roster, err := c.Roster(ctx)
	if err != nil {
		return err
	}
	defer roster.Stop()
	parts := []wire.Part{wire.TextPart(o.Text)}
	var sent *cotal.Sent
	var recipient string
	switch o.Kind {
	case "msg":
		cfg, err := c.ChannelConfig(ctx, o.To)
		if err != nil {
			return err
		}
		recipient = fmt.Sprintf("channel %s (%s)", o.To, cfg.DeliveryClass)
		sent, err = c.Post(ctx, o.To, parts)
		if err != nil {
			return err
		}
	case "dm":
		peer, err := resolve(roster, o.To)
		if err != nil {
			return err
		}
		to, err := wire.ParsePrincipal(peer.Key)
		if err != nil {
			return err
		}
		recipient = fmt.Sprintf("%s %s", peer.Key, status(peer))
		if sent, err = c.DirectMessage(ctx, to, parts); err != nil {
			return err
		}
	case "ask":
		online := 0
		for _, p := range roster.Peers() {
			if p.Online && p.Presence.Card.Role == o.To {
				online++
			}
		}
		recipient = fmt.Sprintf("role %s with %d online", o.To, online)
		if sent, err = c.Ask(ctx, o.To, parts); err != nil {
			return err
		}
	}
	fmt.Fprintf(o.IO.Out, "stored seq %d; recipient %s at send; delivery not confirmed\n", sent.Seq, recipient)
	return nil
}

// resolve finds the one peer a name addresses, refusing an unknown or ambiguous name.
func resolve(r *cotal.Roster, name string) (cotal.Peer, error) {
	peers := r.Find(name)
	switch len(peers) {
	case 0:
		return cotal.Peer{}, fmt.Errorf("no peer named %q in the roster (`cotal ps` lists them)", name)
	case 1:
		return peers[0], nil
	}
	keys := make([]string, len(peers))
	for i, p := range peers {
		keys[i] = p.Key
	}
	return cotal.Peer{}, fmt.Errorf("%q names %d peers (%s); send to one of those keys", name, len(peers), strings.Join(keys, ", "))
}

// status renders a peer's presence status as a recipient sees it at send time.
func status(p cotal.Peer) string {
	switch {
	case p.Presence == nil:
		return "(gone)"
	case !p.Online:
		return "(offline)"
	}
	return "(" + string(p.Presence.Status) + ")"
}
