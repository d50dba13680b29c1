// Package ps implements `cotal ps` (alias roster): who is in the space, and the processes the
// space's managers run for them.
package ps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/termsafe"
	"github.com/gocotal/cotal/wire"
)

// Options are the inputs of `cotal ps`.
type Options struct {
	*factory.Factory
	JSON bool
	// MeshURL is a user-auth mesh's exchange URL: list, as the person logged in there, the agents of
	// the one manager they may address.
	MeshURL string
	// Instance names that manager, when the person may address several; the only live one when
	// empty.
	Instance string
}

// Row is one line of `cotal ps --json`; the field names are a stable interface.
type Row struct {
	Principal string `json:"principal"`
	Name      string `json:"name"`
	// Status is the presence status, "offline" when not online; under --mesh, which reads no
	// presence, the process's status (and Online is false).
	Status   string    `json:"status"`
	Online   bool      `json:"online"`
	Role     string    `json:"role,omitempty"`
	Activity string    `json:"activity,omitempty"`
	LastSeen time.Time `json:"lastSeen,omitzero"`
	// Process is the row of an agent a manager spawned, as that manager reports it in ps (the
	// manager contract's AGENT_ROW: name, id, status, pid, lifecycleUid, instanceId, ...). Absent
	// for agents no manager spawned.
	Process *manager.Row `json:"process,omitempty"`
	// Attached names who is attached to the agent's terminal: the holder of each session open on
	// it (`cotal attach`), from the space's ledger.
	Attached []string `json:"attached,omitempty"`
}

// NewCmdPs returns the `cotal ps` command.
func NewCmdPs(f *factory.Factory) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:     "ps",
		Aliases: []string{"roster"},
		Short:   "List the space's participants and the processes its managers run for them",
		Long: "List who is in the space: name, status, role, activity and last seen, from presence;\n" +
			"and, from every manager registered in the space (a ps scatter), the process of each agent\n" +
			"it spawned, with a row of its own for a spawned agent not present. A manager that does not\n" +
			"answer is named on stderr and the command exits 1, after printing what the others gave.\n\n" +
			"With --mesh URL, as the person logged in to that user-auth mesh: the agents of the one\n" +
			"manager you may address (your remote manager, or the host's), each row's status its\n" +
			"process's; there is no presence roster, and no claim about other managers.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.MeshURL != "" {
				return psMesh(cmd.Context(), o)
			}
			if o.Instance != "" {
				return &exit.UsageError{Err: errors.New("--instance names the manager of a --mesh ps; without --mesh every manager is asked")}
			}
			return psRun(cmd.Context(), o)
		},
	}
	o.Target.Register(cmd.Flags())
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the roster as JSON")
	cmd.Flags().StringVar(&o.MeshURL, "mesh", "", "list, as yourself (`cotal login --mesh` first), the agents of your manager on the user-auth mesh whose exchange is at this URL")
	cmd.Flags().StringVar(&o.Instance, "instance", "", "with --mesh, the manager instance to ask (default: the only live one you may address)")
	return cmd
}

func psRun(ctx context.Context, o *Options) error {
	_, st, _, err := o.Mesh("")
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
	// An open mesh has no service registry, so no manager to ask.
	silent := 0
	var managers []managerLine
	if !st.Open {
		if rows, managers, silent, err = o.withProcesses(ctx, rows); err != nil {
			return err
		}
		if err := o.withSessions(ctx, rows); err != nil {
			return err
		}
	}
	if err := o.print(rows, managers); err != nil {
		return err
	}
	if silent > 0 {
		return fmt.Errorf("%d manager(s) did not answer ps: the process rows are incomplete", silent)
	}
	return nil
}

// psMesh lists, as the person logged in to --mesh, the agents of the one manager instance their
// manager-caller view addresses: one call, no roster (the view reads no presence) and no claim
// about the space's other managers. Each row's status is its process's.
func psMesh(ctx context.Context, o *Options) error {
	if err := o.CheckMesh(o.MeshURL); err != nil {
		return err
	}
	if o.Instance != "" {
		if _, err := wire.ParseLifecycleUID(o.Instance); err != nil {
			return &exit.UsageError{Err: fmt.Errorf("--instance: %w", err)}
		}
	}
	ctl, err := o.MeshControl(ctx, o.MeshURL, wire.LifecycleUID(o.Instance))
	if err != nil {
		return err
	}
	defer ctl.Close()
	agents, from, err := ctl.Manager.PsPinned(ctx)
	if err != nil {
		return factory.Refusal(fmt.Errorf("ask manager %s for its agents: %w", ctl.Manager.Pinned, err))
	}
	rows := []Row{}
	for _, a := range agents {
		rows = append(rows, Row{Principal: a.ID, Name: a.Name, Status: a.Status, Role: a.Role, Process: &a})
	}
	if len(rows) == 0 && !o.JSON {
		fmt.Fprintf(o.IO.Out, "manager %s runs no agent of yours\n", from.Instance)
		return nil
	}
	return o.print(rows, []managerLine{{instance: from.Instance, epoch: from.Epoch, agents: len(agents)}})
}

