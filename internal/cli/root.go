// Package cli is the cobra command tree of the cotal binary. cmd/cotal only calls Main.
package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/cli/actor"
	"github.com/gocotal/cotal/internal/cli/agent"
	"github.com/gocotal/cotal/internal/cli/agentbearer"
	"github.com/gocotal/cotal/internal/cli/anchors"
	"github.com/gocotal/cotal/internal/cli/attach"
	"github.com/gocotal/cotal/internal/cli/backup"
	"github.com/gocotal/cotal/internal/cli/bench"
	"github.com/gocotal/cotal/internal/cli/channels"
	"github.com/gocotal/cotal/internal/cli/cluster"
	"github.com/gocotal/cotal/internal/cli/console"
	"github.com/gocotal/cotal/internal/cli/creds"
	"github.com/gocotal/cotal/internal/cli/deliver"
	"github.com/gocotal/cotal/internal/cli/demo"
	"github.com/gocotal/cotal/internal/cli/doctor"
	"github.com/gocotal/cotal/internal/cli/down"
	"github.com/gocotal/cotal/internal/cli/endpoints"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/cli/history"
	"github.com/gocotal/cotal/internal/cli/hook"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/cli/join"
	"github.com/gocotal/cotal/internal/cli/login"
	"github.com/gocotal/cotal/internal/cli/mcp"
	"github.com/gocotal/cotal/internal/cli/meshes"
	"github.com/gocotal/cotal/internal/cli/mint"
	"github.com/gocotal/cotal/internal/cli/models"
	"github.com/gocotal/cotal/internal/cli/personas"
	"github.com/gocotal/cotal/internal/cli/ps"
	runcmd "github.com/gocotal/cotal/internal/cli/run"
	"github.com/gocotal/cotal/internal/cli/send"
	"github.com/gocotal/cotal/internal/cli/service"
	"github.com/gocotal/cotal/internal/cli/spawn"
	"github.com/gocotal/cotal/internal/cli/status"
	"github.com/gocotal/cotal/internal/cli/topology"
	"github.com/gocotal/cotal/internal/cli/up"
	"github.com/gocotal/cotal/internal/cli/version"
	"github.com/gocotal/cotal/internal/cli/web"
)

// NewCmdRoot returns the root command with every subcommand attached.
func NewCmdRoot(f *factory.Factory) *cobra.Command {
	io := f.IO
	root := &cobra.Command{
		Use:   "cotal",
		Short: "Cotal: AI agents coordinating as peers over NATS",
		Long: "cotal runs and joins Cotal meshes: a shared space where agents see who is present,\n" +
			"post to channels, message one peer durably and hand work to any member of a role,\n" +
			"under least-privilege credentials that the NATS broker enforces.",
		SilenceUsage:  true,
		SilenceErrors: true,
		// A runnable root with NoArgs turns "cotal bogus" into a usage error rather than cobra's
		// default of printing help and exiting 0.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetIn(io.In)
	root.SetOut(io.Out)
	root.SetErr(io.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exit.UsageError{Err: err}
	})
	root.AddCommand(
		up.NewCmdUp(f, nil),
		down.NewCmdDown(f, nil),
		cluster.NewCmdCluster(f),
		status.NewCmdStatus(f, nil),
		meshes.NewCmdMeshes(f),
		meshes.NewCmdUse(f),
		mint.NewCmdMint(f, nil),
		send.NewCmdSend(f, nil),
		channels.NewCmdChannels(f),
		history.NewCmdHistory(f),
		backup.NewCmdBackup(f),
		ps.NewCmdPs(f),
		anchors.NewCmdAnchors(f),
		service.NewCmdService(f),
		console.NewCmdConsole(f),
		join.NewCmdJoin(f),
		web.NewCmdWeb(f),
		hook.NewCmdHook(f),
		agent.NewCmdAgent(f),
		agentbearer.NewCmdAgentBearer(f),
		mcp.NewCmdMCP(f),
		spawn.NewCmdSpawn(f),
		spawn.NewCmdStop(f),
		spawn.NewCmdSupervise(f),
		models.NewCmdModels(f),
		login.NewCmdLogin(f),
		login.NewCmdLogout(f),
		actor.NewCmdActor(f),
		attach.NewCmdAttach(f),
		attach.NewCmdInput(f),
		endpoints.NewCmdEndpoints(f),
		endpoints.NewCmdDescribe(f),
		endpoints.NewCmdInvoke(f),
		demo.NewCmdDemo(f),
		deliver.NewCmdDeliver(f),
		creds.NewCmdCreds(f),
		personas.NewCmdPersonas(f),
		topology.NewCmdTopology(f),
		runcmd.NewCmdRun(f),
		doctor.NewCmdDoctor(f),
		bench.NewCmdBench(f),
		version.NewCmdVersion(f, nil),
	)
	for _, c := range append(root.Commands(), root) {
		c.Args = usageArgs(c.Args)
	}
	return root
}

// usageArgs marks an argument-count error as a usage error, so it exits with exit.Usage.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	if check == nil {
		return nil
	}
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return &exit.UsageError{Err: err}
		}
		return nil
	}
}

// Main runs the command line args (without the program name) and returns the exit code. Errors
// are printed to io.ErrOut.
func Main(ctx context.Context, io *iostreams.IOStreams, args []string) int {
	f := factory.New(io)
	defer f.Close()
	root := NewCmdRoot(f)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil {
		fmt.Fprintf(io.ErrOut, "cotal: %v\n", err)
		if exit.Code(err) == exit.Usage {
			fmt.Fprintf(io.ErrOut, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
	}
	return exit.Code(err)
}
