// Package history implements `cotal history clear`: delete what the space's channels (and, when
// asked, its direct messages) hold.
package history

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
)

// Options are the inputs of `cotal history clear`.
type Options struct {
	*factory.Factory
	Channel string
	DMs     bool
	// Force is the reference CLI's confirmation flag, taken so its scripts run unchanged.
	Force bool
}

// NewCmdHistory returns `cotal history` with its clear subcommand.
func NewCmdHistory(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "history",
		Short: "Clear what the space's channels and direct messages hold",
	}
	o := &Options{Factory: f}
	clear := &cobra.Command{
		Use:   "clear [--channel C] [--dms]",
		Short: "Delete every channel's history, or one channel's, or also every direct message",
		Long: "Delete the stored history of every channel of the space, on a purger credential issued for\n" +
			"that purge alone (the profile that may purge the channel and direct-message streams and do\n" +
			"nothing else; the broker refuses a purge to any other). --dms also deletes every direct\n" +
			"message. --channel C deletes that channel's history alone (every sender's posts; its card\n" +
			"and members stay), as the dashboard's channel delete does. The task queue, the inboxes and\n" +
			"the delivery rail are left alone. What is deleted comes back only from a backup.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return clearRun(cmd.Context(), o) },
	}
	o.Target.Register(clear.Flags())
	clear.Flags().StringVar(&o.Channel, "channel", "", "clear this channel's history alone")
	clear.Flags().BoolVar(&o.DMs, "dms", false, "also clear every direct message")
	clear.Flags().BoolVar(&o.Force, "force", false, "accepted for the reference CLI's scripts; history clear asks no confirmation")
	cmd.AddCommand(clear)
	return cmd
}

func clearRun(ctx context.Context, o *Options) error {
	if o.Channel != "" {
		if o.DMs {
			return &exit.UsageError{Err: errors.New("--dms clears every direct message, which belong to no channel: give --channel or --dms, not both")}
		}
		if err := wire.ValidateChannel(o.Channel); err != nil {
			return &exit.UsageError{Err: fmt.Errorf("--channel: %w", err)}
		}
	}
	_, _, sp, err := o.Mesh("")
	if err != nil {
		return err
	}
	// A purger credential issued for this purge alone (none on an open mesh), as the reference's
	// CLI and the dashboard's channel delete purge.
	js, closeFn, err := o.JetStream(ctx, sp, authority.ProfilePurger, "cotal_purger")
	if err != nil {
		return err
	}
	defer closeFn()
	return purge(ctx, o, js, sp)
}

// purge purges on js's connection, a purger's: one channel, or the whole history.
func purge(ctx context.Context, o *Options, js jetstream.JetStream, sp wire.Space) error {
	if o.Channel != "" {
		n, err := space.PurgeChannel(ctx, js.Conn(), sp, o.Channel)
		if err != nil {
			return err
		}
		fmt.Fprintf(o.IO.Out, "cleared %d posts from #%s in space %s\n", n, o.Channel, sp)
		return nil
	}
	chat, dm, err := space.PurgeHistory(ctx, js.Conn(), sp, o.DMs)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.IO.Out, "cleared %d channel posts", chat)
	if o.DMs {
		fmt.Fprintf(o.IO.Out, " and %d direct messages", dm)
	}
	fmt.Fprintf(o.IO.Out, " from space %s\n", sp)
	return nil
}
