// Package bench implements `cotal bench`: what Cotal costs over raw NATS, measured side by side.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/bench"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/wire"
)

// Bounds of the flags.
const (
	// maxDuration keeps a case within the life of the ledger credential the issuance case holds
	// (authority.OneShotLifetime).
	maxDuration = 2 * time.Minute
	// maxAgents bounds a presence case: each agent is a connection of this process.
	maxAgents = 20000
	// stopWait bounds the throwaway mesh's shutdown.
	stopWait = 30 * time.Second
)

// Options are the inputs of `cotal bench`.
type Options struct {
	IO       *iostreams.IOStreams
	Server   string
	Dir      string
	Space    string
	Duration time.Duration
	JSON     bool
	// HTML is a file to write the results to as a page of bar charts.
	HTML   string
	Only   []string
	Agents []int
	// CPUProfile is a file to write a pprof CPU profile of the run to.
	CPUProfile string
}

// NewCmdBench returns `cotal bench`.
func NewCmdBench(f *factory.Factory) *cobra.Command {
	o := &Options{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure what Cotal costs over raw NATS, side by side",
		Long: "bench runs each Cotal path and, in the same run on the same broker, raw nats.go doing the\n" +
			"same transport work, and reports both with their ratio: live multicast, durable DM (with\n" +
			"latency percentiles), anycast, a durable channel through the delivery daemon, presence\n" +
			"convergence, and credential issuance and size.\n\n" +
			"By default it starts a throwaway authenticated mesh in a temporary directory. --server\n" +
			"benches the broker at that URL instead, with the authority of the mesh directory (--dir):\n" +
			"it issues thousands of agents there, named bench_<run id>_*: their credentials expire within\n" +
			"the hour, their lifecycle rows stay in the ledger.\n\n" +
			"Cases: " + strings.Join(bench.Names(bench.Options{}), ", ") + ".",
		Example: "  cotal bench\n  cotal bench --only multicast,dm --duration 10s\n  cotal bench --json > bench.json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return &exit.UsageError{Err: err}
			}
			return run(cmd.Context(), o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Server, "server", "", "bench the broker at this URL, with the mesh directory's authority (default: a throwaway embedded mesh)")
	fs.StringVar(&o.Dir, "dir", "", "with --server: the mesh directory holding the keys (default: the nearest .cotal)")
	fs.StringVar(&o.Space, "space", "", "with --server: the space (default: the mesh's first, or main)")
	fs.DurationVar(&o.Duration, "duration", bench.DefaultDuration, "how long each side of a throughput case runs")
	fs.BoolVar(&o.JSON, "json", false, "print the results as JSON")
	fs.StringVar(&o.HTML, "html", "", "also write the results to this file as a page of bar charts, Cotal beside raw NATS")
	fs.StringSliceVar(&o.Only, "only", nil, "run only these cases, by name or name prefix (repeatable, comma-separated)")
	fs.IntSliceVar(&o.Agents, "agents", []int{1000, 5000}, "the presence cases' roster sizes")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a pprof CPU profile of the run (the embedded broker included) to this file")
	return cmd
}

func (o *Options) validate() error {
	if o.Duration <= 0 || o.Duration > maxDuration {
		return fmt.Errorf("--duration %s: must be above 0 and at most %s", o.Duration, maxDuration)
	}
	for _, n := range o.Agents {
		if n < 1 || n > maxAgents {
			return fmt.Errorf("--agents %d: each roster size must be 1 to %d", n, maxAgents)
		}
	}
	if o.Server == "" && (o.Dir != "" || o.Space != "") {
		return errors.New("--dir and --space choose the mesh of --server; the default throwaway mesh needs neither")
	}
	if o.Space != "" {
		if _, err := wire.ParseSpace(o.Space); err != nil {
			return fmt.Errorf("--space: %w", err)
		}
	}
	opts := o.options()
	if len(o.Only) > 0 {
		names := bench.Names(opts)
		for _, f := range o.Only {
			if !matchesAny(f, names) {
				return fmt.Errorf("--only %q: no such case; the cases are %s", f, strings.Join(names, ", "))
			}
		}
	}
	return nil
}

func matchesAny(filter string, names []string) bool {
	for _, n := range names {
		if n == filter || strings.HasPrefix(n, filter+"/") {
			return true
		}
	}
	return false
}

func (o *Options) options() bench.Options {
	return bench.Options{Duration: o.Duration, Only: o.Only, Agents: o.Agents}
}

