// Package deliver implements `cotal deliver`: run a delivery daemon for a space of the running
// mesh, beside (as standby to) the one `cotal up` runs.
package deliver

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/agentflags"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/wire"
)

// Options are the inputs of `cotal deliver`.
type Options struct {
	*factory.Factory
	Name string
	// Lifetime is the lifetime of the daemon's credential, renewed at two thirds of it.
	Lifetime time.Duration
}

// NewCmdDeliver returns the `cotal deliver` command.
func NewCmdDeliver(f *factory.Factory) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "deliver",
		Short: "Run a delivery daemon: active if it gets the space's lease, standby otherwise",
		Long: "Run a delivery daemon for a space of the running mesh on its own delivery credential.\n" +
			"One daemon per space is active, holding the lease; this one waits as standby and takes\n" +
			"over when the lease lapses. Ctrl-C stops it and releases the lease if it holds it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return deliverRun(cmd.Context(), o) },
	}
	o.Target.Register(cmd.Flags())
	cmd.Flags().StringVar(&o.Name, "name", "delivery", "the daemon's actor name")
	cmd.Flags().DurationVar(&o.Lifetime, "credential-lifetime", authority.DaemonLifetime, "lifetime of the daemon's credential, renewed at two thirds of it")
	return cmd
}

func deliverRun(ctx context.Context, o *Options) error {
	if err := agentflags.ValidName("--name", o.Name); err != nil {
		return err
	}
	if o.Lifetime < ledger.MinHeldLifetime {
		return &exit.UsageError{Err: fmt.Errorf("--credential-lifetime %s: must be at least %s", o.Lifetime, ledger.MinHeldLifetime)}
	}
	_, _, sp, err := o.Mesh("an open mesh has no delivery daemon: durable delivery needs authentication")
	if err != nil {
		return err
	}
	l, err := o.Ledger(ctx, sp)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(o.IO.ErrOut, nil))
	daemon, err := mesh.NewDelivery(ctx, l, o.Name, o.Lifetime, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := daemon.Release(); err != nil {
			fmt.Fprintf(o.IO.ErrOut, "revoke the daemon's credentials: %v\n", err)
		}
	}()
	fmt.Fprintf(o.IO.ErrOut, "delivery daemon %s for space %s: standby until it holds the lease (Ctrl-C stops)\n", wire.DevOwner+"."+o.Name, sp)
	return daemon.Run(ctx)
}
