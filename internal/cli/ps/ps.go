// Package ps implements `cotal ps` (alias roster): who is in the space.
package ps

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/wire"
)

// Options are the inputs of `cotal ps`.
type Options struct {
	*factory.Factory
	JSON bool
}

// Row is one line of `cotal ps --json`; the field names are a stable interface.
type Row struct {
	Principal string    `json:"principal"`
	Name      string    `json:"name"`
	Status    string    `json:"status"`
	Online    bool      `json:"online"`
	Role      string    `json:"role,omitempty"`
	Activity  string    `json:"activity,omitempty"`
	LastSeen  time.Time `json:"lastSeen,omitzero"`
	// Process is the supervisor's view of an agent it spawned: its process state, pid and
	// restarts. Absent for agents it did not spawn.
	Process *manager.Status `json:"process,omitempty"`
}

// NewCmdPs returns the `cotal ps` command.
func NewCmdPs(f *factory.Factory) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:     "ps",
		Aliases: []string{"roster"},
		Short:   "List the space's participants: name, status, role, activity, last seen",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return psRun(cmd.Context(), o) },
	}
	o.Target.Register(cmd.Flags())
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the roster as JSON")
	return cmd
}

func psRun(ctx context.Context, o *Options) error {
	d, _, sp, err := o.Mesh("")
	if err != nil {
		return err
	}
	c, err := o.Client(ctx, "", authority.ProfileObserver, "cotal_ps", cotal.WithPresence(false))
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	roster, err := c.Roster(ctx)
	if err != nil {
		return err
	}
	defer roster.Stop()
	var rows []Row
	for _, p := range roster.Peers() {
		if p.Presence == nil {
			continue
		}
		status := string(p.Presence.Status)
		if !p.Online {
			status = "offline"
		}
		rows = append(rows, Row{
			Principal: p.Key, Name: p.Presence.Card.Name, Status: status, Online: p.Online,
			Role: p.Presence.Card.Role, Activity: p.Presence.Activity, LastSeen: p.Presence.TS.Time().UTC(),
		})
	}
	rows = withProcesses(ctx, d.SupervisorSocket(sp), rows)
	if o.JSON {
		if rows == nil {
			rows = []Row{}
		}
		return json.NewEncoder(o.IO.Out).Encode(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(o.IO.Out, "nobody is present")
		return nil
	}
	tw := tabwriter.NewWriter(o.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPRINCIPAL\tSTATUS\tROLE\tACTIVITY\tLAST SEEN\tPROCESS")
	now := time.Now()
	for _, r := range rows {
		seen := "-"
		if !r.LastSeen.IsZero() {
			seen = now.Sub(r.LastSeen).Round(time.Second).String() + " ago"
		}
		proc := "-"
		if p := r.Process; p != nil {
			proc = fmt.Sprintf("%s pid %d, %d restarts", p.State, p.PID, p.Restarts)
		}
		// Peer-written text is made safe for the terminal: no escapes, bidi or tabs that would
		// recolour the screen or shift the columns.
		safe := wire.SanitizeForTerminal
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", safe(r.Name), r.Principal, r.Status, dash(safe(r.Role)), dash(safe(r.Activity)), seen, proc)
	}
	return tw.Flush()
}

// withProcesses adds the process state from the supervisor at socket to the rows of the agents
// it spawned, and a row for each spawned agent not present. Without a supervisor the rows are
// unchanged.
func withProcesses(ctx context.Context, socket string, rows []Row) []Row {
	resp, err := manager.Call(ctx, socket, manager.Request{Op: "list"})
	if err != nil {
		return rows
	}
	for _, st := range resp.Agents {
		i := slices.IndexFunc(rows, func(r Row) bool { return r.Principal == st.Principal })
		if i < 0 {
			rows = append(rows, Row{Principal: st.Principal, Name: st.Name, Status: "offline"})
			i = len(rows) - 1
		}
		rows[i].Process = &st
	}
	return rows
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
