// Package doctor implements `cotal doctor auth`: prove the auth store sound.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
)

// Options are the inputs of `cotal doctor`.
type Options struct {
	*factory.Factory
	// Fix repairs the corrupt rows before the check.
	Fix bool
}

// NewCmdDoctor returns `cotal doctor` with its auth check.
func NewCmdDoctor(f *factory.Factory) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{Use: "doctor", Short: "Check a mesh's health"}
	auth := &cobra.Command{
		Use:   "auth",
		Short: "Prove the auth store's shape, report corrupt rows and overdue daemon renewals (exit 0 when sound)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return authRun(cmd.Context(), o) },
	}
	o.Target.Register(auth.Flags())
	auth.Flags().BoolVar(&o.Fix, "fix", false, "repair each corrupt row, failing safe (revoke, retire, remove), then check")
	cmd.AddCommand(auth)
	return cmd
}

func authRun(ctx context.Context, o *Options) error {
	_, _, sp, err := o.Mesh("an open mesh has no auth store")
	if err != nil {
		return err
	}
	l, err := o.Ledger(ctx, sp)
	if err != nil {
		return err
	}
	if o.Fix {
		repairs, err := l.Repair(ctx)
		for _, r := range repairs {
			if r.Err != nil {
				fmt.Fprintf(o.IO.Out, "left: %s: %v\n", r.Key, r.Err)
				continue
			}
			fmt.Fprintf(o.IO.Out, "fixed: %s %s\n", r.Key, r.Did)
		}
		if err != nil {
			return err
		}
	}
	c, err := l.Check(ctx)
	if err != nil {
		return err
	}
	for _, p := range c.Problems {
		fmt.Fprintf(o.IO.Out, "corrupt: %v\n", p)
	}
	rows, err := l.Credentials(ctx)
	if err != nil && !errors.Is(err, authstore.ErrCorrupt) { // the corrupt ones are listed above
		return err
	}
	now := o.Now()
	overdue := 0
	for _, r := range rows {
		if r.Profile.Daemon() && ledger.RenewalOverdue(r, now) {
			overdue++
			fmt.Fprintf(o.IO.Out, "overdue: the %s credential of %s was not renewed and expires %s (in %s): is its daemon running?\n",
				r.Profile, r.Principal, r.ExpiresAt.Time().UTC().Format(time.RFC3339), r.ExpiresAt.Time().Sub(now).Round(time.Second))
		}
	}
	var problems []string
	if len(c.Problems) > 0 {
		problems = append(problems, fmt.Sprintf("%d corrupt rows out of %d", len(c.Problems), c.Rows))
	}
	if overdue > 0 {
		problems = append(problems, fmt.Sprintf("%d daemon credentials overdue for renewal", overdue))
	}
	if len(problems) > 0 {
		return fmt.Errorf("the auth store of %s has %s", sp, strings.Join(problems, " and "))
	}
	fmt.Fprintf(o.IO.Out, "auth store of %s is sound: shape proven, %d rows checked, every daemon credential renewed on time\n", sp, c.Rows)
	return nil
}
