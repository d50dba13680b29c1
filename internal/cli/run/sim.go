package run

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/lang"
)

// MaxRecord bounds a recorded run or a script read from a file.
const MaxRecord = 64 << 20

// simOptions are the inputs of `cotal run sim` and `cotal run plan`.
type simOptions struct {
	RunID     string
	Seed      string
	StartedAt int64
	Journal   string
	Script    string
	JSON      bool
}

func newCmdSim(f *factory.Factory) *cobra.Command {
	o := &simOptions{}
	cmd := &cobra.Command{
		Use:   "sim FILE",
		Short: "Run a program under the simulator",
		Long: "Run a Cotal Lang program under the simulator: no agent is touched. The simulator answers\n" +
			"spawn, sleep, notify and monitor by itself and turn, ask, checkpoint and wait from a script\n" +
			"(--script, JSON: {\"turns\":{NAME:…},\"asks\":{…},\"checkpoints\":{…},\"events\":{…},\"clock\":{…}}, each\n" +
			"entry one answer, or a list of one per occurrence); an effect the script does not answer\n" +
			"fails with L6001. It prints the log lines and the outcome; --json prints the recorded run\n" +
			"({languageVersion, source, runId, seed, startedAt, pins, entries, logs, value}, and error when\n" +
			"the run failed). With --journal RECORD.json the run resumes from that record's entries\n" +
			"under its pins: recorded steps replay, the rest run live, and a divergence is refused with its\n" +
			"code. It exits 1 when the program is refused or the run fails.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, src, err := o.simulate(cmd, args[0])
			if err != nil {
				return err
			}
			if o.JSON {
				rec := recordOf(src, res)
				enc := json.NewEncoder(f.IO.Out)
				enc.SetIndent("", " ")
				if err := enc.Encode(rec); err != nil {
					return err
				}
			} else {
				printRun(f.IO.Out, res)
			}
			if res.Err != nil {
				return fmt.Errorf("the run failed: %w", res.Err)
			}
			return nil
		},
	}
	o.register(cmd)
	cmd.Flags().StringVar(&o.Journal, "journal", "", "resume from a recorded run (the JSON --json prints)")
	return cmd
}

func (o *simOptions) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&o.RunID, "run-id", "", "the run's id (default: sim, or the journal's)")
	fs.StringVar(&o.Seed, "seed", "", "the PRNG seed (default: the run id)")
	fs.Int64Var(&o.StartedAt, "started-at", 0, "the run's logical epoch, in ms since 1970 (default: the simulator's clock start)")
	fs.StringVar(&o.Script, "script", "", "the simulator's script, a JSON file")
	fs.BoolVar(&o.JSON, "json", false, "print JSON")
}

// inputs reads the program at path, the script, and the run options the flags give.
func (o *simOptions) inputs(cmd *cobra.Command, path string) (string, lang.Script, lang.RunOptions, error) {
	var script lang.Script
	ro := lang.RunOptions{RunID: o.RunID, Seed: o.Seed}
	src, err := ReadProgram(path)
	if err != nil {
		return "", script, ro, err
	}
	if o.Script != "" {
		if err := readJSON(o.Script, "the script", &script); err != nil {
			return "", script, ro, err
		}
	}
	if cmd.Flags().Changed("started-at") {
		ro.StartedAt = &o.StartedAt
	}
	return src, script, ro, nil
}

// refused reports a program the validator refused, on w, as the error that ends the command.
func refused(w io.Writer, path string, err error) error {
	r, ok := errors.AsType[*lang.RefusedError](err)
	if !ok {
		return err
	}
	printReport(w, path, r.Report)
	return fmt.Errorf("%s is refused: %d %s", path, len(r.Report.Diagnostics), plural(len(r.Report.Diagnostics), "refusal", "refusals"))
}

// simulate runs the program at path as the flags say.
func (o *simOptions) simulate(cmd *cobra.Command, path string) (*lang.Result, string, error) {
	src, script, ro, err := o.inputs(cmd, path)
	if err != nil {
		return nil, "", err
	}
	if o.Journal != "" {
		var rec lang.RecordedRun
		if err := readJSON(o.Journal, "the journal", &rec); err != nil {
			return nil, "", err
		}
		if ro.RunID == "" {
			ro.RunID = rec.RunID
		}
		ro.Pins, ro.Journal = &rec.Pins, rec.Entries
		if script.Clock.Start == 0 {
			for _, e := range rec.Entries {
				if e.EndedAt != nil && *e.EndedAt > script.Clock.Start {
					script.Clock.Start = *e.EndedAt // live steps go on where the record ended
				}
			}
		}
	}
	if ro.RunID == "" {
		ro.RunID = "sim"
	}
	h, err := lang.NewSim(script)
	if err != nil {
		return nil, "", &exit.UsageError{Err: fmt.Errorf("--script %s: %w", o.Script, err)}
	}
	ro.Handler = h
	res, err := lang.Run(cmd.Context(), src, ro)
	return res, src, refused(cmd.OutOrStdout(), path, err)
}

