// Package mcp implements `cotal mcp`: a stdio MCP server that makes an LLM coding agent a member
// of the mesh, with the tools of package mcptools.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/cli/target"
	"github.com/gocotal/cotal/internal/cli/version"
	"github.com/gocotal/cotal/internal/mcptools"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/wire"
)

// Options are the inputs of `cotal mcp`.
type Options struct {
	IO *iostreams.IOStreams
	target.Flags
	Name         string
	Role         string
	Subscribe    []string
	AllowPublish []string
	Creds        string
	InboxLimit   int
}

// NewCmdMCP returns the `cotal mcp` command.
func NewCmdMCP(io *iostreams.IOStreams) *cobra.Command {
	o := &Options{IO: io}
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the mesh to an LLM agent as MCP tools over stdio",
		Long: "Run a stdio MCP server for an agent local.NAME: cotal_orientation, cotal_roster,\n" +
			"cotal_inbox, cotal_send, cotal_dm, cotal_anycast, cotal_join and the rest. Without\n" +
			"--creds it issues and provisions its own credential on the running mesh and retires its\n" +
			"lifecycle when the client goes away; with --creds it runs on that credential.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return mcpRun(cmd.Context(), o) },
	}
	f := cmd.Flags()
	o.Register(f)
	f.StringVar(&o.Name, "name", "", "the agent's name (required without --creds)")
	f.StringVar(&o.Role, "role", "", "a role, to receive anycast tasks")
	f.StringSliceVar(&o.Subscribe, "subscribe", nil, "channels to join")
	f.StringSliceVar(&o.AllowPublish, "allow-publish", nil, "channels the agent may post to (default: the concrete channels of --subscribe)")
	f.StringVar(&o.Creds, "creds", "", "run on this creds file instead of issuing one")
	f.IntVar(&o.InboxLimit, "inbox-limit", 500, "messages buffered between tool calls")
	return cmd
}

func mcpRun(ctx context.Context, o *Options) error {
	if o.InboxLimit < 1 {
		return &exit.UsageError{Err: fmt.Errorf("--inbox-limit %d: must be at least 1", o.InboxLimit)}
	}
	if o.Creds == "" {
		if err := wire.ValidateActor(o.Name); err != nil {
			return &exit.UsageError{Err: fmt.Errorf("--name: %w", err)}
		}
	} else if o.Name != "" || o.Role != "" || len(o.AllowPublish) > 0 {
		return &exit.UsageError{Err: errors.New("--creds carries its own name, role and access: drop --name, --role and --allow-publish")}
	}
	d, st, err := mesh.Running(o.Dir)
	if err != nil {
		return err
	}
	inbox := mcptools.NewInbox(o.InboxLimit)
	opts := []cotal.Option{cotal.WithHandler(inbox.Offer), cotal.WithJoin(o.Subscribe...)}
	if o.Creds != "" {
		opts = append(opts, cotal.WithCreds(o.Creds))
	} else {
		cred, retire, err := issue(ctx, o, d, st)
		if err != nil {
			return err
		}
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := retire(rctx); err != nil {
				fmt.Fprintf(o.IO.ErrOut, "retire lifecycle of %s: %v\n", cred.Principal, err)
			}
		}()
		opts = append(opts, cotal.WithCredsData(cred.Creds))
	}
	c, err := cotal.Connect(ctx, st.URL, opts...)
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
	tools := mcptools.New(c, inbox, roster, version.Read(debug.ReadBuildInfo).Version)
	// The command's own streams rather than the process's, so the server runs anywhere a
	// command does; closing them is the process's business.
	err = tools.Server().Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(o.IO.In), Writer: nopCloser{o.IO.Out}})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// issue issues and provisions the agent's own credential.
func issue(ctx context.Context, o *Options, d mesh.Dir, st *mesh.State) (*authority.Credential, func(context.Context) error, error) {
	sp, err := st.SpaceOf(o.Space)
	if err != nil {
		return nil, nil, &exit.UsageError{Err: err}
	}
	auth, err := mesh.OpenAuthority(d)
	if err != nil {
		return nil, nil, err
	}
	req := mesh.MintRequest{Space: sp, Profile: authority.ProfileAgent, Name: o.Name, Subscribe: o.Subscribe, AllowPublish: o.AllowPublish, Role: o.Role}
	cred, retire, err := auth.StartAgent(ctx, st.URL, req)
	var invalid *wire.ValidationError
	if errors.As(err, &invalid) {
		return nil, nil, &exit.UsageError{Err: err}
	}
	return cred, retire, err
}
