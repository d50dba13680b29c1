// Package endpoints implements `cotal endpoints`, `cotal describe` and `cotal invoke`: the
// endpoint surface of a space (SPEC §13) as the operator's control instrument sees it. endpoints
// lists the serving instances of the service registry, describe prints one endpoint's contract,
// and invoke calls one command by name, pinned to the digests a describe resolved. Each command
// runs on a one-shot control-caller-admin credential (factory.Control); none knows any endpoint's
// schemas ahead of time.
package endpoints

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/wire"
)

// LivenessDeadline bounds the describe that tells whether a registered instance answers.
const LivenessDeadline = 2 * time.Second

// ListOptions are the inputs of `cotal endpoints`.
type ListOptions struct {
	*factory.Factory
	JSON bool
}

// Instance is one line of `cotal endpoints --json`: a serving instance as the service registry
// records it, and whether it answered a describe on its own rail within LivenessDeadline. The
// field names are a stable interface.
type Instance struct {
	Endpoint string `json:"endpoint"`
	Instance string `json:"instance"`
	// Owner is the owner its spec record names; empty once the spec is deregistered.
	Owner string `json:"owner,omitempty"`
	Epoch int64  `json:"epoch"`
	// State is its status record's state (ready, exited, ...); empty when it has none yet.
	State string `json:"state"`
	Live  bool   `json:"live"`
	// Commands are the commands its describe listed, in the contract's order; empty when it did
	// not answer.
	Commands []string `json:"commands"`
}

// NewCmdEndpoints returns the `cotal endpoints` command.
func NewCmdEndpoints(f *factory.Factory) *cobra.Command {
	o := &ListOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "endpoints",
		Short: "List the endpoint instances of the space's service registry, with their commands and liveness",
		Long: "List every instance the space's service registry records (svc records): its endpoint,\n" +
			"instance id, epoch and state, and the commands a describe on its own rail lists. An\n" +
			"instance that does not answer within " + LivenessDeadline.String() + " is shown as not live. Runs on a one-shot\n" +
			"control credential; an open mesh has no registry.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return listRun(cmd.Context(), o) },
	}
	o.Target.Register(cmd.Flags())
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print one JSON array of instances")
	return cmd
}

func listRun(ctx context.Context, o *ListOptions) error {
	ctl, err := o.Control(ctx)
	if err != nil {
		return err
	}
	defer ctl.Close()
	rows, err := registry(ctx, ctl.Records)
	if err != nil {
		return err
	}
	probe(ctx, ctl.Caller(), rows)
	if o.JSON {
		if rows == nil {
			rows = []Instance{}
		}
		return json.NewEncoder(o.IO.Out).Encode(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(o.IO.Out, "no endpoint is registered")
		return nil
	}
	tw := tabwriter.NewWriter(o.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENDPOINT\tINSTANCE\tEPOCH\tSTATE\tLIVE\tCOMMANDS")
	for _, r := range rows {
		live := "no"
		if r.Live {
			live = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", r.Endpoint, r.Instance, r.Epoch, dash(r.State), live, dash(strings.Join(r.Commands, ",")))
	}
	return tw.Flush()
}

// registry reads every instance of the service registry, sorted by endpoint and instance.
func registry(ctx context.Context, kv jetstream.KeyValue) ([]Instance, error) {
	regs, err := endpoint.Registry(ctx, kv, "")
	if err != nil {
		return nil, fmt.Errorf("read the service registry: %w", err)
	}
	out := make([]Instance, 0, len(regs))
	for _, r := range regs {
		in := Instance{Endpoint: string(r.Endpoint), Instance: string(r.ID), Commands: []string{}}
		if r.Spec != nil {
			in.Owner = r.Spec.Owner
		}
		if r.Status != nil {
			in.State, in.Epoch = r.Status.State, r.Status.Epoch
		}
		out = append(out, in)
	}
	return out, nil
}

// probe describes each instance not recorded as exited on its own rail, at once, and records
// whether it answered within LivenessDeadline and the commands it listed.
func probe(ctx context.Context, c *endpoint.Caller, rows []Instance) {
	var wg sync.WaitGroup
	for i := range rows {
		r := &rows[i]
		if r.State == endpoint.StateExited {
			continue
		}
		wg.Go(func() { // owned: waited just below
			dctx, cancel := context.WithTimeout(ctx, LivenessDeadline)
			defer cancel()
			res, err := c.Describe(dctx, wire.EndpointName(r.Endpoint), wire.LifecycleUID(r.Instance))
			if err != nil {
				return
			}
			r.Live, r.Commands = true, commandNames(res)
		})
	}
	wg.Wait()
}

// commandNames returns the commands a describe resolved, in the order its clusters list them.
func commandNames(r *endpoint.Resolved) []string {
	names := []string{}
	for _, cl := range r.Answer.Descriptor.Clusters {
		for _, c := range cl.Commands {
			if _, ok := r.Commands[c]; ok && !slices.Contains(names, c) {
				names = append(names, c)
			}
		}
	}
	return names
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
