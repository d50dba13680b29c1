// Package mint implements `cotal mint`: mint a credential for a name in a space.
package mint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/agentflags"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/natsctx"
	"github.com/gocotal/cotal/wire"
)

// Options are the inputs of `cotal mint`.
type Options struct {
	*factory.Factory
	// Space is the space to mint in; unlike other commands, main by default rather than the
	// mesh's first, so it is not the factory's Target.Space.
	Space          string
	Name           string
	Profile        string
	AllowPublish   []string
	AllowSubscribe []string
	Subscribe      []string
	Role           string
	Capabilities   []string
	Provision      bool
	ExpiresIn      time.Duration
	Out            string
	JSON           bool
	// NATSContext names the nats CLI context to write for the credential; empty: none.
	NATSContext string
	// Link prints a cotal:// link carrying the credential instead of the result.
	Link bool
}

// linkLife is how long a link's credential lives unless --expires-in says otherwise: a link is a
// bearer secret, and one forgotten in a chat log should stop working on its own.
const linkLife = 24 * time.Hour

// Result is what `cotal mint --json` prints. The field names are a stable interface.
type Result struct {
	Principal    string `json:"principal"`
	LifecycleUID string `json:"lifecycleUid,omitempty"`
	Creds        string `json:"creds"`
	Profile      string `json:"profile"`
	Expires      string `json:"expires,omitempty"`
	// Servers is what the credential connects to: on a cluster, every node's client URL,
	// comma-separated as the SDK and nats.go take them.
	Servers string `json:"servers"`
	// InboxPrefix is the only inbox prefix the credential may subscribe under: a client that
	// makes requests (JetStream's API, say) must use it (nats.go: nats.CustomInboxPrefix).
	InboxPrefix string `json:"inboxPrefix"`
	// NATSContext is the path of the nats CLI context written for the credential (--nats-context).
	NATSContext string `json:"natsContext,omitempty"`
	// Link is the cotal:// link carrying the credential (--link): a bearer secret.
	Link string `json:"link,omitempty"`
}

// NewCmdMint returns the `cotal mint` command. runF runs it; nil means mintRun.
func NewCmdMint(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "mint NAME",
		Short: "Mint a credential for NAME (principal local.NAME)",
		Long: "Mint a NATS credential for the principal local.NAME in a space, signed with the space's\n" +
			"key, and write it as a standard creds file (0600) usable by Cotal clients, the nats CLI\n" +
			"and plain nats.go. The broker enforces its permissions: an agent may post only to\n" +
			"--allow-publish channels and read only --allow-subscribe ones (--subscribe implies read).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return mintRun(cmd.Context(), o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Target.Dir, "dir", "", "the mesh directory (default: the nearest .cotal)")
	fs.StringVar(&o.Space, "space", string(mesh.DefaultSpace), "the space")
	fs.StringVar(&o.Profile, "profile", string(authority.ProfileAgent), fmt.Sprintf("credential profile, one of %q", authority.Handed))
	fs.StringSliceVar(&o.AllowPublish, "allow-publish", nil, "concrete channels the agent may post to (default: the concrete channels of --subscribe, as for `cotal agent` and `cotal mcp`)")
	fs.StringSliceVar(&o.AllowSubscribe, "allow-subscribe", nil, "channels or patterns (team.>) the agent may read; default: --subscribe")
	fs.StringSliceVar(&o.Subscribe, "subscribe", nil, "channels the agent joins (implies read access)")
	fs.StringVar(&o.NATSContext, "nats-context", "", "also write a nats CLI context NAME for the credential (server, creds, inbox prefix), used as `nats --context NAME`")
	fs.StringVar(&o.Role, "role", "", "the agent's role, for anycast tasks")
	agentflags.CapabilityVar(fs, &o.Capabilities)
	fs.BoolVar(&o.Provision, "provision", false, "pre-create the agent's durables on the running mesh")
	fs.DurationVar(&o.ExpiresIn, "expires-in", 0, "lifetime, e.g. 1h (default: the profile's; agents never expire)")
	fs.StringVar(&o.Out, "out", "", "creds file to write (default: .cotal/creds/<space>/NAME.creds)")
	fs.BoolVar(&o.JSON, "json", false, "print the result as JSON")
	fs.BoolVar(&o.Link, "link", false, "print only a cotal:// link that carries the agent's credential (a bearer secret: `cotal join LINK`; it expires in 24h unless --expires-in, and `cotal creds revoke NAME` ends it)")
	return cmd
}

