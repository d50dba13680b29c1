// Package mcp implements `cotal mcp`: a stdio MCP server that makes an LLM coding agent a member
// of the mesh, with the tools of package mcptools.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/agentlock"
	"github.com/gocotal/cotal/internal/cli/agentflags"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/cli/join"
	"github.com/gocotal/cotal/internal/cli/version"
	"github.com/gocotal/cotal/internal/hooksock"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/mcptools"
	"github.com/gocotal/cotal/internal/mesh"
)

// Options are the inputs of `cotal mcp`.
type Options struct {
	*factory.Factory
	agentflags.Flags
	Creds          string
	LaunchMaterial string
	// Link is a cotal:// link carrying the agent's credential (--link).
	Link          string
	InboxLimit    int
	ClaudeChannel bool
}

// NewCmdMCP returns the `cotal mcp` command.
func NewCmdMCP(f *factory.Factory) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the mesh to an LLM agent as MCP tools over stdio",
		Long: "Run a stdio MCP server for an agent local.NAME: cotal_orientation, cotal_roster,\n" +
			"cotal_inbox, cotal_send, cotal_dm, cotal_anycast, cotal_join, cotal_spawn,\n" +
			"cotal_despawn and the rest (spawning needs --capability spawn).\n\n" +
			"With --name it runs local.NAME on the running mesh: it resumes the agent's lifecycle, so\n" +
			"the agent receives every DM sent to it while no process ran it (--fresh starts a new\n" +
			"one), issues its own credential and revokes it when the client goes away. One process\n" +
			"runs a name at a time: a second is refused, naming the first, unless --takeover, which\n" +
			"makes the first let go; every tool of the first then answers that it was taken over.\n" +
			"With --creds it runs on that credential.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return mcpRun(cmd.Context(), o) },
	}
	fs := cmd.Flags()
	o.Target.Register(fs)
	o.Flags.Register(fs, "the agent's name (required without --creds)")
	o.Flags.RegisterCapability(fs)
	o.Flags.RegisterRun(fs)
	fs.StringVar(&o.Creds, "creds", "", "run on this creds file instead of issuing one")
	fs.StringVar(&o.Link, "link", "", "run as the agent a cotal:// link carries (`cotal mint NAME --link`), on the mesh it names (default: $"+join.EnvLink+" when no other identity is given)")
	fs.StringVar(&o.LaunchMaterial, "launch-material", "", "run as the agent this launch material names (a manager's spawned agent; default $"+manager.LaunchMaterialEnv+" when --name and --creds are not given)")
	fs.IntVar(&o.InboxLimit, "inbox-limit", 500, "messages buffered between tool calls")
	fs.BoolVar(&o.ClaudeChannel, "claude-channel", os.Getenv(manager.ClaudeChannelEnv) == "1", "wake a Claude Code session through its channel when a message should (default: $"+manager.ClaudeChannelEnv+" is 1)")
	return cmd
}

