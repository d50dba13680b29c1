// Package anchors implements `cotal anchors`: the space's trust anchors, the keys that sign its
// artifacts, so anyone can verify what they signed.
package anchors

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/anchor"
	"github.com/gocotal/cotal/internal/cli/factory"
)

// Options are the inputs of `cotal anchors`.
type Options struct {
	*factory.Factory
	JSON bool
}

// Row is one anchor of `cotal anchors --json`; the field names are a stable interface.
type Row struct {
	KeyID string `json:"keyId"`
	// Role is the roles the key signs for, comma-separated; Roles lists them.
	Role  string   `json:"role"`
	Roles []string `json:"roles"`
	// PublicKey is the nkeys-encoded Ed25519 key a signature verifies against.
	PublicKey string              `json:"publicKey"`
	Owner     string              `json:"owner"`
	Scope     map[string][]string `json:"scope"`
	// Since and Until bound the key's window, in epoch milliseconds.
	Since   int64 `json:"since"`
	Until   int64 `json:"until"`
	Revoked bool  `json:"revoked"`
	// Current reports a key that may sign now: inside its window and not revoked.
	Current bool `json:"current"`
}

// NewCmdAnchors returns the `cotal anchors` command.
func NewCmdAnchors(f *factory.Factory) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "anchors [--json]",
		Short: "List the trust anchors: the keys that sign the space's grants, and when",
		Long: "List the signing keys registered in the space's records (SPEC §13.10), each with its roles,\n" +
			"public key, owner, scope and window. A session grant's issuer.keyId names one: its sig is\n" +
			"the Ed25519 signature, by that public key, of the grant's RFC 8785 form without sig.\n" +
			"A key signs only inside its window; what it signed there verifies until it expires.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), o) },
	}
	o.Target.Register(cmd.Flags())
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the anchors as JSON")
	return cmd
}

func run(ctx context.Context, o *Options) error {
	if _, _, _, err := o.Mesh("an open mesh signs nothing"); err != nil {
		return err
	}
	l, err := o.Ledger(ctx, "")
	if err != nil {
		return err
	}
	list, err := l.Anchors(ctx)
	if err != nil {
		return err
	}
	now := o.Now()
	out := make([]Row, 0, len(list))
	for _, a := range list {
		out = append(out, rowOf(a, now))
	}
	if o.JSON {
		return json.NewEncoder(o.IO.Out).Encode(out)
	}
	if len(out) == 0 {
		fmt.Fprintln(o.IO.Out, "no anchors registered: one is made when the first session is established")
		return nil
	}
	tw := tabwriter.NewWriter(o.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY ID\tROLE\tSINCE\tUNTIL\tSTATE\tPUBLIC KEY")
	for _, r := range out {
		state := "closed"
		switch {
		case r.Revoked:
			state = "revoked"
		case r.Current:
			state = "current"
		case o.Now().UnixMilli() < r.Since:
			state = "pending"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.KeyID, r.Role, stamp(r.Since), stamp(r.Until), state, r.PublicKey)
	}
	return tw.Flush()
}

func rowOf(a anchor.Anchor, now time.Time) Row {
	r := Row{KeyID: a.KeyID, PublicKey: a.PublicKey, Owner: a.Owner, Scope: map[string][]string{},
		Since: int64(a.ValidFrom), Until: int64(a.ValidTo), Revoked: a.Revoked}
	for _, role := range a.Roles {
		r.Roles = append(r.Roles, string(role))
	}
	for role, entries := range a.Scope {
		r.Scope[string(role)] = entries
	}
	r.Role = strings.Join(r.Roles, ",")
	at := now.UnixMilli()
	r.Current = !a.Revoked && at >= r.Since && at <= r.Until
	return r
}

func stamp(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }
