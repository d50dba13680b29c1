// Package spawn implements `cotal spawn`, `cotal stop` and `cotal supervise`: starting and
// stopping agent processes under the running mesh's supervisor, and running one.
package spawn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/agentflags"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/mesh"
)

// Options are the inputs of `cotal spawn`.
type Options struct {
	*factory.Factory
	agentflags.Flags
	AllowSubscribe []string
	Agent          string
	Detach         bool
	JSON           bool
}

// NewCmdSpawn returns the `cotal spawn` command.
func NewCmdSpawn(f *factory.Factory) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "spawn --name NAME [flags] [--agent claude|codex|opencode] -- [COMMAND] [ARGS...]",
		Short: "Start an agent process under the mesh's supervisor",
		Long: "Start COMMAND as agent local.NAME: the supervisor of the running mesh issues and\n" +
			"provisions its credential, writes its launch material (creds and an MCP configuration\n" +
			"for `cotal mcp`) to a private file whose path is in $COTAL_LAUNCH_MATERIAL, restarts it if\n" +
			"it crashes (three times a minute at most), and retires its lifecycle when it is done.\n" +
			"Without --detach, spawn waits for the agent and stops it on Ctrl-C.",
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) > 0 && cmd.ArgsLenAtDash() != 0:
				return &exit.UsageError{Err: fmt.Errorf("put the command after --: cotal spawn --name N -- %s", args[0])}
			case len(args) == 0 && o.Agent == "":
				return &exit.UsageError{Err: errors.New("name a command after --, or a harness with --agent")}
			}
			return spawnRun(cmd.Context(), o, args)
		},
	}
	fs := cmd.Flags()
	o.Target.Register(fs)
	o.Flags.Register(fs, "the agent's name (required)")
	fs.StringSliceVar(&o.AllowSubscribe, "allow-subscribe", nil, "channels or patterns the agent may read (default: --subscribe)")
	fs.StringVar(&o.Agent, "agent", "", fmt.Sprintf("start a harness with the cotal MCP server configured, one of %q; ARGS after -- are passed to it", manager.Harnesses))
	fs.BoolVar(&o.Detach, "detach", false, "return once the agent runs")
	fs.BoolVar(&o.JSON, "json", false, "print the agent's status as JSON")
	return cmd
}

func spawnRun(ctx context.Context, o *Options, command []string) error {
	if err := agentflags.ValidName("--name", o.Name); err != nil {
		return err
	}
	d, _, sp, err := o.Mesh("")
	if err != nil {
		return err
	}
	sock := d.SupervisorSocket(sp)
	spec := manager.Spec{Name: o.Name, Role: o.Role, Subscribe: o.Subscribe, AllowSubscribe: o.AllowSubscribe, AllowPublish: o.AllowPublish,
		Command: command, Agent: manager.Harness(o.Agent)}
	resp, err := manager.Call(ctx, sock, manager.Request{Op: "spawn", Spec: &spec})
	if err != nil {
		return err
	}
	if !o.Detach {
		resp, err = manager.Call(ctx, sock, manager.Request{Op: "wait", Name: o.Name})
		if ctx.Err() != nil { // Ctrl-C: stop the agent rather than leave it behind
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			resp, err = manager.Call(sctx, sock, manager.Request{Op: "stop", Name: o.Name})
		}
		if err != nil {
			return err
		}
	}
	return printStatus(o.IO, o.JSON, resp.Status)
}

func printStatus(io *iostreams.IOStreams, asJSON bool, st *manager.Status) error {
	if asJSON {
		return json.NewEncoder(io.Out).Encode(st)
	}
	fmt.Fprintf(io.Out, "%s (%s): %s", st.Name, st.Principal, st.State)
	if st.PID != 0 {
		fmt.Fprintf(io.Out, ", pid %d", st.PID)
	}
	if st.State != manager.StateRunning {
		fmt.Fprintf(io.Out, ", exit %d after %d restarts", st.ExitCode, st.Restarts)
	}
	fmt.Fprintln(io.Out)
	return nil
}

// NewCmdStop returns the `cotal stop` command.
func NewCmdStop(f *factory.Factory) *cobra.Command {
	var name string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stop --name NAME",
		Short: "Stop a spawned agent: SIGTERM, then SIGKILL after a grace period; its lifecycle is retired",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := agentflags.ValidName("--name", name); err != nil {
				return err
			}
			d, _, sp, err := f.Mesh("")
			if err != nil {
				return err
			}
			resp, err := manager.Call(cmd.Context(), d.SupervisorSocket(sp), manager.Request{Op: "stop", Name: name})
			if err != nil {
				return err
			}
			return printStatus(f.IO, asJSON, resp.Status)
		},
	}
	f.Target.Register(cmd.Flags())
	cmd.Flags().StringVar(&name, "name", "", "the agent to stop (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the agent's final status as JSON")
	return cmd
}

// NewCmdSupervise returns the `cotal supervise` command.
func NewCmdSupervise(f *factory.Factory) *cobra.Command {
	var life time.Duration
	cmd := &cobra.Command{
		Use:   "supervise",
		Short: "Run the supervisor beside a mesh started with `cotal up --no-manager`, until Ctrl-C",
		Long: "Run the supervisor for one space of the running mesh: it holds the manager lease, answers\n" +
			"the manager liveness plane and serves `cotal spawn`, `stop` and `ps`. On Ctrl-C it stops and\n" +
			"retires the agents it spawned.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if life < ledger.MinHeldLifetime {
				return &exit.UsageError{Err: fmt.Errorf("--credential-lifetime %s: must be at least %s", life, ledger.MinHeldLifetime)}
			}
			d, st, sp, err := f.Mesh("the supervisor needs an authenticated mesh: it issues each agent its own credential")
			if err != nil {
				return err
			}
			l, err := f.Ledger(cmd.Context(), sp)
			if err != nil {
				return err
			}
			fmt.Fprintf(f.IO.ErrOut, "supervising space %s of %s; Ctrl-C stops\n", sp, st.URL)
			return mesh.Supervise(cmd.Context(), d, l, life, slog.New(slog.NewTextHandler(f.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelWarn})))
		},
	}
	cmd.Flags().StringVar(&f.Target.Dir, "dir", "", "the mesh directory (default: the nearest .cotal)")
	cmd.Flags().StringVar(&f.Target.Space, "space", "", "the space agents are spawned into (default: the mesh's first)")
	cmd.Flags().DurationVar(&life, "credential-lifetime", authority.DaemonLifetime, "lifetime of the supervisor's credential, renewed at two thirds of it")
	return cmd
}