func run(ctx context.Context, o *Options) (err error) {
	env, stop, err := o.env(ctx)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopWait)
		defer cancel()
		err = errors.Join(err, stop(sctx))
	}()
	if o.CPUProfile != "" {
		stopProfile, err := startProfile(o.CPUProfile)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stopProfile()) }()
	}
	progress := func(i, n int, name string) { fmt.Fprintf(o.IO.ErrOut, "[%d/%d] bench %s ...\n", i, n, name) }
	res, err := bench.Run(ctx, env, o.options(), nil, progress)
	if o.HTML != "" {
		if werr := o.writeHTMLFile(env, res); werr != nil {
			return errors.Join(err, werr)
		}
	}
	if o.JSON {
		if werr := writeJSON(o.IO.Out, env, o.Duration, res); werr != nil {
			return errors.Join(err, werr)
		}
	} else {
		writeTable(o.IO.Out, res)
	}
	return err
}

// startProfile starts a CPU profile written to path; stop ends it and closes the file.
func startProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(fmt.Errorf("--cpuprofile: %w", err), f.Close())
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// env returns the mesh to bench: the broker of --server, or a throwaway embedded mesh.
func (o *Options) env(ctx context.Context) (*bench.Env, func(context.Context) error, error) {
	if o.Server == "" {
		dir, err := os.MkdirTemp("", "cotal-bench-")
		if err != nil {
			return nil, nil, err
		}
		env, stop, err := bench.Embedded(ctx, filepath.Join(dir, mesh.DirName), nil)
		if err != nil {
			return nil, nil, errors.Join(err, os.RemoveAll(dir))
		}
		return env, func(ctx context.Context) error { return errors.Join(stop(ctx), os.RemoveAll(dir)) }, nil
	}
	d, err := mesh.FindDir(o.Dir, ".")
	if err != nil {
		return nil, nil, err
	}
	sp := mesh.DefaultSpace
	if st, err := d.ReadState(); err == nil {
		if sp, err = st.SpaceOf(o.Space); err != nil {
			return nil, nil, &exit.UsageError{Err: err}
		}
	} else if o.Space != "" {
		sp = wire.Space(o.Space)
	}
	kr, err := d.OpenKeyring()
	if err != nil {
		return nil, nil, err
	}
	l, err := ledger.Open(ctx, o.Server, kr, sp)
	if err != nil {
		return nil, nil, err
	}
	return &bench.Env{URL: o.Server, Space: sp, Ledger: l, Keyring: kr}, func(context.Context) error { l.Close(); return nil }, nil
}

// writeHTMLFile writes the --html page.
func (o *Options) writeHTMLFile(env *bench.Env, res []bench.Result) error {
	f, err := os.Create(o.HTML)
	if err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	err = writeHTML(f, brokerOf(env), o.Duration, res)
	return errors.Join(err, f.Close())
}

// brokerOf names the benched broker: its URL, or "embedded".
func brokerOf(env *bench.Env) string {
	if env.Embedded {
		return "embedded"
	}
	return env.URL
}

// report is the JSON output: what was measured, where, and the results.
type report struct {
	Time     time.Time      `json:"time"`
	Broker   string         `json:"broker"`
	Space    wire.Space     `json:"space"`
	Duration string         `json:"duration"`
	Results  []bench.Result `json:"results"`
}

func writeJSON(w io.Writer, env *bench.Env, d time.Duration, res []bench.Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(report{Time: time.Now().UTC().Truncate(time.Second), Broker: brokerOf(env), Space: env.Space, Duration: d.String(), Results: res})
}

func writeTable(w io.Writer, res []bench.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tCOTAL\tRAW\tRATIO\tUNIT\tTARGET\t")
	for _, r := range res {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\tFAILED\t-\t-\t-\t-\t\n", r.Name)
			continue
		}
		raw, ratio := "-", "-"
		if r.Raw > 0 {
			raw, ratio = figure(r.Raw), fmt.Sprintf("%.2f", r.Ratio)
		}
		target := r.Target
		if r.Met != nil {
			target += map[bool]string{true: " met", false: " MISSED"}[*r.Met]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Name, figure(r.Cotal), raw, ratio, r.Unit, target)
	}
	_ = tw.Flush() // w is the command's output; a failed write has nowhere to be reported
	fmt.Fprintln(w)
	for _, r := range res {
		if r.Latency != nil {
			fmt.Fprintf(w, "%s latency µs: cotal p50 %.0f p99 %.0f p99.9 %.0f; raw p50 %.0f p99 %.0f p99.9 %.0f\n", r.Name,
				r.Latency.Cotal.P50, r.Latency.Cotal.P99, r.Latency.Cotal.P999, r.Latency.Raw.P50, r.Latency.Raw.P99, r.Latency.Raw.P999)
		}
	}
	for _, r := range res {
		if r.Note != "" {
			fmt.Fprintf(w, "%s: %s\n", r.Name, r.Note)
		}
	}
	for _, r := range res {
		if r.Error != "" {
			fmt.Fprintf(w, "%s FAILED: %s\n", r.Name, r.Error)
		}
	}
}

// figure formats a figure for the table: whole numbers from 100 up, three significant digits
// below.
func figure(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}
