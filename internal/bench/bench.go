// Package bench measures what Cotal costs over raw NATS: each case does its work through Cotal
// and, in the same run on the same broker, as raw nats.go doing the same transport work, and
// reports both with their ratio. `cotal bench` and the package's Go benchmarks run these cases.
package bench

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nuid"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/wire"
)

// Env is the mesh a run measures: its broker URL, the space, the ledger that issues the bench's
// credentials and the keyring that reads the broker's CPU.
type Env struct {
	URL     string
	Space   wire.Space
	Ledger  *ledger.Ledger
	Keyring *authority.Keyring
	// Embedded says the broker runs in this process, so its CPU figure includes the bench's
	// own clients.
	Embedded bool
}

// Embedded starts a throwaway authenticated mesh in dir (which must not hold a running mesh),
// with its delivery daemon, on a free loopback port. stop shuts it down.
func Embedded(ctx context.Context, dir string, log *slog.Logger) (env *Env, stop func(context.Context) error, err error) {
	m, err := mesh.Up(ctx, mesh.Dir{Path: dir}, mesh.Options{Port: -1, NoManager: true, Log: log})
	if err != nil {
		return nil, nil, err
	}
	st := m.State()
	return &Env{URL: st.URL, Space: st.Spaces[0], Ledger: m.Ledger(""), Keyring: m.Keyring(), Embedded: true}, m.Shutdown, nil
}

// Options tune a run.
type Options struct {
	// Duration is how long each side of a throughput case runs.
	Duration time.Duration
	// Only keeps the cases whose name is one of these or starts with one of them and "/".
	Only []string
	// Agents overrides the presence case sizes (default 1,000 and 5,000).
	Agents []int
}

// DefaultDuration is how long each side of a throughput case runs unless told otherwise.
const DefaultDuration = 5 * time.Second

// Result is one measured figure, through Cotal and, where a raw baseline exists, as raw NATS.
type Result struct {
	Name string `json:"name"`
	// Unit is the unit of Cotal and Raw: "msgs/s", "deliveries/s", "mints/s", "s" or "bytes".
	Unit  string  `json:"unit"`
	Cotal float64 `json:"cotal"`
	Raw   float64 `json:"raw,omitempty"`
	// Ratio is Cotal/Raw for a rate; zero without a baseline.
	Ratio float64 `json:"ratio,omitempty"`
	// Latency holds percentiles of a latency case, in microseconds.
	Latency *Latency `json:"latency,omitempty"`
	// Target states the goal, and Met whether the run reached it; both empty without a goal.
	Target string `json:"target,omitempty"`
	Met    *bool  `json:"met,omitempty"`
	// Note says how to read the figure.
	Note string `json:"note,omitempty"`
	// Error says why the case failed; a failed case has no figures, and the run goes on.
	Error string `json:"error,omitempty"`
}

// FailedError is Run's error when some cases failed and the others were measured.
type FailedError struct {
	// Cases names the failed cases, in the order they ran.
	Cases []string
}

// Error implements error.
func (e *FailedError) Error() string {
	return fmt.Sprintf("%d bench case(s) failed: %s", len(e.Cases), strings.Join(e.Cases, ", "))
}

// Latency holds latency percentiles in microseconds, through Cotal and raw.
type Latency struct {
	Cotal Percentiles `json:"cotal"`
	Raw   Percentiles `json:"raw"`
	// RatioP99 is Cotal's p99 over raw's.
	RatioP99 float64 `json:"ratioP99"`
}

// Percentiles are latency percentiles in microseconds.
type Percentiles struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
}

// kase is one measurement: run returns its results.
type kase struct {
	name string
	run  func(ctx context.Context, r *runner) ([]Result, error)
}

// runner carries a run's environment and options to the cases.
type runner struct {
	env  *Env
	opts Options
	log  *slog.Logger
	// tag starts the name of everything the run issues: bench_<run id>_. A run against a mesh
	// that outlives it leaves lifecycles behind, and the next run must not take them over.
	tag string
}

