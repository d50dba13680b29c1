package endpoints

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/wire"
)

// DescribeOptions are the inputs of `cotal describe`.
type DescribeOptions struct {
	*factory.Factory
	Endpoint string
	Instance string
	JSON     bool
}

// NewCmdDescribe returns the `cotal describe` command.
func NewCmdDescribe(f *factory.Factory) *cobra.Command {
	o := &DescribeOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "describe ENDPOINT",
		Short: "Print an endpoint's descriptor and the contract of each of its commands",
		Long: "Call describe on ENDPOINT (the class rail: whichever instance answers; --instance pins\n" +
			"one) and print its descriptor: owner, discovery protocol and clusters, then each command\n" +
			"with its class, targeting, authorization modes, capability and the input and output\n" +
			"digests a call pins. --json prints describe's answer as it came.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Endpoint = args[0]
			return describeRun(cmd.Context(), o)
		},
	}
	o.Target.Register(cmd.Flags())
	cmd.Flags().StringVar(&o.Instance, "instance", "", "describe this instance (its whole id, as cotal endpoints prints it) on its own rail")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print describe's answer as JSON")
	return cmd
}

// parseEndpoint returns the ENDPOINT argument and the --instance flag, or a usage error.
func parseEndpoint(name, instance string) (wire.EndpointName, wire.LifecycleUID, error) {
	ep, err := wire.ParseEndpointName(name)
	if err != nil {
		return "", "", &exit.UsageError{Err: fmt.Errorf("ENDPOINT: %w", err)}
	}
	if instance == "" {
		return ep, "", nil
	}
	id, err := wire.ParseLifecycleUID(instance)
	if err != nil {
		return "", "", &exit.UsageError{Err: fmt.Errorf("--instance: %w", err)}
	}
	return ep, id, nil
}

func describeRun(ctx context.Context, o *DescribeOptions) error {
	ep, inst, err := parseEndpoint(o.Endpoint, o.Instance)
	if err != nil {
		return err
	}
	ctl, err := o.Control(ctx)
	if err != nil {
		return err
	}
	defer ctl.Close()
	r, err := ctl.Caller().Describe(ctx, ep, inst)
	if err != nil {
		return factory.Refusal(fmt.Errorf("describe %s: %w", ep, err))
	}
	if o.JSON {
		return json.NewEncoder(o.IO.Out).Encode(r.Answer)
	}
	return printDescriptor(o, r)
}

func printDescriptor(o *DescribeOptions, r *endpoint.Resolved) error {
	d := r.Answer.Descriptor
	out := o.IO.Out
	fmt.Fprintf(out, "endpoint %s (owner %s), discovery protocol v%d\n", d.Endpoint, d.Owner, d.Protocol.V)
	if d.EndpointType != "" {
		fmt.Fprintf(out, "type: %s\n", d.EndpointType)
	}
	fmt.Fprintf(out, "answered by instance %s at epoch %d\n", r.From.Instance, r.From.Epoch)
	for _, cl := range d.Clusters {
		fmt.Fprintf(out, "cluster %s: %s\n", cl.Digest, strings.Join(cl.Commands, ", "))
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMMAND\tCLASS\tTARGETED\tMODES\tCAPABILITY\tINPUT DIGEST\tOUTPUT DIGEST")
	for _, name := range commandNames(r) {
		c := r.Commands[name]
		targeted, modes := "no", "-"
		if c.Targeted {
			targeted = "yes"
		}
		if len(c.Modes) > 0 {
			ms := make([]string, len(c.Modes))
			for i, m := range c.Modes {
				ms[i] = string(m)
			}
			modes = strings.Join(ms, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Name, c.Class, targeted, modes, dash(c.Capability), c.InputDigest, c.OutputDigest)
	}
	return tw.Flush()
}
