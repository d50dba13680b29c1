// Package actor implements `cotal actor grant|revoke|list`: the people ledger of a mesh in
// user-auth mode, on the mesh's host. A person is named by the name they log in with (their
// identity provider's subject; the development IdP's user name), or by --sub or --owner.
package actor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/remotemgr"
	"github.com/gocotal/cotal/internal/termsafe"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/wire"
)

// DefaultActor is the actor a person's CLI speaks as: the row `cotal supervise --mesh` needs.
const DefaultActor = "cli"

// who are the flags that name a person and their actor.
type who struct {
	sub, owner, actor string
}

func (w *who) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&w.sub, "sub", "", "the person's subject at the identity provider (default: NAME)")
	cmd.Flags().StringVar(&w.owner, "owner", "", "the person's owner token (u_…), instead of deriving it")
	cmd.Flags().StringVar(&w.actor, "actor", DefaultActor, "the person's actor the row is for")
}

// resolve returns the owner and actor the flags and NAME name.
func (w *who) resolve(st *authservice.State, name string) (string, string, error) {
	if err := wire.ValidateActor(w.actor); err != nil {
		return "", "", &exit.UsageError{Err: fmt.Errorf("--actor: %w", err)}
	}
	if w.owner != "" {
		if w.sub != "" {
			return "", "", &exit.UsageError{Err: errors.New("--owner and --sub exclude each other")}
		}
		if !wire.IsDerivedOwner(w.owner) {
			return "", "", &exit.UsageError{Err: fmt.Errorf("--owner %q is not an owner token (u_ and 26 base32 characters)", w.owner)}
		}
		return w.owner, w.actor, nil
	}
	sub := w.sub
	if sub == "" {
		sub = name
	}
	if sub == "" || len(sub) > 255 || strings.ContainsFunc(sub, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", "", &exit.UsageError{Err: fmt.Errorf("the person %q: a subject is 1 to 255 printable characters", sub)}
	}
	owner, err := st.Owner(sub)
	return owner, w.actor, err
}

// open opens the mesh's user-auth state and resolves the person NAME names there.
func (w *who) open(ctx context.Context, f *factory.Factory, name string) (*authservice.State, string, string, error) {
	st, err := state(ctx, f)
	if err != nil {
		return nil, "", "", err
	}
	owner, actor, err := w.resolve(st, name)
	return st, owner, actor, err
}

// state opens the user-auth state of the running mesh's space: its people and remote managers in
// the space's user-auth store, reached through the mesh's ledger.
func state(ctx context.Context, f *factory.Factory) (*authservice.State, error) {
	d, sp, kv, err := f.UserAuthStore(ctx)
	if err != nil {
		return nil, err
	}
	return authservice.OpenState(ctx, d.UserAuthDir(sp), sp, kv)
}

// NewCmdActor returns `cotal actor` and its subcommands.
func NewCmdActor(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "actor",
		Short: "Grant, revoke and list what people may do in a user-auth mesh",
		Long: "The people ledger of a mesh run with `cotal up --user-auth`, on its host. A row names a\n" +
			"person (the owner token derived from their login) and one of their actors (the CLI's is\n" +
			"cli), and grants scopes: spawn, role:<r>, admin, supervise (run a manager on another\n" +
			"machine: `cotal supervise --mesh`; no other scope implies it) and run, with the channels\n" +
			"the actor may read and post to. Every change takes effect at the person's next exchange or\n" +
			"connect.",
	}
	f.Target.Register(cmd.PersistentFlags())
	cmd.AddCommand(newCmdGrant(f), newCmdRevoke(f), newCmdList(f))
	return cmd
}

func newCmdGrant(f *factory.Factory) *cobra.Command {
	var w who
	var scopes, read, post []string
	var role string
	cmd := &cobra.Command{
		Use:   "grant NAME --scope S [--scope S...]",
		Short: "Grant scopes to the person logged in as NAME",
		Long: "Grant the scopes to the person logged in as NAME (their identity provider subject, or\n" +
			"--sub, or --owner), for their actor --actor (cli). Scopes add to what the row already\n" +
			"holds; --allow-subscribe, --allow-publish and --role replace the row's when given. The row\n" +
			"is written as a new incarnation, whose durables (its DM inbox) are made at once: the one\n" +
			"before is retired, and bearers issued before are refused at their next connect.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(scopes) == 0 {
				return &exit.UsageError{Err: errors.New("name at least one --scope")}
			}
			if err := userauth.ValidateScopes(scopes); err != nil {
				return &exit.UsageError{Err: fmt.Errorf("--scope: %w", err)}
			}
			for _, ch := range append(slices.Clone(read), post...) {
				if err := wire.ValidateChannelPattern(ch); err != nil {
					return &exit.UsageError{Err: fmt.Errorf("--allow-subscribe/--allow-publish: %w", err)}
				}
			}
			st, owner, actor, err := w.open(cmd.Context(), f, args[0])
			if err != nil {
				return err
			}
			l, err := f.Ledger(cmd.Context(), st.Space)
			if err != nil {
				return err
			}
			_, got, err := st.Change(cmd.Context(), l, owner, actor, func(have *userauth.Row) (*userauth.Row, error) {
				row := &userauth.Row{Owner: owner, Actor: actor, Label: args[0]}
				if have != nil {
					row = have.Clone()
				}
				for _, s := range scopes {
					if !slices.Contains(row.Scope, s) {
						row.Scope = append(row.Scope, s)
					}
				}
				if cmd.Flags().Changed("allow-subscribe") {
					row.AllowSubscribe = read
				}
				if cmd.Flags().Changed("allow-publish") {
					row.AllowPublish = post
				}
				if cmd.Flags().Changed("role") {
					row.Role = role
				}
				return row, nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(f.IO.ErrOut, "granted %s to %s (%s.%s): it holds %s\n", strings.Join(scopes, ", "), args[0], owner, actor, strings.Join(got.Scope, ", "))
			return nil
		},
	}
	w.register(cmd)
	cmd.Flags().StringSliceVar(&scopes, "scope", nil, "a scope to grant: spawn, role:<r>, admin, supervise or run (repeat or comma-separate)")
	cmd.Flags().StringSliceVar(&read, "allow-subscribe", nil, "channels or patterns the actor may read (replaces the row's)")
	cmd.Flags().StringSliceVar(&post, "allow-publish", nil, "channels or patterns the actor may post to (replaces the row's)")
	cmd.Flags().StringVar(&role, "role", "", "the role whose tasks the actor serves")
	return cmd
}