func newRunner(env *Env, opts Options, log *slog.Logger) *runner {
	if opts.Duration <= 0 {
		opts.Duration = DefaultDuration
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &runner{env: env, opts: opts, log: log, tag: "bench_" + runID() + "_"}
}

// runID is a short id, unique to each run with overwhelming probability.
func runID() string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(nuid.Next())) // hashing never fails
	return strconv.FormatUint(h.Sum64(), 36)
}

// name is the run's name for a principal it issues: the tag, then format.
func (r *runner) name(format string, args ...any) string {
	return r.tag + fmt.Sprintf(format, args...)
}

// cases returns every case of a run with these options, in the order they run.
func cases(opts Options) []kase {
	var cs []kase
	for _, subs := range []int{1, 10} {
		for _, size := range []int{128, 4096} {
			cs = append(cs, kase{fmt.Sprintf("multicast/1x%d/%s", subs, sizeName(size)), multicastCase(subs, size)})
		}
	}
	cs = append(cs,
		kase{"dm", dmCase},
		kase{"post/async", asyncCase},
		kase{"anycast", anycastCase},
		kase{"channel/durable", durableChannelCase},
	)
	agents := opts.Agents
	if len(agents) == 0 {
		agents = []int{1000, 5000}
	}
	for _, n := range agents {
		cs = append(cs, kase{fmt.Sprintf("presence/%d", n), presenceCase(n)})
	}
	cs = append(cs, kase{"credentials/mint", mintCase}, kase{"credentials/jwt", jwtSizeCase})
	return cs
}

// Names lists the cases a run with opts would measure, for --only.
func Names(opts Options) []string {
	var names []string
	for _, c := range cases(opts) {
		names = append(names, c.name)
	}
	return names
}

// selected returns the cases opts.Only keeps, or an error naming a filter that matches none.
func selected(opts Options) ([]kase, error) {
	all := cases(opts)
	if len(opts.Only) == 0 {
		return all, nil
	}
	var keep []kase
	for _, c := range all {
		if slices.ContainsFunc(opts.Only, func(f string) bool { return c.name == f || strings.HasPrefix(c.name, f+"/") }) {
			keep = append(keep, c)
		}
	}
	for _, f := range opts.Only {
		if !slices.ContainsFunc(all, func(c kase) bool { return c.name == f || strings.HasPrefix(c.name, f+"/") }) {
			return nil, fmt.Errorf("no bench case is named %q; the cases are %s", f, strings.Join(Names(opts), ", "))
		}
	}
	return keep, nil
}

// Run measures the selected cases on env, one after another, calling progress (if set) as each
// case starts with its place among them (i of n), and returns every result. A case that fails is
// reported as a result with its Error, and the run goes on to the next: the error is then a
// *FailedError naming them. Only ctx's end stops the run early.
func Run(ctx context.Context, env *Env, opts Options, log *slog.Logger, progress func(i, n int, name string)) ([]Result, error) {
	cs, err := selected(opts)
	if err != nil {
		return nil, err
	}
	return newRunner(env, opts, log).run(ctx, cs, progress)
}

// run measures cs in order (Run).
func (r *runner) run(ctx context.Context, cs []kase, progress func(i, n int, name string)) ([]Result, error) {
	var out []Result
	var failed []string
	for i, c := range cs {
		if progress != nil {
			progress(i+1, len(cs), c.name)
		}
		res, err := c.run(ctx, r)
		if err != nil && ctx.Err() != nil {
			return out, fmt.Errorf("bench %s: %w", c.name, err)
		}
		if err != nil {
			r.log.Warn("bench case failed", "case", c.name, "err", err)
			failed = append(failed, c.name)
			out = append(out, Result{Name: c.name, Error: err.Error()})
			continue
		}
		out = append(out, res...)
	}
	if len(failed) > 0 {
		return out, &FailedError{Cases: failed}
	}
	return out, nil
}

func sizeName(size int) string {
	if size%1024 == 0 {
		return fmt.Sprintf("%dKiB", size/1024)
	}
	return fmt.Sprintf("%dB", size)
}