func (o *Options) request() (ledger.Request, error) {
	usage := func(err error) (ledger.Request, error) { return ledger.Request{}, &exit.UsageError{Err: err} }
	sp, err := wire.ParseSpace(o.Space)
	if err != nil {
		return usage(fmt.Errorf("--space: %w", err))
	}
	if err := wire.ValidateActor(o.Name); err != nil {
		return usage(fmt.Errorf("NAME: %w", err))
	}
	p, err := authority.ParseProfile(o.Profile)
	if err != nil {
		return usage(fmt.Errorf("--profile: %w", err))
	}
	if !slices.Contains(authority.Handed, p) {
		return usage(fmt.Errorf("--profile %s: is not minted by name; one of %q", p, authority.Handed))
	}
	if o.ExpiresIn < 0 {
		return usage(fmt.Errorf("--expires-in %s: must be positive", o.ExpiresIn))
	}
	if o.NATSContext != "" {
		if err := natsctx.ValidName(o.NATSContext); err != nil {
			return usage(fmt.Errorf("--nats-context: %w", err))
		}
	}
	agentOnly := len(o.AllowPublish) > 0 || len(o.AllowSubscribe) > 0 || len(o.Subscribe) > 0 || o.Role != "" || o.Provision || len(o.Capabilities) > 0
	if p != authority.ProfileAgent && agentOnly {
		return usage(fmt.Errorf("--allow-publish, --allow-subscribe, --subscribe, --role, --capability and --provision are for --profile agent, not %s", p))
	}
	if err := agentflags.ValidCapabilities("--capability", o.Capabilities); err != nil {
		return ledger.Request{}, err
	}
	if o.Link {
		if p != authority.ProfileAgent {
			return usage(fmt.Errorf("--link carries an agent's credential, not a %s's", p))
		}
		if o.ExpiresIn == 0 {
			o.ExpiresIn = linkLife
		}
		o.Provision = true // whoever joins from the link gets the DMs sent to the agent
	}
	req := ledger.Request{
		Space: sp, Profile: p, Name: o.Name, Subscribe: o.Subscribe, AllowSubscribe: o.AllowSubscribe,
		AllowPublish: o.AllowPublish, Role: o.Role, Capabilities: o.Capabilities, Expires: o.ExpiresIn,
	}
	if err := req.Validate(); err != nil {
		return usage(err)
	}
	if p == authority.ProfileAgent {
		// The publish policy of every command that runs an agent: a minted agent posts where
		// `cotal agent` and `cotal mcp` with the same flags would.
		req = req.WithDefaultPublish()
	}
	for _, ch := range o.AllowPublish {
		if err := wire.ValidateChannel(ch); err != nil {
			return usage(fmt.Errorf("allow-publish: %w", err))
		}
	}
	return req, nil
}

// reachable returns the first of servers with a wildcard listen address (0.0.0.0, ::) replaced
// by this machine's host name, so a link names a host another machine can dial.
func reachable(servers string) string {
	first := strings.Split(servers, ",")[0]
	u, err := url.Parse(first)
	if err != nil {
		return first
	}
	if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsUnspecified() {
		if host, err := os.Hostname(); err == nil {
			u.Host = net.JoinHostPort(host, u.Port())
		}
	}
	return u.String()
}

// concrete returns the channels of subscribe that name one channel, not a pattern: those a link
// joins.
func concrete(subscribe []string) []string {
	var out []string
	for _, ch := range subscribe {
		if wire.ValidateChannel(ch) == nil {
			out = append(out, ch)
		}
	}
	return out
}

