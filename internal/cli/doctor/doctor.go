// Package doctor implements `cotal doctor auth`: prove the auth store sound.
package doctor

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/cli/factory"
)

// Options are the inputs of `cotal doctor`.
type Options struct {
	*factory.Factory
}

// NewCmdDoctor returns `cotal doctor` with its auth check.
func NewCmdDoctor(f *factory.Factory) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{Use: "doctor", Short: "Check a mesh's health"}
	auth := &cobra.Command{
		Use:   "auth",
		Short: "Prove the auth store's shape and report corrupt rows (exit 0 when sound)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return authRun(cmd.Context(), o) },
	}
	o.Target.Register(auth.Flags())
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
	c, err := l.Check(ctx)
	if err != nil {
		return err
	}
	for _, p := range c.Problems {
		fmt.Fprintf(o.IO.Out, "corrupt: %v\n", p)
	}
	if len(c.Problems) > 0 {
		return fmt.Errorf("the auth store of %s has %d corrupt rows out of %d", sp, len(c.Problems), c.Rows)
	}
	fmt.Fprintf(o.IO.Out, "auth store of %s is sound: shape proven, %d rows checked\n", sp, c.Rows)
	return nil
}
