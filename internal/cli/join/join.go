// Package join implements `cotal join LINK`: join a mesh from a cotal:// link as the agent it
// carries, and talk in the line console.
package join

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/cli/console"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/termsafe"
	"github.com/gocotal/cotal/wire"
)

// EnvLink names the environment variable `cotal join` reads its link from when none is given,
// so the link stays out of the process list.
const EnvLink = "COTAL_LINK"

// Options are the inputs of `cotal join`.
type Options struct {
	*factory.Factory
	Link  string
	Plain bool
}

// NewCmdJoin returns the `cotal join` command.
func NewCmdJoin(f *factory.Factory) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "join [LINK]",
		Short: "Join a mesh from a cotal:// link and talk in the line console",
		Long: "Connect as the agent a link carries (`cotal mint NAME --link` makes one; without LINK, $" + EnvLink + "),\n" +
			"present in the roster, joined to the link's channels, and print every message and presence\n" +
			"change, one line each. A line typed posts to the current channel (the link's first);\n" +
			"/dm NAME TEXT sends a direct message, /join CHANNEL joins and makes it current, /leave\n" +
			"CHANNEL leaves, /quit (or end of input) leaves the mesh. A link is a bearer secret: pass it\n" +
			"in $" + EnvLink + " rather than on the command line where other users of this machine can see it.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.Link = args[0]
			}
			return run(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.Plain, "plain", false, "plain lines only: no greeting, no help")
	return cmd
}

func run(ctx context.Context, o *Options) error {
	if o.Link == "" {
		o.Link = os.Getenv(EnvLink)
	}
	if o.Link == "" {
		return &exit.UsageError{Err: fmt.Errorf("give a cotal:// link, or set $%s", EnvLink)}
	}
	t, err := cotal.ParseURL(o.Link)
	if err != nil {
		return &exit.UsageError{Err: fmt.Errorf("the link: %w", err)}
	}
	if t.Space == "" {
		return &exit.UsageError{Err: errors.New("the link: want a cotal:// or cotals:// link, not a server URL")}
	}
	out := o.IO.Out
	c, err := cotal.Connect(ctx, o.Link, cotal.WithHandler(func(_ context.Context, dl *cotal.Delivery) error {
		console.Line(out, o.Now(), dl)
		return nil
	}))
	if errors.Is(err, cotal.ErrInvalidOption) {
		return &exit.UsageError{Err: err}
	}
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	roster, err := c.Roster(ctx)
	if err != nil {
		return err
	}
	defer roster.Stop()
	current := ""
	if len(t.Channels) > 0 {
		current = t.Channels[0]
	}
	if !o.Plain {
		fmt.Fprintf(o.IO.ErrOut, "joined space %s as %s; posting to #%s (/dm NAME TEXT, /join CHANNEL, /quit)\n", c.Space(), c.Principal(), current)
	}
	said := map[string]string{}
	for _, p := range roster.Peers() {
		console.PresenceLine(out, o.Now(), p, said)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(o.IO.In)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case p := <-roster.Changes():
			console.PresenceLine(out, o.Now(), p, said)
		case err := <-c.Errors():
			fmt.Fprintf(o.IO.ErrOut, "broker: %s\n", termsafe.Sanitize(err.Error()))
		case line, ok := <-lines:
			if !ok {
				return nil
			}
			quit, err := act(ctx, c, &current, line)
			if err != nil {
				fmt.Fprintf(o.IO.ErrOut, "%v\n", err)
			}
			if quit {
				return nil
			}
		}
	}
}

// act carries out one typed line: a command, or text to post to the current channel.
func act(ctx context.Context, c *cotal.Client, current *string, line string) (quit bool, err error) {
	line = strings.TrimSpace(line)
	cmd, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	switch {
	case line == "":
		return false, nil
	case cmd == "/quit":
		return true, nil
	case cmd == "/dm":
		name, text, _ := strings.Cut(rest, " ")
		if name == "" || strings.TrimSpace(text) == "" {
			return false, errors.New("usage: /dm NAME TEXT")
		}
		to, err := principal(c, name)
		if err != nil {
			return false, err
		}
		_, err = c.DirectMessage(ctx, to, []wire.Part{wire.TextPart(strings.TrimSpace(text))})
		return false, err
	case cmd == "/join":
		if _, err := c.Join(ctx, rest); err != nil {
			return false, err
		}
		*current = rest
		return false, nil
	case cmd == "/leave":
		if err := c.Leave(ctx, rest); err != nil {
			return false, err
		}
		if *current == rest {
			*current = ""
		}
		return false, nil
	case strings.HasPrefix(cmd, "/"):
		return false, fmt.Errorf("unknown command %s: /dm NAME TEXT, /join CHANNEL, /leave CHANNEL, /quit", cmd)
	case *current == "":
		return false, errors.New("no current channel: /join CHANNEL first")
	}
	_, err = c.Post(ctx, *current, []wire.Part{wire.TextPart(line)})
	return false, err
}

// principal reads NAME as a principal (owner.actor), or as an actor of the joiner's own owner.
func principal(c *cotal.Client, name string) (wire.Principal, error) {
	if strings.Contains(name, ".") {
		return wire.ParsePrincipal(name)
	}
	return wire.NewPrincipal(c.Principal().Owner(), name)
}
