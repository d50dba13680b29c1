// Package send implements `cotal send msg|dm|ask`: one-shot sends, as the operator through the
// mesh's ledger or as the principal of a creds file (--creds).
package send

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/internal/userauth/oidc"
	"github.com/gocotal/cotal/wire"
)

// Options are the inputs of `cotal send`.
type Options struct {
	*factory.Factory
	As     string
	Creds  string // a creds file to send as, instead of a ledger-issued operator credential
	Server string // the broker URL for --creds (default: the running mesh's)
	Mesh   string // a user-auth mesh's exchange URL: send as the person logged in there
	Kind   string // msg, dm or ask
	To     string // channel, name or role
	Text   string
}

// DefaultActor is the actor the CLI sends as unless --as names another.
const DefaultActor = "operator"

// NewCmdSend returns `cotal send` and its three subcommands. runF runs them; nil means sendRun.
func NewCmdSend(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "send",
		Short: "Send one message: to a channel, to a peer, or to a role",
		Long: "Send one message, then exit. By default it sends as local.operator (or --as NAME) with a\n" +
			"short-lived operator credential the running mesh's ledger issues. With --creds FILE it\n" +
			"sends as that credential's principal instead, with no ledger: to --server URL, or to the\n" +
			"running mesh of --dir. It reports what the broker stored, never that anyone received it.\n" +
			"A refusal by the broker or the credential exits 4.",
	}
	pf := cmd.PersistentFlags()
	o.Target.Register(pf)
	pf.StringVar(&o.As, "as", DefaultActor, "the actor to send as (not with --creds)")
	pf.StringVar(&o.Creds, "creds", "", "send as the principal of this creds file, with no ledger")
	pf.StringVar(&o.Server, "server", "", "the broker URL (nats://, tls://, cotal://) for --creds (default: the running mesh's)")
	pf.StringVar(&o.Mesh, "mesh", "", "send as yourself to the user-auth mesh whose exchange is at this URL (`cotal login --mesh` first); --as names your actor (default cli)")
	for _, sub := range []struct{ kind, use, short string }{
		{"msg", "msg CHANNEL TEXT", "Post TEXT to a channel (multicast)"},
		{"dm", "dm NAME TEXT", "Send TEXT to one peer: a roster name, an actor or a principal (unicast, durable)"},
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

// validate checks the flags and arguments that need no connection.
func (o *Options) validate() error {
	usage := func(format string, args ...any) error { return &exit.UsageError{Err: fmt.Errorf(format, args...)} }
	if o.Mesh != "" {
		if o.Creds != "" || o.Server != "" {
			return usage("--mesh sends as your login there: drop --creds and --server")
		}
		if err := factory.CheckMeshURL(o.Mesh); err != nil {
			return err
		}
		if o.As == DefaultActor {
			o.As = factory.MeshActor
		}
	}
	if o.Creds == "" {
		if o.Server != "" {
			return usage("--server needs --creds: without it the mesh of --dir names the server")
		}
		if err := wire.ValidateActor(o.As); err != nil {
			return usage("--as: %w", err)
		}
	} else {
		if o.As != DefaultActor {
			return usage("--creds carries its own principal: drop --as")
		}
		if o.Server != "" {
			if _, err := cotal.ParseURL(o.Server); err != nil {
				return usage("--server: %w", err)
			}
		}
	}
	switch o.Kind {
	case "msg":
		if err := wire.ValidateChannel(o.To); err != nil {
			return &exit.UsageError{Err: err}
		}
	case "ask":
		if strings.TrimSpace(o.To) == "" {
			return usage("ROLE must not be empty")
		}
	}
	return nil
}

func sendRun(ctx context.Context, o *Options) error {
	if err := o.validate(); err != nil {
		return err
	}
	c, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
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
		if sent, err = c.Post(ctx, o.To, parts); err != nil {
			return err
		}
	case "dm":
		roster, err := c.Roster(ctx)
		if err != nil {
			return err
		}
		defer roster.Stop()
		to, peer, err := resolve(roster, o.To)
		if err != nil {
			return err
		}
		recipient = "had no roster row"
		if peer != nil {
			recipient = fmt.Sprintf("%s %s", peer.Key, status(*peer))
		}
		if sent, err = c.DirectMessage(ctx, to, parts); err != nil {
			return err
		}
		if peer == nil {
			fmt.Fprintf(o.IO.ErrOut, "no roster row for %s: the message is stored for that principal\n", to)
		}
	case "ask":
		roster, err := c.Roster(ctx)
		if err != nil {
			return err
		}
		defer roster.Stop()
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

// connect connects as the person logged in to --mesh, as the --creds principal, or else as a
// ledger-issued operator credential.
func (o *Options) connect(ctx context.Context) (*cotal.Client, error) {
	if o.Mesh != "" {
		path, err := oidc.DefaultSessionsPath()
		if err != nil {
			return nil, err
		}
		url, opts, err := authservice.PersonOptions(ctx, userauth.NewHTTPClient(), path, o.Mesh, o.As)
		if errors.Is(err, userauth.ErrDenied) {
			return nil, &exit.AuthError{Err: err}
		} else if err != nil {
			return nil, err
		}
		return cotal.Connect(ctx, url, append(opts, cotal.WithPresence(false))...)
	}
	if o.Creds == "" {
		return o.Client(ctx, "", authority.ProfileOperator, o.As, cotal.WithPresence(false))
	}
	url := o.Server
	if url == "" {
		_, st, err := mesh.Running(o.Target.Dir)
		if errors.Is(err, mesh.ErrNoMesh) {
			return nil, &exit.UsageError{Err: fmt.Errorf("--creds without --server needs a running mesh to name the server: %w", err)}
		}
		if err != nil {
			return nil, err
		}
		url = st.URL
	}
	opts := []cotal.Option{cotal.WithCreds(o.Creds), cotal.WithPresence(false)}
	if o.Target.Space != "" {
		opts = append(opts, cotal.WithSpace(o.Target.Space))
	}
	c, err := cotal.Connect(ctx, url, opts...)
	if errors.Is(err, cotal.ErrInvalidOption) {
		return nil, &exit.UsageError{Err: err} // an unreadable --creds, or a --space it disagrees with
	}
	return c, err
}

// resolve names the principal a dm NAME addresses and its roster row, nil when it has none. A
// principal (local.bob, u_….bob) is taken as it is. Any other name is looked up in the roster by
// actor or card name and, with no row, addresses local.NAME all the same: a durable DM to an
// offline or not yet started agent is the point of the inbox. A malformed name is a usage error,
// an ambiguous one an error listing the principals it names.
func resolve(r *cotal.Roster, name string) (wire.Principal, *cotal.Peer, error) {
	if to, err := wire.ParsePrincipal(name); err == nil {
		for _, p := range r.Peers() {
			if p.Key == to.String() && p.Presence != nil {
				return to, &p, nil
			}
		}
		return to, nil, nil
	}
	peers := r.Find(name)
	switch len(peers) {
	case 0:
		var to wire.Principal
		var err error
		if strings.Contains(name, ".") {
			_, err = wire.ParsePrincipal(name)
		} else {
			to, err = wire.NewPrincipal(wire.DevOwner, name)
		}
		if err != nil {
			return wire.Principal{}, nil, &exit.UsageError{Err: fmt.Errorf("NAME: %w", err)}
		}
		return to, nil, nil
	case 1:
		to, err := wire.ParsePrincipal(peers[0].Key)
		if err != nil {
			return wire.Principal{}, nil, fmt.Errorf("roster row %q: %w", peers[0].Key, err)
		}
		return to, &peers[0], nil
	}
	keys := make([]string, len(peers))
	for i, p := range peers {
		keys[i] = p.Key
	}
	return wire.Principal{}, nil, fmt.Errorf("%q names %d peers (%s); send to one of those keys", name, len(peers), strings.Join(keys, ", "))
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