func mcpRun(ctx context.Context, o *Options) error {
	if o.InboxLimit < 1 {
		return &exit.UsageError{Err: fmt.Errorf("--inbox-limit %d: must be at least 1", o.InboxLimit)}
	}
	if o.LaunchMaterial == "" && o.Creds == "" && o.Name == "" && o.Link == "" {
		o.LaunchMaterial = os.Getenv(manager.LaunchMaterialEnv)
		if o.LaunchMaterial == "" {
			// A link given in the environment stays out of the process list.
			o.Link = os.Getenv(join.EnvLink)
		}
	}
	switch {
	case o.Link != "" && (o.LaunchMaterial != "" || o.Creds != "" || o.Name != "" || o.Role != "" || len(o.AllowPublish) > 0 || len(o.Capabilities) > 0 || o.Fresh || o.Takeover):
		return &exit.UsageError{Err: errors.New("--link carries the agent's identity, access and mesh: drop --launch-material, --creds, --name, --role, --allow-publish, --capability, --fresh and --takeover")}
	case o.Link != "":
		if _, err := cotal.ParseURL(o.Link); err != nil {
			return &exit.UsageError{Err: fmt.Errorf("--link: %w", err)}
		}
	case (o.LaunchMaterial != "" || o.Creds != "") && (o.Fresh || o.Takeover):
		return &exit.UsageError{Err: errors.New("--fresh and --takeover are for an agent run by --name")}
	case o.LaunchMaterial != "" && (o.Creds != "" || o.Name != "" || o.Role != "" || len(o.AllowPublish) > 0 || len(o.Capabilities) > 0):
		return &exit.UsageError{Err: errors.New("--launch-material carries the agent's identity and access: drop --creds, --name, --role, --allow-publish and --capability")}
	case o.LaunchMaterial != "":
	case o.Creds == "":
		if err := agentflags.ValidName("--name", o.Name); err != nil {
			return err
		}
		if err := agentflags.ValidCapabilities("--capability", o.Capabilities); err != nil {
			return err
		}
	case o.Name != "" || o.Role != "" || len(o.AllowPublish) > 0 || len(o.Capabilities) > 0:
		return &exit.UsageError{Err: errors.New("--creds carries its own name, role and access: drop --name, --role, --allow-publish and --capability")}
	}
	inbox := mcptools.NewInbox(o.InboxLimit)
	opts := []cotal.Option{cotal.WithHandler(inbox.Offer), cotal.WithJoin(o.Subscribe...)}
	var (
		url   string
		agent *factory.RunningAgent
	)
	if o.Link != "" {
		url = o.Link
	} else if o.LaunchMaterial != "" {
		m, err := manager.ReadMaterial(o.LaunchMaterial)
		if err != nil {
			return err
		}
		more, err := factory.MaterialOptions(m)
		if err != nil {
			return err
		}
		url, opts = m.URL, append(opts, more...)
	} else {
		_, st, err := mesh.Running(o.Target.Dir)
		if err != nil {
			return err
		}
		url = st.URL
		if o.Creds != "" {
			opts = append(opts, cotal.WithCreds(o.Creds))
		} else {
			if agent, err = o.RunAgent(ctx, o.Request(), "cotal mcp", o.Fresh, o.Takeover); err != nil {
				return err
			}
			defer agent.Stop()
			opts = append(opts, cotal.WithCredsData(agent.Cred.Creds))
		}
	}
	c, err := cotal.Connect(ctx, url, opts...)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = c.Close(cctx) // the server is done; a failed offline write only ages out
	}()
	roster, err := c.Roster(ctx)
	if err != nil {
		return err
	}
	defer roster.Stop()
	var topts []mcptools.Option
	if o.ClaudeChannel {
		topts = append(topts, mcptools.WithClaudeChannel())
	}
	tools := mcptools.New(c, inbox, roster, version.Read(debug.ReadBuildInfo).Version, topts...)
	if agent != nil {
		which := "a new lifecycle"
		if agent.Resumed {
			which = "its lifecycle, resumed, with what was sent to it meanwhile"
		}
		fmt.Fprintf(o.IO.ErrOut, "cotal mcp: %s runs on %s (%s)\n", c.Principal(), which, agent.Cred.LifecycleUID)
		agent.Watch(func(by agentlock.Holder) {
			fmt.Fprintf(o.IO.ErrOut, "cotal mcp: %s was taken over by %s; this server no longer acts as it\n", c.Principal(), by)
			tools.TakenOver(by.String())
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = c.Close(cctx) // the other process is the agent now; a failed offline write only ages out
		})
	}
	// The harness's hooks (`cotal hook`) reach this server on a socket of the user's alone; without
	// it the agent still works, pulling through cotal_inbox.
	if path, err := hooksock.Socket(c.Space(), c.Principal()); err != nil {
		fmt.Fprintf(o.IO.ErrOut, "cotal mcp: hooks are off: %v\n", err)
	} else if hooks, err := tools.ServeHooks(ctx, path); err != nil {
		fmt.Fprintf(o.IO.ErrOut, "cotal mcp: hooks are off: %v\n", err)
	} else {
		defer func() { hooks.Close(); _ = os.Remove(path) }()
	}
	// The command's own streams rather than the process's, so the server runs anywhere a
	// command does; closing them is the process's business.
	err = tools.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(o.IO.In), Writer: nopCloser{o.IO.Out}})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
