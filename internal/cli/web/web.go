// Package web implements `cotal web`: the space's dashboard on loopback, in a browser.
package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	detachpkg "github.com/gocotal/cotal/internal/cli/detach"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/cli/send"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/runhost"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/internal/web"
	"github.com/gocotal/cotal/wire"
)

// DefaultPort is where the dashboard listens unless --port says otherwise, as the reference's.
const DefaultPort = 7799

// Options are the inputs of `cotal web`.
type Options struct {
	*factory.Factory
	Port     int
	Operator string
	Detach   bool
	// setFlags are the flags given, passed on to the detached dashboard.
	setFlags []string
}

// envDetached marks the dashboard a `cotal web --detach` started: it records its token URL for
// the parent to print.
const envDetached = "COTAL_WEB_DETACHED"

// NewCmdWeb returns the `cotal web` command.
func NewCmdWeb(f *factory.Factory) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "web",
		Short: "Watch and steer the space in a browser: roster, channels, every message, who needs you",
		Long: "Serve the space's dashboard on 127.0.0.1 until Ctrl-C, and print the URL to open as the\n" +
			"first line on stdout. The URL carries a single-use token that the browser trades for a\n" +
			"session cookie: copy it into one browser only. The dashboard reads the space with a\n" +
			"read-only admin credential (channels, direct messages and anycasts, never the endpoint\n" +
			"rails); its one write, deleting a channel's history, goes through a purger credential\n" +
			"issued for that delete alone. Message bodies are shown as sanitised Markdown.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Detach {
				o.setFlags = detachpkg.Given(cmd.Flags())
				return detach(cmd.Context(), o)
			}
			return webRun(cmd.Context(), o)
		},
	}
	o.Target.Register(cmd.Flags())
	cmd.Flags().BoolVar(&o.Detach, "detach", false, "run in the background, logging to .cotal/web.log; `cotal down web` stops it")
	cmd.Flags().IntVar(&o.Port, "port", DefaultPort, "the loopback port to listen on (0: any free one)")
	cmd.Flags().StringVar(&o.Operator, "operator", send.DefaultActor, "the actor `cotal send --as` speaks as: agents' direct messages to local.ACTOR wait in NEEDS YOU until it answers")
	return cmd
}

func webRun(ctx context.Context, o *Options) error {
	if o.Port < 0 || o.Port > 65535 {
		return &exit.UsageError{Err: fmt.Errorf("--port %d is outside 0-65535", o.Port)}
	}
	operator, err := wire.NewPrincipal(wire.DevOwner, o.Operator)
	if err != nil {
		return &exit.UsageError{Err: fmt.Errorf("--operator %q: %w", o.Operator, err)}
	}
	d, st, sp, err := o.Mesh("")
	if err != nil {
		return err
	}
	if d.Path != "" {
		if ws, err := d.ReadWebState(); err == nil {
			return fmt.Errorf("the dashboard of this mesh already runs at %s (pid %d): `cotal down web` stops it", ws.URL, ws.PID)
		}
	}
	c, err := o.WatchClient(ctx, sp, authority.ProfileAdmin, "cotal_web", cotal.WithPresence(false))
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	var purge web.Purge
	var agents func(context.Context) ([]manager.Row, error)
	var runs web.Runs
	if !st.Open {
		// The managers' rows, for the spawns they gave up on: one control instrument for the
		// dashboard's life, used for ps alone, rather than one issued through the ledger every few
		// seconds. Without it the dashboard runs, less that lane.
		if ctl, err := o.WatchControl(ctx); err != nil {
			fmt.Fprintf(o.IO.ErrOut, "cotal web: escalated spawns are not shown: %v\n", err)
		} else {
			defer ctl.Close()
			runs = managerRuns{ctl.Manager}
			agents = func(ctx context.Context) ([]manager.Row, error) {
				g, err := ctl.Manager.Ps(ctx, ctl.Records)
				if e, ok := errors.AsType[*wire.EndpointError](err); ok && e.Code == wire.CodeFailedPrecondition {
					return nil, nil // no manager is registered: none to give up on
				}
				if err != nil {
					return nil, err
				}
				rows, err := manager.Rows(g)
				if len(rows) > 0 {
					return rows, nil // the managers that answered; one that did not keeps its silence
				}
				return rows, err
			}
		}
		purge = func(ctx context.Context, channel string) (uint64, error) {
			js, closeFn, err := o.JetStream(ctx, sp, authority.ProfilePurger, "cotal_web_purger")
			if err != nil {
				return 0, err
			}
			defer closeFn()
			return space.PurgeChannel(ctx, js.Conn(), sp, channel)
		}
	}
	srv, err := web.Start(ctx, web.Config{Client: c, Purge: purge, Operator: operator, Agents: agents, Runs: runs,
		Log: slog.New(slog.NewTextHandler(o.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelWarn})), Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(o.Port))})
	if err != nil {
		return err
	}
	detached := os.Getenv(envDetached) == "1"
	if detached {
		// The launch URL goes to the detaching command through the record, never to the log.
		fmt.Fprintf(o.IO.ErrOut, "serving the dashboard of space %s at %s\n", sp, baseURL(srv.URL))
	} else {
		fmt.Fprintln(o.IO.Out, srv.URL)
		fmt.Fprintf(o.IO.ErrOut, "serving the dashboard of space %s until Ctrl-C; open the URL above in one browser\n", sp)
	}
	if d.Path != "" {
		ws := mesh.WebState{URL: baseURL(srv.URL), Space: sp}
		if detached {
			ws.Open = srv.URL
		}
		if err := d.WriteWebState(ws); err != nil {
			fmt.Fprintf(o.IO.ErrOut, "cotal web: `cotal status --components` and `cotal down web` will not find this dashboard: %v\n", err)
		}
		defer d.ClearWebState(os.Getpid())
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return srv.Close(sctx)
}

// baseURL is u without its query: the dashboard's address without the launch token.
func baseURL(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		return u[:i]
	}
	return u
}

// managerRuns shows the runs the space's manager hosts, through the operator's instrument.
type managerRuns struct{ m *manager.Client }

func (r managerRuns) List(ctx context.Context) ([]runhost.Row, error) {
	var rows []runhost.Row
	return rows, r.m.RunPs(ctx, &rows)
}

func (r managerRuns) View(ctx context.Context, runID string) (*runhost.View, error) {
	var v runhost.View
	if err := r.m.RunStatus(ctx, runID, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

func (r managerRuns) Answer(ctx context.Context, runID, step string, value json.RawMessage) error {
	_, err := r.m.RunAnswer(ctx, runID, step, value)
	return err
}
