package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/runhost"
	"github.com/gocotal/cotal/internal/termsafe"
	"github.com/gocotal/cotal/lang"
	"github.com/gocotal/cotal/wire"
)

// The run commands that reach the mesh: a manager hosts the run (run-start and the rest of the
// manager's workflow-run family), and these call it as the operator's control instrument.

func newCmdStart(f *factory.Factory) *cobra.Command {
	var file string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "start --file FILE",
		Short: "Start a workflow run on the mesh",
		Long: "Hand a Cotal Lang program to a manager that hosts runs. The manager checks it, mints the\n" +
			"run's id and drives it in its own process, through every pause, until it completes or is\n" +
			"held; a manager that restarts takes its runs back. It prints the run id; --json prints\n" +
			"{\"runId\":ID}. A program the manager refuses is printed as `check` prints it, and the\n" +
			"command exits 1.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			src, err := ReadProgram(file)
			if err != nil {
				return err
			}
			return withControl(cmd.Context(), f, func(ctl *factory.Control) error {
				runID, err := ctl.Manager.RunStart(cmd.Context(), src, file)
				if err != nil {
					return refusedProgram(f.IO.Out, file, err)
				}
				if asJSON {
					return json.NewEncoder(f.IO.Out).Encode(map[string]string{"runId": runID})
				}
				fmt.Fprintf(f.IO.Out, "started run %s on the manager; it runs there until it completes or is held\n  cotal run journal %s    # follow its steps\n", runID, runID)
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the program to run (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {\"runId\":ID}")
	_ = cmd.MarkFlagRequired("file")
	f.Target.Register(cmd.Flags())
	return cmd
}

// withControl runs fn with the operator's control instrument, refusals of authority marked.
func withControl(ctx context.Context, f *factory.Factory, fn func(*factory.Control) error) error {
	ctl, err := f.Control(ctx)
	if err != nil {
		return err
	}
	defer ctl.Close()
	return factory.Refusal(fn(ctl))
}

// refusedProgram prints the language problems a bad-request refusal of a program carries, as
// `check` prints them, and returns the refusal.
func refusedProgram(w io.Writer, file string, err error) error {
	e, ok := errors.AsType[*wire.EndpointError](err)
	if !ok || e.Code != wire.CodeBadRequest {
		return err
	}
	for _, d := range e.Details {
		if d.Kind != manager.DetailLangProblem {
			continue
		}
		var code, cause string
		var where struct{ Line, Column int }
		_ = json.Unmarshal(d.Extra["code"], &code)
		_ = json.Unmarshal(d.Extra["cause"], &cause)
		_ = json.Unmarshal(d.Extra["where"], &where)
		fmt.Fprintf(w, "%s:%d:%d: %s %s\n", file, where.Line, where.Column, termsafe.Sanitize(code), termsafe.Sanitize(cause))
	}
	return err
}

func newCmdPs(f *factory.Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List the workflow runs recorded in the space",
		Long: "List the workflow runs recorded on the manager endpoint: each run's id, state (running,\n" +
			"released, completed or failed), holder, and how far its journal reached. --json prints\n" +
			"one JSON object per run, a line each: {runId, endpoint, state, holder, epoch,\n" +
			"journalHigh, forkedFrom}.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withControl(cmd.Context(), f, func(ctl *factory.Control) error {
				var rows []runhost.Row
				if err := ctl.Manager.RunPs(cmd.Context(), &rows); err != nil {
					return err
				}
				if asJSON {
					enc := json.NewEncoder(f.IO.Out)
					for _, r := range rows {
						if err := enc.Encode(r); err != nil {
							return err
						}
					}
					return nil
				}
				if len(rows) == 0 {
					fmt.Fprintf(f.IO.Out, "no workflow runs recorded in space %s\n", ctl.Space)
					return nil
				}
				tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "RUN\tENDPOINT\tSTATE\tHOLDER\tJOURNAL\tFORKED-FROM")
				for _, r := range rows {
					journal, forked := "-", "-"
					if r.JournalHigh != nil {
						journal = fmt.Sprint(*r.JournalHigh + 1)
					}
					if r.ForkedFrom != nil {
						forked = r.ForkedFrom.Run + "@" + r.ForkedFrom.Step
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.RunID, r.Endpoint, orDash(string(r.State)), orDash(r.Holder), journal, termsafe.Sanitize(forked))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per run")
	f.Target.Register(cmd.Flags())
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return termsafe.Sanitize(s)
}

func newCmdJournal(f *factory.Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "journal RUN",
		Short: "Show a workflow run's journal",
		Long: "Show a run's journal, a line per record: each activation (who took the run, at which\n" +
			"epoch), and each step written pending and then settled, with its outcome; an open\n" +
			"checkpoint shows its question (asks), a settled one the answer it took. The step keys are\n" +
			"the ones `cotal run answer` takes. --json prints one JSON object per record, a line each,\n" +
			"and the header on stderr.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := meshwire.ValidateRunID(args[0]); err != nil {
				return &exit.UsageError{Err: err}
			}
			return withControl(cmd.Context(), f, func(ctl *factory.Control) error {
				var v runhost.View
				if err := ctl.Manager.RunStatus(cmd.Context(), args[0], &v); err != nil {
					return err
				}
				header := journalHeader(&v)
				if asJSON {
					fmt.Fprintln(f.IO.ErrOut, header)
					enc := json.NewEncoder(f.IO.Out)
					for _, row := range v.Journal {
						if err := enc.Encode(row); err != nil {
							return err
						}
					}
					return nil
				}
				fmt.Fprintln(f.IO.Out, header)
				printJournal(f.IO.Out, v.Journal)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per record")
	f.Target.Register(cmd.Flags())
	return cmd
}

func journalHeader(v *runhost.View) string {
	st, err := meshwire.ParseRunStatus(v.Status)
	if len(v.Status) == 0 || err != nil {
		return fmt.Sprintf("run %s on %s: no status recorded", v.RunID, termsafe.Sanitize(v.Endpoint))
	}
	return fmt.Sprintf("run %s on %s: %s, holder %s, epoch %d", v.RunID, termsafe.Sanitize(v.Endpoint), st.State, termsafe.Sanitize(st.Holder), st.Epoch)
}

func printJournal(w io.Writer, rows []runhost.JournalRow) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "no journal records")
	}
	for _, r := range rows {
		if r.Kind == string(meshwire.JournalActivation) {
			fmt.Fprintf(w, "#%d  activation  holder=%s epoch=%d replayedTo=%d\n", r.N, termsafe.Sanitize(r.Holder), deref(r.Epoch), deref(r.ReplayedTo))
			continue
		}
		fmt.Fprintf(w, "#%d  step        %s  %s\n", r.N, termsafe.Sanitize(r.Step), termsafe.Sanitize(r.Outcome))
		if r.Asks != "" {
			fmt.Fprintf(w, "            asks        %s\n", termsafe.Sanitize(r.Asks))
		}
		if r.Addressee != "" {
			fmt.Fprintf(w, "            addressee   %s\n", termsafe.Sanitize(r.Addressee))
		}
		if a := r.Answer; a != nil {
			by, _ := json.Marshal(a.By)
			fmt.Fprintf(w, "            answered    value=%s  by=%s  at=%.0f  answerId=%q\n", termsafe.Sanitize(string(a.Value)), by, a.At, a.AnswerID)
		}
	}
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func newCmdAnswer(f *factory.Factory) *cobra.Command {
	var value string
	cmd := &cobra.Command{
		Use:   "answer RUN STEP --value JSON",
		Short: "Answer a workflow run's open checkpoint",
		Long: "Answer the checkpoint a run waits on at STEP, as `cotal run journal` prints it (for\n" +
			"example /checkpoint:approve#0), with a JSON value: --value '\"yes\"' for a string. The\n" +
			"answer is recorded on the mesh, the run takes it and goes on; the first answer given is\n" +
			"the one it takes. It prints the manager's reply: {token, answerId, settle}.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := meshwire.ValidateRunID(args[0]); err != nil {
				return &exit.UsageError{Err: err}
			}
			if !strings.HasPrefix(args[1], "/") {
				return &exit.UsageError{Err: fmt.Errorf("the step %q is not a step key: give it as the journal prints it, e.g. /checkpoint:approve#0", args[1])}
			}
			if value == "" {
				value = "null"
			}
			if !json.Valid([]byte(value)) {
				return &exit.UsageError{Err: fmt.Errorf("--value is not valid JSON: %s (a string is quoted: --value '\"yes\"')", value)}
			}
			return withControl(cmd.Context(), f, func(ctl *factory.Control) error {
				reply, err := ctl.Manager.RunAnswer(cmd.Context(), args[0], args[1], json.RawMessage(value))
				if err != nil {
					return err
				}
				enc := json.NewEncoder(f.IO.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(reply)
			})
		},
	}
	cmd.Flags().StringVar(&value, "value", "", "the answer, as JSON (null when omitted)")
	f.Target.Register(cmd.Flags())
	return cmd
}

func newCmdResume(f *factory.Factory) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "resume RUN [--file FILE]",
		Short: "Take a workflow run back from its journal",
		Long: "Ask a manager that hosts runs to take run RUN back: it replays the run's journal and drives\n" +
			"it on from where it stopped (a run held for a capable host, or one whose manager is gone).\n" +
			"With --file the run goes on under that program: the manager checks every recorded step\n" +
			"against it, and a step it changed is refused (L5001). A run this manager drives already is\n" +
			"refused, and the program is not kept.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := meshwire.ValidateRunID(args[0]); err != nil {
				return &exit.UsageError{Err: err}
			}
			var src string
			if file != "" {
				var err error
				if src, err = ReadProgram(file); err != nil {
					return err
				}
			}
			return withControl(cmd.Context(), f, func(ctl *factory.Control) error {
				if src != "" {
					if err := replaceProgram(f, args[0], src); err != nil {
						return err
					}
				}
				if err := ctl.Manager.RunResume(cmd.Context(), args[0]); err != nil {
					return err
				}
				fmt.Fprintf(f.IO.Out, "resumed run %s on the manager\n  cotal run journal %s    # follow its steps\n", args[0], args[0])
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the program to go on under (the recorded one when omitted)")
	f.Target.Register(cmd.Flags())
	return cmd
}

// replaceProgram puts src where the mesh's manager takes run runID's program from at its next
// resume; a resume the manager refuses (the run still running) discards it.
func replaceProgram(f *factory.Factory, runID, src string) error {
	d, _, sp, err := f.Mesh("")
	if err != nil {
		return err
	}
	return runhost.WriteProgram(d.WorkflowsDir(sp), runID, src)
}

// operator returns the runs' operator on the mesh the factory names: its ledger mints the
// credentials, one connection per read or fork.
func operator(ctx context.Context, f *factory.Factory) (runhost.Operator, wire.Space, error) {
	_, st, sp, err := f.Mesh("")
	if err != nil {
		return runhost.Operator{}, "", err
	}
	l, err := f.Ledger(ctx, sp)
	if err != nil {
		return runhost.Operator{}, "", err
	}
	return runhost.Operator{Space: sp, Endpoint: wire.ManagerEndpoint, Issuer: l,
		Dial: func(ctx context.Context, cred *authority.Credential) (*nats.Conn, error) {
			return dial.As(ctx, st.URL, cred)
		}}, sp, nil
}

func newCmdMigrate(f *factory.Factory) *cobra.Command {
	var file string
	var apply, asJSON bool
	cmd := &cobra.Command{
		Use:   "migrate RUN --file FILE [--apply]",
		Short: "Check whether an edited program may take a run over",
		Long: "Walk an edited program over a run's recorded journal, touching nothing: every recorded\n" +
			"step it reaches must still ask what it asked (else L5001, naming the step), and each\n" +
			"recorded step it no longer reaches is judged by the orphan table (ignored, kept, or\n" +
			"rejected with its code). It prints the report and exits 1 when the migration is\n" +
			"rejected; --json prints it as JSON. With --apply an accepted migration is carried out:\n" +
			"the manager takes the run back under the edited program.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := meshwire.ValidateRunID(args[0]); err != nil {
				return &exit.UsageError{Err: err}
			}
			src, err := ReadProgram(file)
			if err != nil {
				return err
			}
			op, _, err := operator(cmd.Context(), f)
			if err != nil {
				return err
			}
			rec, err := op.Recorded(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			m, err := lang.Migrate(cmd.Context(), src, rec, lang.MigrateOptions{})
			if err != nil {
				return err
			}
			if asJSON {
				if err := json.NewEncoder(f.IO.Out).Encode(m); err != nil {
					return err
				}
			} else {
				printMigration(f.IO.Out, args[0], m)
			}
			if !m.Accepted {
				return fmt.Errorf("the migration of run %s is rejected", args[0])
			}
			if !apply {
				return nil
			}
			if err := replaceProgram(f, args[0], src); err != nil {
				return err
			}
			return withControl(cmd.Context(), f, func(ctl *factory.Control) error {
				if err := ctl.Manager.RunResume(cmd.Context(), args[0]); err != nil {
					return err
				}
				fmt.Fprintf(f.IO.ErrOut, "run %s goes on under %s\n", args[0], file)
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the edited program (required)")
	cmd.Flags().BoolVar(&apply, "apply", false, "carry an accepted migration out")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	_ = cmd.MarkFlagRequired("file")
	f.Target.Register(cmd.Flags())
	return cmd
}

func printMigration(w io.Writer, runID string, m *lang.Migration) {
	verdict := "accepted"
	if !m.Accepted {
		verdict = "rejected"
	}
	fmt.Fprintf(w, "migration of run %s: %s (%d recorded steps reached)\n", runID, verdict, len(m.Reached))
	for _, r := range m.Rejections {
		fmt.Fprintf(w, "  rejected  %s  %s %s\n", termsafe.Sanitize(r.Step), r.Code, termsafe.Sanitize(r.Message))
	}
	for _, o := range m.Orphans {
		fmt.Fprintf(w, "  orphan    %s  %s %s\n", termsafe.Sanitize(o.Step), o.Verdict, o.Code)
	}
}

func newCmdFork(f *factory.Factory) *cobra.Command {
	var at, file string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "fork RUN --at STEP [--file FILE]",
		Short: "Start a new run from a run's journal, cut before a step",
		Long: "Start a new run whose journal is RUN's up to, and excluding, STEP (its key, as the\n" +
			"journal prints it), under RUN's pins, seed included; its record names RUN and STEP as its\n" +
			"lineage. The manager drives it from there, under RUN's program or --file's. It prints the\n" +
			"new run's id; --json prints {\"runId\":ID}. A step not in the journal is L5017, one the\n" +
			"program never reaches L5018, one inside a race's losing arm L5020.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := meshwire.ValidateRunID(args[0]); err != nil {
				return &exit.UsageError{Err: err}
			}
			if !strings.HasPrefix(at, "/") {
				return &exit.UsageError{Err: fmt.Errorf("--at %q is not a step key: give it as the journal prints it, e.g. /turn:review#0", at)}
			}
			op, sp, err := operator(cmd.Context(), f)
			if err != nil {
				return err
			}
			src, err := forkSource(f, sp, args[0], file)
			if err != nil {
				return err
			}
			parent, err := op.Recorded(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			child, err := op.Fork(cmd.Context(), src, parent, at)
			if err != nil {
				return err
			}
			if err := replaceProgram(f, child, src); err != nil {
				return err
			}
			return withControl(cmd.Context(), f, func(ctl *factory.Control) error {
				if err := ctl.Manager.RunResume(cmd.Context(), child); err != nil {
					return err
				}
				if asJSON {
					return json.NewEncoder(f.IO.Out).Encode(map[string]string{"runId": child})
				}
				fmt.Fprintf(f.IO.Out, "forked run %s from %s at %s\n  cotal run journal %s    # follow its steps\n", child, args[0], termsafe.Sanitize(at), child)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&at, "at", "", "the step the fork is cut before, as the journal prints it (required)")
	cmd.Flags().StringVarP(&file, "file", "f", "", "the program the new run goes on under (RUN's when omitted)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {\"runId\":ID}")
	_ = cmd.MarkFlagRequired("at")
	f.Target.Register(cmd.Flags())
	return cmd
}

// forkSource is the program a fork goes on under: file's, else the parent's, as the mesh's
// manager keeps it.
func forkSource(f *factory.Factory, sp wire.Space, parent, file string) (string, error) {
	if file != "" {
		return ReadProgram(file)
	}
	d, _, _, err := f.Mesh("")
	if err != nil {
		return "", err
	}
	raw, err := os.ReadFile(filepath.Join(d.WorkflowsDir(sp), parent+".cotal.js"))
	if err != nil {
		return "", fmt.Errorf("run %s's program is not kept here: give it with --file (%w)", parent, err)
	}
	return string(raw), nil
}

// defaultRevokeReason is the reason a revocation records when none is given.
const defaultRevokeReason = "revoked by the operator, no reason given"

func newCmdRevoke(f *factory.Factory) *cobra.Command {
	var by, reason string
	cmd := &cobra.Command{
		Use:   "revoke RUN [--reason TEXT] [--by WHO]",
		Short: "Revoke a run: stop it, and let no host take it back",
		Long: "Record RUN's revocation marker, create-only and permanent: from then on the run performs\n" +
			"no channel effect, the manager that drives it stops it within a few seconds (its state\n" +
			"becomes failed, naming who revoked it and why), and no manager resumes or takes it over.\n" +
			"Revoking a run that is revoked already keeps the first marker. --reason says why (the\n" +
			"marker records \"" + defaultRevokeReason + "\" when omitted); --by names who\n" +
			"revokes it (your login name when omitted).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := meshwire.ValidateRunID(args[0]); err != nil {
				return &exit.UsageError{Err: err}
			}
			if !cmd.Flags().Changed("reason") {
				reason = defaultRevokeReason
			} else if strings.TrimSpace(reason) == "" {
				return &exit.UsageError{Err: errors.New("--reason is empty: say why the run is revoked, or leave the flag out")}
			}
			if by == "" {
				by = "operator"
				if u, err := user.Current(); err == nil && u.Username != "" {
					by = u.Username
				}
			}
			op, _, err := operator(cmd.Context(), f)
			if err != nil {
				return err
			}
			if err := op.Exists(cmd.Context(), args[0]); err != nil {
				return err
			}
			if err := op.Revoke(cmd.Context(), args[0], by, reason); err != nil {
				return err
			}
			fmt.Fprintf(f.IO.Out, "revoked run %s\n", args[0])
			return nil
		},
	}
	f.Target.Register(cmd.Flags())
	cmd.Flags().StringVar(&reason, "reason", "", "why the run is revoked")
	cmd.Flags().StringVar(&by, "by", "", "who revokes it")
	return cmd
}