// managerLine is a manager that answered ps: its instance, the epoch it serves at, and how many
// agents it runs.
type managerLine struct {
	instance wire.LifecycleUID
	epoch    int64
	agents   int
}

func (o *Options) print(rows []Row, managers []managerLine) error {
	if o.JSON {
		if rows == nil {
			rows = []Row{}
		}
		return json.NewEncoder(o.IO.Out).Encode(rows)
	}
	if err := o.printRows(rows); err != nil {
		return err
	}
	if len(managers) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(o.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nMANAGER\tEPOCH\tAGENTS")
	for _, m := range managers {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", m.instance, m.epoch, m.agents)
	}
	return tw.Flush()
}

func (o *Options) printRows(rows []Row) error {
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
			proc = p.Status
			if p.PID != 0 {
				proc += fmt.Sprintf(" pid %d", p.PID)
			}
		}
		if n := len(r.Attached); n > 0 {
			proc += fmt.Sprintf(", %d attached", n)
		}
		// Peer-written text is made safe for the terminal: no escapes, bidi or tabs that would
		// recolour the screen or shift the columns.
		safe := termsafe.Sanitize
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", safe(r.Name), r.Principal, r.Status, dash(safe(r.Role)), dash(safe(r.Activity)), seen, proc)
	}
	return tw.Flush()
}

// withSessions fills each row's Attached from the ledger's open sessions: the caller half of each
// active session names the agent it carries and its holder.
func (o *Options) withSessions(ctx context.Context, rows []Row) error {
	l, err := o.Ledger(ctx, "")
	if err != nil {
		return err
	}
	creds, err := l.Credentials(ctx)
	if err != nil {
		return fmt.Errorf("read the open sessions: %w", err)
	}
	for _, c := range creds {
		target, ok := c.SessionTarget()
		if c.Profile != authority.ProfileSessionCaller || c.State != authstore.CredActive || !ok {
			continue
		}
		if i := slices.IndexFunc(rows, func(r Row) bool { return r.Principal == target.Principal.String() }); i >= 0 {
			rows[i].Attached = append(rows[i].Attached, c.Principal)
		}
	}
	return nil
}

// withProcesses asks every manager registered in the space for its agents (a ps scatter on the
// operator's control instrument) and adds each agent's row to its roster row, or a row of its own
// for a spawned agent not present. No manager registered leaves the rows unchanged. A manager
// that was expected but did not answer in time, answered at another epoch, or answered with an
// error is named on ErrOut; the rows hold what
// the others gave, and silent counts the managers named.
func (o *Options) withProcesses(ctx context.Context, rows []Row) (out []Row, managers []managerLine, silent int, err error) {
	ctl, err := o.Control(ctx)
	if err != nil {
		return nil, nil, 0, err
	}
	defer ctl.Close()
	g, err := ctl.Manager.Ps(ctx, ctl.Records)
	if e, ok := errors.AsType[*wire.EndpointError](err); ok && e.Code == wire.CodeFailedPrecondition {
		return rows, nil, 0, nil // no manager is registered
	} else if ok && e.Code == wire.CodeUnavailable {
		// Registered, but none answers: the registry outlived its managers (one evicted or
		// killed). The roster still stands.
		fmt.Fprintf(o.IO.ErrOut, "warning: no registered manager answered ps: %v\n", err)
		return rows, nil, 1, nil
	}
	if err != nil {
		return nil, nil, 0, factory.Refusal(fmt.Errorf("ask the managers for their agents: %w", err))
	}
	for _, in := range g.Missing {
		silent++
		fmt.Fprintf(o.IO.ErrOut, "warning: manager %s (epoch %d) did not answer ps in time\n", in.ID, in.Epoch)
	}
	for _, r := range g.Churn {
		silent++
		fmt.Fprintf(o.IO.ErrOut, "warning: manager %s answered ps at epoch %d, not the registered one: it restarted\n", r.From.Instance, r.From.Epoch)
	}
	agents, err := manager.Rows(g)
	if err != nil {
		silent++
		fmt.Fprintf(o.IO.ErrOut, "warning: %v\n", err)
	}
	for id, r := range g.Replies {
		m := managerLine{instance: id, epoch: r.From.Epoch}
		for _, a := range agents {
			if a.InstanceID == string(id) {
				m.agents++
			}
		}
		managers = append(managers, m)
	}
	slices.SortFunc(managers, func(a, b managerLine) int { return strings.Compare(string(a.instance), string(b.instance)) })
	for _, a := range agents {
		i := slices.IndexFunc(rows, func(r Row) bool { return r.Principal == a.ID })
		if i < 0 {
			rows = append(rows, Row{Principal: a.ID, Name: a.Name, Status: "offline"})
			i = len(rows) - 1
		}
		rows[i].Process = &a
	}
	return rows, managers, silent, nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
