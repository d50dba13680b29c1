// Package service implements `cotal service install|status|uninstall`: a mesh run by the system
// as a user service, started at login and restarted when it fails: a systemd user unit on Linux,
// a launchd agent on macOS.
package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/mesh"
)

// Options are the inputs of `cotal service`.
type Options struct {
	*factory.Factory
	Dir    string
	DryRun bool
	// UpArgs follow `up --dir D` in the service's command.
	UpArgs []string
}

// NewCmdService returns `cotal service` with install, status and uninstall.
func NewCmdService(f *factory.Factory) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "service",
		Short: "Run this mesh as a user service of the system: started at login, restarted when it fails",
		Long: "Install, inspect or remove a user service that runs `cotal up` for this mesh in the\n" +
			"foreground: a systemd user unit on Linux (~/.config/systemd/user/cotal-mesh-<key>.service),\n" +
			"a launchd agent on macOS (~/Library/LaunchAgents/ai.cotal.mesh.<key>.plist). The service\n" +
			"runs this cotal binary with the PATH of the shell that installs it, restarts on failure (at\n" +
			"most 20 starts in 30 minutes) and starts with the user's session; on a server, enable\n" +
			"lingering (`loginctl enable-linger`) to start it at boot.",
	}
	cmd.PersistentFlags().StringVar(&o.Dir, "dir", "", "the mesh directory (default: the nearest .cotal, or ./.cotal)")
	install := &cobra.Command{
		Use:   "install [--dry-run] [-- UP-FLAGS...]",
		Short: "Install and start the service; --dry-run prints it and changes nothing",
		Long: "Write the service for this mesh and start it. Flags after -- go to `cotal up` (for example\n" +
			"-- --space team --port 4222). A unit of the same name that `cotal service install` did not\n" +
			"write is left alone, and the install refused.",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
				return &exit.UsageError{Err: fmt.Errorf("%q: the flags for cotal up go after --", args[0])}
			}
			for _, a := range args {
				if name, _, _ := strings.Cut(a, "="); name == "--detach" || name == "--dir" {
					return &exit.UsageError{Err: fmt.Errorf("%s: the service runs cotal up in the foreground, for the mesh --dir names", a)}
				}
			}
			o.UpArgs = args
			return installRun(cmd.Context(), o)
		},
	}
	install.Flags().BoolVar(&o.DryRun, "dry-run", false, "print the unit and the commands that would install it, and change nothing")
	status := &cobra.Command{
		Use: "status", Short: "Whether the service is installed and running", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return statusRun(cmd.Context(), o) },
	}
	uninstall := &cobra.Command{
		Use: "uninstall", Short: "Stop the service and remove it", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return uninstallRun(cmd.Context(), o) },
	}
	cmd.AddCommand(install, status, uninstall)
	return cmd
}

// platform is how one system installs, starts, inspects and removes a user service.
type platform struct {
	// file is where the unit goes, and render writes it.
	file   string
	render func(Unit) string
	// tool is the program the steps run; install, status and remove its arguments.
	tool                     string
	install, status, removal [][]string
}

// platformFor returns the platform of this system for u.
func platformFor(u Unit) (*platform, error) {
	home := os.Getenv("HOME")
	switch runtime.GOOS {
	case "linux":
		config := os.Getenv("XDG_CONFIG_HOME")
		if config == "" {
			if home == "" {
				return nil, errors.New("neither XDG_CONFIG_HOME nor HOME is set: no user unit directory")
			}
			config = filepath.Join(home, ".config")
		}
		if !filepath.IsAbs(config) {
			return nil, fmt.Errorf("XDG_CONFIG_HOME %q is not absolute", config)
		}
		name := u.SystemdName()
		return &platform{file: filepath.Join(config, "systemd", "user", name), render: Unit.Systemd, tool: "systemctl",
			install: [][]string{{"--user", "daemon-reload"}, {"--user", "enable", "--now", name}},
			status:  [][]string{{"--user", "is-active", name}},
			removal: [][]string{{"--user", "disable", "--now", name}, {"--user", "daemon-reload"}}}, nil
	case "darwin":
		if home == "" {
			return nil, errors.New("HOME is not set: no LaunchAgents directory")
		}
		domain := "gui/" + strconv.Itoa(os.Getuid())
		file := filepath.Join(home, "Library", "LaunchAgents", u.LaunchdLabel()+".plist")
		return &platform{file: file, render: Unit.Launchd, tool: "launchctl",
			install: [][]string{{"bootstrap", domain, file}},
			status:  [][]string{{"print", domain + "/" + u.LaunchdLabel()}},
			removal: [][]string{{"bootout", domain + "/" + u.LaunchdLabel()}}}, nil
	}
	return nil, fmt.Errorf("cotal service supports systemd (Linux) and launchd (macOS), not %s", runtime.GOOS)
}

