// Package topology implements `cotal topology view -f FILE`: a manifest checked and resolved
// into each agent's grants and each channel's members, with no broker.
package topology

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/manifest"
)

// NewCmdTopology returns `cotal topology` with view.
func NewCmdTopology(f *factory.Factory) *cobra.Command {
	var file string
	var asJSON bool
	cmd := &cobra.Command{Use: "topology", Short: "Check and show what a manifest (cotal.yaml) grants"}
	view := &cobra.Command{
		Use:   "view -f FILE",
		Short: "Check a manifest and print each agent's read, post and subscribe sets and each channel's members",
		Long: "Read the manifest FILE (apiVersion cotal/v1, kind Mesh), refuse any unknown key or undeclared\n" +
			"agent with FILE:LINE:COL, and print what it resolves to: each agent's channels to read, to\n" +
			"post to and to join at start, and each channel's members. It needs no broker and changes\n" +
			"nothing.",
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if file == "" {
				return &exit.UsageError{Err: errors.New("-f FILE names the manifest")}
			}
			m, err := manifest.Load(file)
			if err != nil {
				return err
			}
			top := m.Resolve()
			if asJSON {
				return json.NewEncoder(f.IO.Out).Encode(top)
			}
			render(f, top)
			return nil
		},
	}
	view.Flags().StringVarP(&file, "file", "f", "", "the manifest")
	view.Flags().BoolVar(&asJSON, "json", false, "print the topology as JSON")
	cmd.AddCommand(view)
	return cmd
}

func render(f *factory.Factory, top *manifest.Topology) {
	list := func(s []string) string {
		if len(s) == 0 {
			return "-"
		}
		return strings.Join(s, ", ")
	}
	fmt.Fprintf(f.IO.Out, "space %s\n\nagents\n", top.Space)
	for _, name := range slices.Sorted(maps.Keys(top.Agents)) {
		g := top.Agents[name]
		fmt.Fprintf(f.IO.Out, "  %s\n    read:      %s\n    post:      %s\n    subscribe: %s\n", name, list(g.Read), list(g.Post), list(g.Subscribe))
		if len(g.Inherited) > 0 {
			fmt.Fprintf(f.IO.Out, "    from its persona file: %s\n", list(g.Inherited))
		}
	}
	fmt.Fprintf(f.IO.Out, "\nchannels\n")
	for _, name := range slices.Sorted(maps.Keys(top.Channels)) {
		c := top.Channels[name]
		fmt.Fprintf(f.IO.Out, "  %s\n    read:      %s\n    post:      %s\n    subscribe: %s\n", name, list(c.Read), list(c.Post), list(c.Subscribe))
	}
}
