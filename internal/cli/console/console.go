// Package console implements `cotal console --plain`: every channel message and presence change,
// one line each.
package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/termsafe"
	"github.com/gocotal/cotal/internal/who"
	"github.com/gocotal/cotal/wire"
)

// Options are the inputs of `cotal console`.
type Options struct {
	*factory.Factory
	// Plain asks for the line stream even on a terminal.
	Plain bool
	// Creds is a creds file the console connects as instead of its read-only observer: the
	// interactive console's :msg, :dm and :ask then send as it, within its grant.
	Creds string
}

// NewCmdConsole returns the `cotal console` command.
func NewCmdConsole(f *factory.Factory) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Watch the space: every message, who is present, who needs you",
		Long: "Watch the space as an observer. On a terminal: tabs for every message, each channel and the\n" +
			"direct messages (1-9, tab, [ and ] switch), the roster with status glyphs (● working,\n" +
			"◐ waiting, ○ idle, ⊘ offline), a NEEDS YOU column of the agents waiting on a person, and a\n" +
			"command line, opened with ':' — :msg #CHANNEL TEXT, :dm NAME TEXT, :ask ROLE TEXT (with\n" +
			"--creds, as that credential), :spawn NAME -- COMMAND, :stop NAME, :attach NAME, :status, :q.\n" +
			"A command the console may not run is refused with its reason.\n\n" +
			"In a pipe, or with --plain: every channel message and every presence change, one line each,\n" +
			"until Ctrl-C. Each sender shows as its display name, stripped of control and bidi characters,\n" +
			"then the principal its subject proves, as in `alice (local.alice)`; message text is shown as\n" +
			"data from a peer, with control characters and newlines escaped. Direct messages and tasks\n" +
			"stay private to the observer.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !o.Plain && isTerminal(o.IO.Out) {
				return tuiRun(cmd.Context(), o)
			}
			if o.Creds != "" {
				return &exit.UsageError{Err: errors.New("--creds serves the interactive console's commands: the line stream reads as the observer")}
			}
			return consoleRun(cmd.Context(), o)
		},
	}
	o.Target.Register(cmd.Flags())
	cmd.Flags().BoolVar(&o.Plain, "plain", false, "print plain lines even on a terminal")
	cmd.Flags().StringVar(&o.Creds, "creds", "", "connect as this creds file (an agent's): :msg, :dm and :ask then send as it")
	return cmd
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func consoleRun(ctx context.Context, o *Options) error {
	_, st, sp, err := o.Mesh("")
	if err != nil {
		return err
	}
	out := o.IO.Out
	c, err := o.WatchClient(ctx, sp, authority.ProfileObserver, "cotal_console", cotal.WithPresence(false),
		cotal.WithHandler(func(_ context.Context, dl *cotal.Delivery) error {
			Line(out, o.Now(), dl)
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
	said := map[string]string{} // per peer, the presence last printed
	for _, p := range roster.Peers() {
		PresenceLine(out, o.Now(), p, said)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case p := <-roster.Changes():
			PresenceLine(out, o.Now(), p, said)
		case err := <-c.Errors():
			// An error can quote what a peer wrote (a presence row it dropped, say).
			fmt.Fprintf(o.IO.ErrOut, "broker: %s\n", termsafe.Sanitize(err.Error()))
		}
	}
}

// Line writes one delivery as a line: time, where, who, and the text as escaped data. Who is the
// sender as who.Is renders it, its principal taken from the subject, never from the body.
func Line(w io.Writer, at time.Time, d *cotal.Delivery) {
	where := "#" + who.Word(d.Channel)
	switch d.Kind {
	case wire.DeliveryDM:
		where = "dm"
	case wire.DeliveryAnycast:
		where = "ask:" + who.Word(d.Message.ToService)
	}
	hist := ""
	if d.Historical {
		hist = " (history)"
	}
	fmt.Fprintf(w, "%s %s %s%s: %s\n", at.Format("15:04:05"), where, who.Is(d.Message.From.Name, d.Sender.String()), hist, Summary(d.Message))
}

// PresenceLine writes a peer's presence as a line when it changed since said (per peer, what was
// last printed): a heartbeat that rewrites the same presence prints nothing. The principal is the
// row's key, which DecodePresence has checked equals card.id.
func PresenceLine(w io.Writer, at time.Time, p cotal.Peer, said map[string]string) {
	var line string
	switch {
	case p.Presence == nil:
		line = who.Word(p.Key) + " left"
	default:
		status := string(p.Presence.Status)
		if !p.Online {
			status = "offline"
		}
		activity := ""
		if p.Presence.Activity != "" {
			activity = " — " + quote(p.Presence.Activity)
		}
		line = who.Is(p.Presence.Card.Name, p.Key) + " is " + status + activity
	}
	if said[p.Key] == line {
		return
	}
	said[p.Key] = line
	fmt.Fprintf(w, "%s * %s\n", at.Format("15:04:05"), line)
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

// quote escapes peer text so it cannot forge terminal output or further lines: control, format
// and bidi characters and newlines show as Go escapes (\x1b, \u202e, \n). Text over maxShown
// bytes is cut on a rune boundary.
func quote(s string) string {
	q := strconv.Quote(termsafe.Cut(s, maxShown))
	return q[1 : len(q)-1]
}
