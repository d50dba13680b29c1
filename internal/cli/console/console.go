// Package console implements `cotal console --plain`: every channel message and presence change,
// one line each.
package console

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/authority"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/cli/target"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/wire"
)

// Options are the inputs of `cotal console`.
type Options struct {
	IO *iostreams.IOStreams
	target.Flags
	Plain bool
}

// NewCmdConsole returns the `cotal console` command.
func NewCmdConsole(io *iostreams.IOStreams) *cobra.Command {
	o := &Options{IO: io}
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Watch every channel message and presence change as an observer",
		Long: "Watch the space as an observer: every channel message and every presence change, one line\n" +
			"each, until Ctrl-C. Direct messages and tasks stay private. Message text is shown as data\n" +
			"from a peer, with control characters escaped.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return consoleRun(cmd.Context(), o) },
	}
	o.Register(cmd.Flags())
	cmd.Flags().BoolVar(&o.Plain, "plain", true, "plain lines (the only mode so far)")
	return cmd
}

func consoleRun(ctx context.Context, o *Options) error {
	d, st, sp, err := o.Resolve("")
	if err != nil {
		return err
	}
	out := o.IO.Out
	c, err := mesh.Client(ctx, d, st, sp, authority.ProfileObserver, "cotal_console", cotal.WithPresence(false),
		cotal.WithHandler(func(_ context.Context, dl *cotal.Delivery) error {
			Line(out, time.Now(), dl)
			return nil
		}), cotal.WithJoin(">"))
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	roster, err := c.Roster(ctx)
	if err != nil {
		return err
	}
	defer roster.Stop()
	fmt.Fprintf(o.IO.ErrOut, "watching space %s at %s (Ctrl-C to stop)\n", sp, st.URL)
	for _, p := range roster.Peers() {
		presenceLine(out, time.Now(), p)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case p := <-roster.Changes():
			presenceLine(out, time.Now(), p)
		case err := <-c.Errors():
			fmt.Fprintf(o.IO.ErrOut, "broker: %v\n", err)
		}
	}
}

// Line writes one delivery as a line: time, where, who, and the text as escaped data.
func Line(w io.Writer, at time.Time, d *cotal.Delivery) {
	where := "#" + d.Channel
	switch d.Kind {
	case wire.DeliveryDM:
		where = "dm"
	case wire.DeliveryAnycast:
		where = "ask:" + d.Message.ToService
	}
	hist := ""
	if d.Historical {
		hist = " (history)"
	}
	fmt.Fprintf(w, "%s %s %s%s: %s\n", at.Format("15:04:05"), where, d.Message.From.Name, hist, Summary(d.Message))
}

func presenceLine(w io.Writer, at time.Time, p cotal.Peer) {
	switch {
	case p.Presence == nil:
		fmt.Fprintf(w, "%s * %s left\n", at.Format("15:04:05"), p.Key)
	default:
		status := string(p.Presence.Status)
		if !p.Online {
			status = "offline"
		}
		activity := ""
		if p.Presence.Activity != "" {
			activity = " — " + quote(p.Presence.Activity)
		}
		fmt.Fprintf(w, "%s * %s (%s) is %s%s\n", at.Format("15:04:05"), p.Presence.Card.Name, p.Key, status, activity)
	}
}

// Summary renders a message's parts as one line of peer data: text quoted and escaped, other
// parts named.
func Summary(m *wire.CotalMessage) string {
	var parts []string
	for _, p := range m.Parts {
		switch p.Kind {
		case wire.PartText:
			parts = append(parts, quote(p.Text))
		case wire.PartData:
			parts = append(parts, "[data "+quote(string(p.Data))+"]")
		case wire.PartArtifact:
			parts = append(parts, fmt.Sprintf("[artifact %s %s, %d bytes]", quote(p.Name), p.Digest, p.Size))
		default:
			parts = append(parts, "["+string(p.Kind)+"]")
		}
	}
	return strings.Join(parts, " ")
}

// maxShown bounds how much of a peer's text one line shows.
const maxShown = 2000

// quote escapes peer text so it cannot forge terminal output or further lines.
func quote(s string) string {
	if len(s) > maxShown {
		s = s[:maxShown] + "…"
	}
	q := fmt.Sprintf("%q", s)
	return q[1 : len(q)-1]
}