func newCmdRevoke(f *factory.Factory) *cobra.Command {
	var w who
	var scopes []string
	cmd := &cobra.Command{
		Use:   "revoke NAME [--scope S]",
		Short: "Revoke a person's row, or some of its scopes",
		Long: "Without --scope, delete the row of the person logged in as NAME: its incarnation is\n" +
			"retired, every bearer of it refused and the person's open connections closed on every\n" +
			"server. With --scope, take those scopes away (a new incarnation, so bearers issued before\n" +
			"are refused and the connections open on them closed). Taking supervise away evicts the\n" +
			"remote managers the person runs: the broker refuses their credentials, closes their\n" +
			"connections, and the agents they spawned are retired.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := userauth.ValidateScopes(scopes); err != nil {
				return &exit.UsageError{Err: fmt.Errorf("--scope: %w", err)}
			}
			st, owner, actor, err := w.open(cmd.Context(), f, args[0])
			if err != nil {
				return err
			}
			l, err := f.Ledger(cmd.Context(), st.Space)
			if err != nil {
				return err
			}
			row, err := st.People.Get(cmd.Context(), owner, actor)
			if errors.Is(err, userauth.ErrNoRow) {
				return fmt.Errorf("%s (%s.%s) holds no row", args[0], owner, actor)
			} else if err != nil {
				return err
			}
			if len(scopes) == 0 {
				if err := st.Revoke(cmd.Context(), l, owner, actor); err != nil {
					return err
				}
				fmt.Fprintf(f.IO.ErrOut, "revoked %s (%s.%s)\n", args[0], owner, actor)
				return nil
			}
			_, got, err := st.Change(cmd.Context(), l, owner, actor, func(have *userauth.Row) (*userauth.Row, error) {
				if have == nil {
					return nil, fmt.Errorf("%s (%s.%s) holds no row", args[0], owner, actor)
				}
				next := have.Clone()
				next.Scope = slices.DeleteFunc(next.Scope, func(s string) bool { return slices.Contains(scopes, s) })
				return next, nil
			})
			if err != nil {
				return err
			}
			// The connections open on the old incarnation's bearers hold the scopes taken away.
			if _, err := l.EvictConnectionsOf(cmd.Context(), row.Principal()); err != nil {
				return err
			}
			if slices.Contains(scopes, remotemgr.ScopeSupervise) {
				if err := st.EvictManagers(cmd.Context(), l, owner, actor); err != nil {
					return err
				}
			}
			fmt.Fprintf(f.IO.ErrOut, "revoked %s from %s (%s.%s): it holds %s\n", strings.Join(scopes, ", "), args[0], owner, actor, dash(strings.Join(got.Scope, ", ")))
			return nil
		},
	}
	w.register(cmd)
	cmd.Flags().StringSliceVar(&scopes, "scope", nil, "scopes to take away (default: the whole row)")
	return cmd
}

// ListRow is one row of `cotal actor list --json`; the field names are a stable interface.
type ListRow struct {
	Name           string    `json:"name,omitempty"`
	Owner          string    `json:"owner"`
	Actor          string    `json:"actor"`
	Managed        bool      `json:"managed,omitempty"`
	Scope          []string  `json:"scope"`
	AllowSubscribe []string  `json:"allowSubscribe"`
	AllowPublish   []string  `json:"allowPublish"`
	Role           string    `json:"role,omitempty"`
	Parent         string    `json:"parent,omitempty"`
	LifecycleUID   string    `json:"lifecycleUid"`
	GrantedAt      time.Time `json:"grantedAt"`
}

func newCmdList(f *factory.Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the people ledger",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := state(cmd.Context(), f)
			if err != nil {
				return err
			}
			rows, err := st.People.List(cmd.Context())
			if err != nil {
				return err
			}
			out := make([]ListRow, 0, len(rows))
			for _, r := range rows {
				out = append(out, ListRow{Name: r.Label, Owner: r.Owner, Actor: r.Actor, Managed: r.Kind == userauth.KindManaged,
					Scope: nonNil(r.Scope), AllowSubscribe: nonNil(r.AllowSubscribe), AllowPublish: nonNil(r.AllowPublish),
					Role: r.Role, Parent: r.Parent, LifecycleUID: string(r.LifecycleUID), GrantedAt: time.UnixMilli(r.GrantedAt).UTC()})
			}
			if asJSON {
				return json.NewEncoder(f.IO.Out).Encode(out)
			}
			if len(out) == 0 {
				fmt.Fprintln(f.IO.Out, "nobody is granted anything (`cotal actor grant NAME --scope S`)")
				return nil
			}
			tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tOWNER\tACTOR\tSCOPE\tREAD\tPOST")
			for _, r := range out {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", dash(termsafe.Sanitize(r.Name)), r.Owner, r.Actor,
					dash(strings.Join(r.Scope, ",")), dash(strings.Join(r.AllowSubscribe, ",")), dash(strings.Join(r.AllowPublish, ",")))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the rows as JSON")
	return cmd
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