// target returns the service of the mesh o names and this system's platform for it.
func target(o *Options) (Unit, *platform, error) {
	u, err := unitOf(o)
	if err != nil {
		return Unit{}, nil, err
	}
	p, err := platformFor(u)
	return u, p, err
}

// errNotInstalled is a mesh with no unit file.
var errNotInstalled = errors.New("no service is installed")

// owned checks the unit file p names: errNotInstalled when there is none, a usage error when
// cotal service install did not write it.
func owned(p *platform) error {
	ours, err := carriesMarker(p.file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errNotInstalled
	case err != nil:
		return err
	case !ours:
		return &exit.UsageError{Err: fmt.Errorf("%s was not written by cotal service install: left as it is", p.file)}
	}
	return nil
}

// unitOf returns the service of the mesh o names, run by this binary with this shell's PATH.
func unitOf(o *Options) (Unit, error) {
	d, err := mesh.FindDir(o.Dir, ".")
	if err != nil {
		return Unit{}, err
	}
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return Unit{}, fmt.Errorf("find this cotal binary: %w", err)
	}
	u := Unit{Dir: d.Path, Exec: self, Args: o.UpArgs, Path: pinnedPath(os.Getenv("PATH"))}
	return u, u.Validate()
}

// pinnedPath returns PATH with each relative entry made absolute against the directory the
// install runs in (the service starts elsewhere) and empty entries left out.
func pinnedPath(path string) string {
	var out []string
	for _, e := range filepath.SplitList(path) {
		if e == "" {
			continue
		}
		if abs, err := filepath.Abs(e); err == nil {
			e = abs
		}
		out = append(out, e)
	}
	return strings.Join(out, string(filepath.ListSeparator))
}

func installRun(ctx context.Context, o *Options) error {
	u, p, err := target(o)
	if err != nil {
		return err
	}
	unit := p.render(u)
	if o.DryRun {
		fmt.Fprintf(o.IO.Out, "# %s\n%s", p.file, unit)
		for _, args := range p.install {
			fmt.Fprintf(o.IO.ErrOut, "would run: %s %s\n", p.tool, strings.Join(args, " "))
		}
		return nil
	}
	if _, err := exec.LookPath(p.tool); err != nil {
		return fmt.Errorf("%s is not on PATH, so no service can be installed here; `cotal service install --dry-run` prints the unit to install by hand", p.tool)
	}
	if err := owned(p); err != nil && !errors.Is(err, errNotInstalled) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p.file), 0o755); err != nil {
		return err
	}
	if err := atomicfile.Write(p.file, []byte(unit), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", p.file, err)
	}
	if err := runAll(ctx, p.tool, p.install); err != nil {
		return fmt.Errorf("%s is written, but the service did not start: %w", p.file, err)
	}
	fmt.Fprintf(o.IO.Out, "installed and started %s: `cotal up` for %s\n", p.file, u.Dir)
	return nil
}

func statusRun(ctx context.Context, o *Options) error {
	u, p, err := target(o)
	if err != nil {
		return err
	}
	if err := owned(p); errors.Is(err, errNotInstalled) {
		return fmt.Errorf("%w for %s (`cotal service install`)", err, u.Dir)
	} else if err != nil {
		return err
	}
	fmt.Fprintf(o.IO.Out, "installed: %s\n", p.file)
	if err := runAll(ctx, p.tool, p.status); err != nil {
		return fmt.Errorf("the service is not running: %w", err)
	}
	fmt.Fprintln(o.IO.Out, "running")
	return nil
}

func uninstallRun(ctx context.Context, o *Options) error {
	u, p, err := target(o)
	if err != nil {
		return err
	}
	if err := owned(p); errors.Is(err, errNotInstalled) {
		fmt.Fprintf(o.IO.ErrOut, "%v for %s\n", err, u.Dir)
		return nil
	} else if err != nil {
		return err
	}
	// Stopped first, removed after: a unit that will not stop stays installed, and says why.
	if err := runAll(ctx, p.tool, p.removal[:1]); err != nil {
		return fmt.Errorf("stop the service: %w", err)
	}
	if err := os.Remove(p.file); err != nil {
		return err
	}
	if err := runAll(ctx, p.tool, p.removal[1:]); err != nil {
		return err
	}
	fmt.Fprintf(o.IO.Out, "stopped and removed %s\n", p.file)
	return nil
}

// carriesMarker reports whether the file at path was written by cotal service install.
func carriesMarker(path string) (bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	first, _, _ := bytes.Cut(b, []byte("\n"))
	if bytes.HasPrefix(first, []byte("<?xml")) { // a plist: the marker is its second line
		_, rest, _ := bytes.Cut(b, []byte("\n"))
		first, _, _ = bytes.Cut(rest, []byte("\n"))
	}
	return bytes.Contains(first, []byte(Marker)), nil
}

// runAll runs tool with each of steps in turn, stopping at the first that fails.
func runAll(ctx context.Context, tool string, steps [][]string) error {
	for _, args := range steps {
		out, err := exec.CommandContext(ctx, tool, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %s: %w: %s", tool, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
