// Package meshes implements `cotal meshes` and `cotal use`: the machine's registry of meshes,
// which lets a command reach a mesh by name from any directory.
package meshes

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshreg"
)

// Row is one mesh of `cotal meshes --json`; the field names are a stable interface.
type Row struct {
	Name    string `json:"name"`
	Current bool   `json:"current"`
	Dir     string `json:"dir,omitempty"`
	Server  string `json:"server,omitempty"`
	Creds   string `json:"creds,omitempty"`
	Space   string `json:"space,omitempty"`
}

// NewCmdMeshes returns `cotal meshes` with its add and rm subcommands.
func NewCmdMeshes(f *factory.Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "meshes [--json]",
		Short: "List the registered meshes (* marks the current one)",
		Long: "List the meshes registered on this machine, in $COTAL_HOME/meshes.json (~/.cotal by\n" +
			"default). A command finds its mesh in this order: --dir, $COTAL_DIR, the registered mesh\n" +
			"$COTAL_MESH names, the nearest .cotal up from the current directory, then the current mesh\n" +
			"(`cotal use NAME`). `cotal up` starts a mesh in the project and ignores the registry.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := meshreg.Load()
			if err != nil {
				return err
			}
			return list(f, r, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the meshes as JSON")
	cmd.AddCommand(newCmdAdd(f), newCmdRm(f))
	return cmd
}

func list(f *factory.Factory, r *meshreg.Registry, asJSON bool) error {
	rows := make([]Row, 0, len(r.Meshes))
	for _, name := range r.Names() {
		e := r.Meshes[name]
		rows = append(rows, Row{Name: name, Current: name == r.Current, Dir: e.Dir, Server: e.Server, Creds: e.Creds, Space: e.Space})
	}
	if asJSON {
		return json.NewEncoder(f.IO.Out).Encode(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(f.IO.Out, "no mesh is registered (`cotal meshes add NAME --dir D` registers one)")
		return nil
	}
	tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tREACHED BY")
	for _, row := range rows {
		mark := " "
		if row.Current {
			mark = "*"
		}
		by := row.Dir
		if row.Server != "" {
			by = fmt.Sprintf("%s as %s (space %s)", row.Server, row.Creds, row.Space)
		}
		fmt.Fprintf(tw, "%s %s\t%s\n", mark, row.Name, by)
	}
	return tw.Flush()
}

// addOptions are the inputs of `cotal meshes add`.
type addOptions struct {
	dir, server, creds string
	force              bool
}

func newCmdAdd(f *factory.Factory) *cobra.Command {
	o := &addOptions{}
	cmd := &cobra.Command{
		Use:   "add NAME (--dir D | --server URL --creds F)",
		Short: "Register a mesh by its directory, or by a server and a credential file",
		Long: "Register a mesh under NAME: by its mesh directory (a project or its .cotal), which every\n" +
			"command can then act on, or by a broker URL and a credential file, as which the commands\n" +
			"that connect (send, status, console...) act; the commands that issue credentials need the\n" +
			"directory. A name already registered is refused unless --force.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := meshreg.CheckName(name); err != nil {
				return &exit.UsageError{Err: err}
			}
			e, err := o.entry()
			if err != nil {
				return err
			}
			if err := meshreg.Update(func(r *meshreg.Registry) error { return r.Add(name, e, o.force) }); err != nil {
				return usage(err)
			}
			fmt.Fprintf(f.IO.Out, "registered mesh %s (`cotal use %s` makes it current)\n", name, name)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.dir, "dir", "", "the mesh directory: a project, or its .cotal")
	fs.StringVar(&o.server, "server", "", "the broker's URL (nats:// or tls://), with --creds")
	fs.StringVar(&o.creds, "creds", "", "the credential file to connect as, with --server")
	fs.BoolVar(&o.force, "force", false, "replace a mesh registered under the same name")
	return cmd
}

// entry checks the flags and returns the registry entry they describe: an existing mesh
// directory, or a server URL and a credential file that parses, whose space it records.
func (o *addOptions) entry() (meshreg.Entry, error) {
	switch {
	case o.dir != "" && (o.server != "" || o.creds != ""):
		return meshreg.Entry{}, &exit.UsageError{Err: errors.New("give --dir, or --server with --creds, not both")}
	case o.dir != "":
		d, err := mesh.ProjectDir(o.dir, ".")
		if err != nil {
			return meshreg.Entry{}, err
		}
		if fi, err := os.Stat(d.Path); err != nil || !fi.IsDir() {
			return meshreg.Entry{}, &exit.UsageError{Err: fmt.Errorf("--dir %s: no mesh directory at %s (`cotal up --dir %s` makes one)", o.dir, d.Path, o.dir)}
		}
		return meshreg.Entry{Dir: d.Path}, nil
	case o.server == "" || o.creds == "":
		return meshreg.Entry{}, &exit.UsageError{Err: errors.New("give --dir D, or --server URL with --creds F")}
	}
	if err := meshreg.CheckServer(o.server); err != nil {
		return meshreg.Entry{}, &exit.UsageError{Err: fmt.Errorf("--server: %w", err)}
	}
	path, err := filepath.Abs(o.creds)
	if err != nil {
		return meshreg.Entry{}, &exit.UsageError{Err: fmt.Errorf("--creds %s: %w", o.creds, err)}
	}
	g, err := cotal.ReadCreds(path)
	if err != nil {
		return meshreg.Entry{}, &exit.UsageError{Err: fmt.Errorf("--creds: %w", err)}
	}
	return meshreg.Entry{Server: o.server, Creds: path, Space: string(cmp.Or(g.Space, mesh.DefaultSpace))}, nil
}

func newCmdRm(f *factory.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Forget a registered mesh (its directory and credential file stay as they are)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := meshreg.Update(func(r *meshreg.Registry) error { return r.Remove(args[0]) }); err != nil {
				return usage(err)
			}
			fmt.Fprintf(f.IO.Out, "forgot mesh %s\n", args[0])
			return nil
		},
	}
}

// usage marks a name the registry does not know, or already knows, as a usage error.
func usage(err error) error {
	if errors.Is(err, meshreg.ErrUnknown) || errors.Is(err, meshreg.ErrExists) {
		return &exit.UsageError{Err: err}
	}
	return err
}

// NewCmdUse returns `cotal use NAME`.
func NewCmdUse(f *factory.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "use NAME",
		Short: "Make a registered mesh the current one",
		Long: "Make NAME the current mesh: the one a command acts on from a directory with no .cotal up\n" +
			"from it, when neither --dir, $COTAL_DIR nor $COTAL_MESH names another.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := meshreg.Update(func(r *meshreg.Registry) error { return r.Use(args[0]) }); err != nil {
				return usage(err)
			}
			fmt.Fprintf(f.IO.Out, "current mesh: %s\n", args[0])
			return nil
		},
	}
}