func mintRun(ctx context.Context, o *Options) error {
	req, err := o.request()
	if err != nil {
		return err
	}
	d, err := mesh.FindDir(o.Target.Dir, ".")
	if err != nil {
		return err
	}
	st, stateErr := d.ReadState()
	if errors.Is(stateErr, mesh.ErrNotRunning) {
		// An authority node of a cluster that is down mints through the other nodes.
		st, stateErr = d.ThroughPeers()
	}
	if stateErr != nil && !errors.Is(stateErr, mesh.ErrNotRunning) {
		return stateErr
	}
	if st != nil && st.Open {
		return errors.New("this mesh runs open (no authentication): there are no credentials to mint")
	}
	if _, err := d.OpenKeyring(); err != nil { // a damaged keyring is reported before anything else
		return err
	}
	if st == nil {
		return errors.New("minting needs the mesh running (`cotal up`): every credential gets a ledger row there, which can revoke it")
	}
	l, err := o.Ledger(ctx, req.Space)
	if err != nil {
		return err
	}
	cred, err := l.Issue(ctx, req)
	var invalid *wire.ValidationError
	if errors.As(err, &invalid) {
		return &exit.UsageError{Err: err}
	}
	if err != nil {
		return err
	}
	if o.Provision {
		if err := l.ProvisionAgent(ctx, cred, req); err != nil {
			return err
		}
	}
	out := o.Out
	if out == "" {
		out = d.CredsPath(req.Space, o.Name)
	}
	if out, err = filepath.Abs(out); err != nil {
		return err
	}
	if err := d.WriteCreds(out, cred.Creds); err != nil {
		return err
	}
	res := Result{Principal: cred.Principal.String(), LifecycleUID: string(cred.LifecycleUID), Creds: out, Profile: string(cred.Profile),
		Servers: d.Servers(st), InboxPrefix: wire.ConnID(cred.PublicKey).InboxPrefix()}
	if !cred.Expires.IsZero() {
		res.Expires = cred.Expires.UTC().Format(time.RFC3339)
	}
	if o.NATSContext != "" {
		desc := fmt.Sprintf("%s credential for %s in space %s", res.Profile, res.Principal, req.Space)
		if res.NATSContext, err = natsctx.Write(o.NATSContext, natsctx.Context{Description: desc, URL: res.Servers, Creds: out, InboxPrefix: res.InboxPrefix}); err != nil {
			return err
		}
	}
	if o.Link {
		if res.Link, err = cotal.CredentialLink(reachable(res.Servers), cred.Creds, concrete(req.Subscribe)...); err != nil {
			// No link, no credential: one nobody was handed must not stay active.
			_, rerr := l.Revoke(context.WithoutCancel(ctx), cred.LifecycleUID, cred.CredentialID, "its link could not be made")
			return errors.Join(fmt.Errorf("make the link: %w", err), rerr)
		}
		if !o.JSON {
			fmt.Fprintln(o.IO.Out, res.Link)
			fmt.Fprintf(o.IO.ErrOut, "a link for %s, expiring %s: whoever holds it connects as %s; `cotal creds revoke %s` ends it\n", res.Principal, res.Expires, res.Principal, o.Name)
			return nil
		}
	}
	if o.JSON {
		return json.NewEncoder(o.IO.Out).Encode(res)
	}
	fmt.Fprintf(o.IO.Out, "minted %s credential for %s\n", res.Profile, res.Principal)
	if res.LifecycleUID != "" {
		fmt.Fprintf(o.IO.Out, "  lifecycle uid: %s\n", res.LifecycleUID)
	}
	if res.Expires != "" {
		fmt.Fprintf(o.IO.Out, "  expires:       %s\n", res.Expires)
	}
	fmt.Fprintf(o.IO.Out, "  creds:         %s\n", res.Creds)
	fmt.Fprintf(o.IO.Out, "  servers:       %s\n", res.Servers)
	fmt.Fprintf(o.IO.Out, "  inbox prefix:  %s\n", res.InboxPrefix)
	if res.NATSContext != "" {
		fmt.Fprintf(o.IO.Out, "  nats context:  %s (nats --context %s ...)\n", res.NATSContext, o.NATSContext)
	}
	if o.Provision {
		fmt.Fprintln(o.IO.Out, "  durables:      provisioned")
	}
	return nil
}
