// Package models implements `cotal models`: the model catalogs of the harnesses a manager runs.
package models

import (
	"encoding/json"
	"fmt"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/manager"
)

// Result is what `cotal models --json` prints: the manager's catalogs. The field names are a
// stable interface.
type Result struct {
	Catalogs []manager.Catalog `json:"catalogs"`
}

// NewCmdModels returns the `cotal models` command.
func NewCmdModels(f *factory.Factory) *cobra.Command {
	var agent string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "models [--agent A] [--json]",
		Short: "List the models each harness takes, as the space's manager sees them",
		Long: "Ask a manager of the space (its models command) which models each harness it can start\n" +
			"takes on its host, the ids --model and a persona's model: pass as they are; with --agent,\n" +
			"one harness only. A harness with no catalog says why.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if agent != "" && !slices.Contains(manager.Harnesses, manager.Harness(agent)) {
				return &exit.UsageError{Err: fmt.Errorf("--agent %q: must be one of %q", agent, manager.Harnesses)}
			}
			ctl, err := f.Control(cmd.Context())
			if err != nil {
				return err
			}
			defer ctl.Close()
			args := map[string]string{}
			if agent != "" {
				args["agent"] = agent
			}
			var res Result
			if err := ctl.Manager.Ask(cmd.Context(), manager.CommandModels, args, &res); err != nil {
				return factory.Refusal(fmt.Errorf("models: %w", err))
			}
			if asJSON {
				return json.NewEncoder(f.IO.Out).Encode(res)
			}
			tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "AGENT\tMODEL\tNOTE")
			for _, c := range res.Catalogs {
				if len(c.Models) == 0 {
					fmt.Fprintf(tw, "%s\t-\t%s\n", c.Agent, c.Error)
				}
				for _, m := range c.Models {
					fmt.Fprintf(tw, "%s\t%s\t\n", c.Agent, m.ID)
				}
			}
			return tw.Flush()
		},
	}
	f.Target.Register(cmd.Flags())
	cmd.Flags().StringVar(&agent, "agent", "", fmt.Sprintf("one harness, of %q", manager.Harnesses))
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the catalogs as JSON")
	return cmd
}
