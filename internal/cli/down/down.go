// Package down implements `cotal down`: stop the project's running mesh.
package down

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/cli/deploy"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/mesh"
)

// Options are the inputs of `cotal down`.
type Options struct {
	IO      *iostreams.IOStreams
	Dir     string
	Timeout time.Duration
	// File and RunID name an additive deploy to remove (down -f) rather than the mesh.
	File  string
	RunID string
	// MeshURL removes a person's deploy as that person (down -f --mesh).
	MeshURL string
	// Part, when set, is the one part to stop: delivery, manager or web.
	Part    string
	factory *factory.Factory
}

// NewCmdDown returns the `cotal down` command. runF runs it; nil means downRun.
func NewCmdDown(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{IO: f.IO, factory: f}
	cmd := &cobra.Command{
		Use:   "down [delivery|manager|web] [-f cotal.yaml [--run RUNID]]",
		Short: "Stop the running mesh, or one part of it",
		Long: "Stop the mesh recorded in this project's .cotal directory: the broker flushes JetStream\n" +
			"and exits. Messages, keys and credentials stay on disk for the next `cotal up`.\n\n" +
			"With -f cotal.yaml (or --run RUNID), stop only what that manifest's `cotal spawn -f` created:\n" +
			"an agent when the one running under its name is the identity and lifecycle its ledger\n" +
			"recorded, a channel when no other member remains. What it cannot prove its own stays, and\n" +
			"so does the ledger, for a later `cotal down -f --run RUNID`. With --mesh URL, as the person\n" +
			"logged in there (`cotal spawn -f --mesh`): it stops your own agents and leaves the channels,\n" +
			"whose other readers only the operator sees, to the operator's `cotal down -f --run RUNID`.\n\n" +
			"With a part, stop only that and leave the mesh serving: delivery (the delivery daemons),\n" +
			"manager (the managers, which stop and retire their agents) or web (the dashboard `cotal web`\n" +
			"serves). `cotal up` on the running mesh starts a stopped delivery or manager again.",
		Args:      cobra.MaximumNArgs(1),
		ValidArgs: []string{string(mesh.PartDelivery), string(mesh.PartManager), partWeb},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.Part = args[0]
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			if o.Part != "" {
				if o.File != "" || o.RunID != "" || o.MeshURL != "" {
					return &exit.UsageError{Err: fmt.Errorf("down %s stops a part of the mesh: -f, --run and --mesh go without one", o.Part)}
				}
				return downPart(cmd.Context(), o)
			}
			if o.File != "" || o.RunID != "" {
				o.factory.Target.Dir = o.Dir
				return deploy.Down(cmd.Context(), o.factory, o.IO.Out, deploy.DownOptions{File: o.File, RunID: o.RunID, MeshURL: o.MeshURL})
			}
			if o.MeshURL != "" {
				return &exit.UsageError{Err: errors.New("--mesh goes with -f or --run: it removes your own deploy, never the mesh")}
			}
			return downRun(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", "", "the mesh directory (default: the nearest .cotal)")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 30*time.Second, "how long to wait for a clean stop before killing it")
	cmd.Flags().StringVarP(&o.File, "file", "f", "", "remove only what this manifest's `cotal spawn -f` created")
	cmd.Flags().StringVar(&o.RunID, "run", "", "remove only what run RUNID created (its ledger in .cotal/manifests)")
	cmd.Flags().StringVar(&f.Target.Space, "space", "", "with -f: the space the deploy went to (default: the mesh's first)")
	cmd.Flags().StringVar(&o.MeshURL, "mesh", "", "with -f: remove your own deploy, as yourself (`cotal login --mesh` first), on the user-auth mesh whose exchange is at this URL")
	return cmd
}

func downRun(ctx context.Context, o *Options) error {
	d, err := mesh.FindDir(o.Dir, ".")
	if err != nil {
		return err
	}
	st, err := d.ReadState()
	if errors.Is(err, mesh.ErrNotRunning) {
		fmt.Fprintln(o.IO.ErrOut, "no mesh is running")
		return nil
	}
	if err != nil {
		return err
	}
	if err := syscall.Kill(st.PID, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop the mesh (pid %d): %w", st.PID, err)
	}
	gone, err := waitGone(ctx, d, st.PID, o.Timeout)
	if err != nil {
		return err
	}
	if !gone {
		if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("kill the mesh (pid %d): %w", st.PID, err)
		}
		fmt.Fprintf(o.IO.ErrOut, "the mesh (pid %d) did not stop within %s and was killed\n", st.PID, o.Timeout)
		return nil
	}
	fmt.Fprintf(o.IO.ErrOut, "mesh at %s stopped\n", st.URL)
	return nil
}

// partWeb is the dashboard, the part `cotal down web` stops.
const partWeb = "web"

// downPart stops one part of the running mesh and leaves the rest serving.
func downPart(ctx context.Context, o *Options) error {
	d, err := mesh.FindDir(o.Dir, ".")
	if err != nil {
		return err
	}
	switch o.Part {
	case partWeb:
		return downWeb(ctx, o, d)
	case string(mesh.PartDelivery), string(mesh.PartManager):
	default:
		return &exit.UsageError{Err: fmt.Errorf("no part %q: down stops delivery, manager or web", o.Part)}
	}
	if _, err := d.ReadState(); errors.Is(err, mesh.ErrNotRunning) {
		return errors.New("no mesh is running here")
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout+time.Minute)
	defer cancel()
	parts, err := mesh.StopPart(ctx, d, mesh.Part(o.Part))
	if err != nil {
		return fmt.Errorf("stop the %s: %w", o.Part, err)
	}
	for _, p := range parts {
		if p.Name == o.Part {
			fmt.Fprintf(o.IO.ErrOut, "%s of space %s: %s\n", p.Name, p.Space, p.State)
		}
	}
	return nil
}

// downWeb stops the dashboard that serves this mesh directory.
func downWeb(ctx context.Context, o *Options, d mesh.Dir) error {
	ws, err := d.ReadWebState()
	if errors.Is(err, mesh.ErrNotRunning) {
		fmt.Fprintln(o.IO.ErrOut, "no dashboard is running")
		return nil
	}
	if err != nil {
		return err
	}
	if err := syscall.Kill(ws.PID, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop the dashboard (pid %d): %w", ws.PID, err)
	}
	deadline := time.NewTimer(o.Timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := d.ReadWebState(); errors.Is(err, mesh.ErrNotRunning) {
			fmt.Fprintf(o.IO.ErrOut, "dashboard at %s stopped\n", ws.URL)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			if err := syscall.Kill(ws.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("kill the dashboard (pid %d): %w", ws.PID, err)
			}
			d.ClearWebState(ws.PID)
			fmt.Fprintf(o.IO.ErrOut, "the dashboard (pid %d) did not stop within %s and was killed\n", ws.PID, o.Timeout)
			return nil
		case <-tick.C:
		}
	}
}

// waitGone waits until the mesh's process has exited (its state no longer names it as running).
func waitGone(ctx context.Context, d mesh.Dir, pid int, timeout time.Duration) (bool, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := d.ReadState()
		if errors.Is(err, mesh.ErrNotRunning) || (err == nil && st.PID != pid) {
			if syscall.Kill(pid, 0) != nil {
				return true, nil
			}
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-deadline.C:
			return false, nil
		case <-tick.C:
		}
	}
}
