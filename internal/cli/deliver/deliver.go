// Package deliver implements `cotal deliver`: run a delivery daemon for a space of the running
// mesh, beside (as standby to) the one `cotal up` runs.
package deliver

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/cli/target"
	"github.com/gocotal/cotal/internal/delivery"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/wire"
)

// Options are the inputs of `cotal deliver`.
type Options struct {
	IO *iostreams.IOStreams
	target.Flags
	Name string
}

// NewCmdDeliver returns the `cotal deliver` command.
func NewCmdDeliver(io *iostreams.IOStreams) *cobra.Command {
	o := &Options{IO: io}
	cmd := &cobra.Command{
		Use:   "deliver",
		Short: "Run a delivery daemon: active if it gets the space's lease, standby otherwise",
		Long: "Run a delivery daemon for a space of the running mesh on its own delivery credential.\n" +
			"One daemon per space is active, holding the lease; this one waits as standby and takes\n" +
			"over when the lease lapses. Ctrl-C stops it and releases the lease if it holds it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return deliverRun(cmd.Context(), o) },
	}
	o.Register(cmd.Flags())
	cmd.Flags().StringVar(&o.Name, "name", "delivery", "the daemon's actor name")
	return cmd
}

func deliverRun(ctx context.Context, o *Options) error {
	if err := wire.ValidateActor(o.Name); err != nil {
		return &exit.UsageError{Err: fmt.Errorf("--name: %w", err)}
	}
	d, st, sp, err := o.Resolve("an open mesh has no delivery daemon: durable delivery needs authentication")
	if err != nil {
		return err
	}
	a, err := mesh.OpenAuthority(d)
	if err != nil {
		return err
	}
	cred, err := a.Issue(ctx, st.URL, mesh.MintRequest{Space: sp, Profile: authority.ProfileDelivery, Name: o.Name})
	if err != nil {
		return err
	}
	nc, err := mesh.Connect(ctx, st.URL, cred)
	if err != nil {
		return err
	}
	defer nc.Close()
	log := slog.New(slog.NewTextHandler(o.IO.ErrOut, nil))
	daemon, err := delivery.New(nc, delivery.Config{Space: sp, Holder: cred.Principal.String(), Log: log})
	if err != nil {
		return err
	}
	fmt.Fprintf(o.IO.ErrOut, "delivery daemon %s for space %s: standby until it holds the lease (Ctrl-C stops)\n", cred.Principal, sp)
	return daemon.Run(ctx)
}
