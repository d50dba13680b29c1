// Package creds implements `cotal creds list|revoke`: the credential ledger.
package creds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/wire"
)

// Options are the inputs of `cotal creds`.
type Options struct {
	*factory.Factory
	Actor string
	// State keeps only the rows in this state: active, revoked or expired.
	State string
	JSON  bool
	// Which is the actor or credential id revoke takes.
	Which string
}

// Row is one line of `cotal creds list --json`; the field names are a stable interface.
type Row struct {
	Principal    string `json:"principal"`
	LifecycleUID string `json:"lifecycleUid"`
	CredentialID string `json:"credentialId"`
	Profile      string `json:"profile"`
	State        string `json:"state"`
	UserKey      string `json:"userKey"`
	IssuedAt     int64  `json:"issuedAt"`
	// ExpiresAt is null for a credential that never expires.
	ExpiresAt *int64 `json:"expiresAt"`
}

// NewCmdCreds returns `cotal creds` with list and revoke.
func NewCmdCreds(f *factory.Factory) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{Use: "creds", Short: "List and revoke the credentials in the ledger"}
	pf := cmd.PersistentFlags()
	o.Target.Register(pf)
	list := &cobra.Command{
		Use: "list", Short: "List the credentials in the ledger, of every profile", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return listRun(cmd.Context(), o) },
	}
	list.Flags().StringVar(&o.Actor, "actor", "", "only this actor's credentials")
	list.Flags().StringVar(&o.State, "state", "", fmt.Sprintf("only credentials in this state, one of %q", states))
	list.Flags().BoolVar(&o.JSON, "json", false, "print the list as JSON")
	revoke := &cobra.Command{
		Use:   "revoke ACTOR|CREDENTIAL_ID",
		Short: "Revoke a credential, or every active credential of an actor",
		Long: "Revoke in the ledger and at the broker: the broker refuses the credential from then on and\n" +
			"closes its open connections; the command returns once the broker lists none of them.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Which = args[0]
			return revokeRun(cmd.Context(), o)
		},
	}
	cmd.AddCommand(list, revoke)
	return cmd
}

// ledgerRows reads the ledger of the running mesh's space; corrupt rows are reported on stderr
// and left out.
func ledgerRows(ctx context.Context, o *Options) ([]authstore.CredentialRow, *ledger.Ledger, error) {
	if _, _, _, err := o.Mesh("an open mesh has no credentials"); err != nil {
		return nil, nil, err
	}
	l, err := o.Ledger(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	list, err := l.Credentials(ctx)
	if err != nil && !errors.Is(err, authstore.ErrCorrupt) {
		return nil, nil, err
	}
	if err != nil {
		fmt.Fprintf(o.IO.ErrOut, "some rows are corrupt (`cotal doctor auth` lists them): %v\n", err)
	}
	return list, l, nil
}

// expired is the state shown for an active row past its expiry, which the bucket has not yet
// dropped: the broker refuses the credential already.
const expired = "expired"

// states are the states `creds list --state` takes.
var states = []string{string(authstore.CredActive), string(authstore.CredRevoked), expired}

// stateOf returns the state a row is shown in at now.
func stateOf(r authstore.CredentialRow, now time.Time) string {
	if r.State == authstore.CredActive && r.ExpiresAt != 0 && !r.ExpiresAt.Time().After(now) {
		return expired
	}
	return string(r.State)
}

func listRun(ctx context.Context, o *Options) error {
	if o.State != "" && !slices.Contains(states, o.State) {
		return &exit.UsageError{Err: fmt.Errorf("--state %q: must be one of %q", o.State, states)}
	}
	list, _, err := ledgerRows(ctx, o)
	if err != nil {
		return err
	}
	now := o.Now()
	out := []Row{}
	for _, r := range list {
		if o.Actor != "" && r.Principal != wire.DevOwner+"."+o.Actor {
			continue
		}
		state := stateOf(r, now)
		if o.State != "" && state != o.State {
			continue
		}
		out = append(out, Row{
			Principal: r.Principal, LifecycleUID: string(r.LifecycleUID), CredentialID: r.CredentialID, Profile: string(r.Profile),
			State: state, UserKey: r.UserKey, IssuedAt: int64(r.IssuedAt),
		})
		if r.ExpiresAt != 0 {
			exp := int64(r.ExpiresAt)
			out[len(out)-1].ExpiresAt = &exp
		}
	}
	if o.JSON {
		return json.NewEncoder(o.IO.Out).Encode(out)
	}
	if len(out) == 0 {
		fmt.Fprintln(o.IO.Out, "no credentials in the ledger")
		return nil
	}
	tw := tabwriter.NewWriter(o.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PRINCIPAL\tCREDENTIAL\tSTATE\tPROFILE\tLIFECYCLE")
	for _, r := range out {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Principal, r.CredentialID, r.State, r.Profile, r.LifecycleUID)
	}
	return tw.Flush()
}

func revokeRun(ctx context.Context, o *Options) error {
	list, l, err := ledgerRows(ctx, o)
	if err != nil {
		return err
	}
	var targets []authstore.CredentialRow
	for _, r := range list {
		if r.State == authstore.CredActive && (r.CredentialID == o.Which || r.Principal == wire.DevOwner+"."+o.Which) {
			targets = append(targets, r)
		}
	}
	if len(targets) == 0 {
		return fmt.Errorf("no active credential with id or actor %q (`cotal creds list` shows them)", o.Which)
	}
	// Every target is tried: one that fails does not keep the others active.
	var errs []error
	for _, r := range targets {
		if _, err := l.Revoke(ctx, r.LifecycleUID, r.CredentialID, "revoked by the operator"); err != nil {
			errs = append(errs, fmt.Errorf("revoke %s (%s): %w", r.CredentialID, r.Principal, err))
			continue
		}
		fmt.Fprintf(o.IO.Out, "revoked %s (%s): the broker refuses it and its connections are closed\n", r.CredentialID, r.Principal)
	}
	return errors.Join(errs...)
}