// readJSON decodes the JSON file at path into v, refusing unknown fields; a bad file is a usage
// error naming it.
func readJSON(path, what string, v any) error {
	fh, err := os.Open(path)
	if err != nil {
		return &exit.UsageError{Err: fmt.Errorf("%s: %w", what, err)}
	}
	defer fh.Close()
	raw, err := io.ReadAll(io.LimitReader(fh, MaxRecord+1))
	if err != nil {
		return err
	}
	if len(raw) > MaxRecord {
		return &exit.UsageError{Err: fmt.Errorf("%s %s is larger than %d bytes", what, path, MaxRecord)}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return &exit.UsageError{Err: fmt.Errorf("%s %s: %w", what, path, err)}
	}
	return nil
}

// recordOf is a run as a recorded run.
func recordOf(src string, res *lang.Result) *lang.RecordedRun {
	rec := &lang.RecordedRun{LanguageVersion: res.Pins.LanguageVersion, Source: src, RunID: res.RunID, Seed: res.Pins.Seed,
		StartedAt: res.Pins.StartedAt, Pins: res.Pins, Entries: res.Entries, Logs: []json.RawMessage{}, Value: lang.JSON(res.Value)}
	if rec.Entries == nil {
		rec.Entries = []lang.Entry{}
	}
	for _, l := range res.Logs {
		rec.Logs = append(rec.Logs, lang.JSON(&lang.Array{Elems: l}))
	}
	if res.Err != nil {
		rec.Error = lang.RunErrorOf(res.Err)
	}
	return rec
}

func printRun(w io.Writer, res *lang.Result) {
	for _, l := range res.Logs {
		var parts []string
		for _, v := range l {
			parts = append(parts, string(lang.JSON(v)))
		}
		fmt.Fprintln(w, strings.Join(parts, " "))
	}
	failed := slices.IndexFunc(res.Entries, func(e lang.Entry) bool { return e.Status != lang.StatusOK })
	fmt.Fprintf(w, "%d %s journalled", len(res.Entries), plural(len(res.Entries), "step", "steps"))
	if failed >= 0 {
		fmt.Fprintf(w, " (%s %s)", res.Entries[failed].Key(), res.Entries[failed].Status)
	}
	fmt.Fprintf(w, ", %d steps walked\n", res.Steps)
	if res.Err == nil {
		fmt.Fprintf(w, "value %s\n", lang.JSON(res.Value))
	}
}

func newCmdPlan(f *factory.Factory) *cobra.Command {
	o := &simOptions{}
	cmd := &cobra.Command{
		Use:   "plan FILE",
		Short: "Plan a program before it runs: its steps, agents and checkpoints",
		Long: "Dry-run a Cotal Lang program: run it once under the simulator (answered from --script, as\n" +
			"`cotal run sim`) and print the plan: every step in order with how it settled, the agents it\n" +
			"would spawn, the times it would ask a person, and the simulated time it takes. --json prints\n" +
			"{effects, agents, checkpoints, elapsedMs, steps, unusedScript, error?}. It exits 1 when the\n" +
			"program is refused or the simulated run fails.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, script, ro, err := o.inputs(cmd, args[0])
			if err != nil {
				return err
			}
			plan, err := lang.DryRun(cmd.Context(), src, script, ro)
			if err != nil {
				return refused(f.IO.Out, args[0], err)
			}
			if o.JSON {
				enc := json.NewEncoder(f.IO.Out)
				enc.SetIndent("", " ")
				if err := enc.Encode(plan); err != nil {
					return err
				}
			} else {
				fmt.Fprint(f.IO.Out, plan.Render())
			}
			if plan.Error != nil {
				return fmt.Errorf("the simulated run fails: %s %s", plan.Error.Code, plan.Error.Message)
			}
			return nil
		},
	}
	o.register(cmd)
	return cmd
}
