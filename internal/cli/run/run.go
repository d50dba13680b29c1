// Package run implements `cotal run`: Cotal Lang programs, checked, simulated and planned with no
// mesh.
package run

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/lang"
)

// MaxProgram bounds a program's source read from a file.
const MaxProgram = 1 << 20

// NewCmdRun returns `cotal run` with its subcommands.
func NewCmdRun(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Check, simulate, plan and run Cotal Lang workflow programs",
		Long: "Work with Cotal Lang programs, the workflows a run executes (docs/cotal-lang.md). check,\n" +
			"sim and plan need no mesh; start, ps, journal, answer, resume, migrate and fork operate\n" +
			"runs a manager hosts on the mesh.",
	}
	cmd.AddCommand(newCmdCheck(f), newCmdSim(f), newCmdPlan(f),
		newCmdStart(f), newCmdPs(f), newCmdJournal(f), newCmdAnswer(f), newCmdResume(f), newCmdMigrate(f), newCmdFork(f), newCmdRevoke(f))
	return cmd
}

func newCmdCheck(f *factory.Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check FILE",
		Short: "Validate a program before it runs",
		Long: "Validate a Cotal Lang program: its syntax, its names and static rules, and the shape of\n" +
			"every effect call the validator can see. It prints ok and exits 0 when the program is\n" +
			"accepted; otherwise one line per refusal, FILE:LINE:COL: CODE message, and exits 1.\n" +
			"Warnings never refuse; they are printed with the word warning. --json prints\n" +
			"{\"accepted\":bool,\"diagnostics\":[{\"code\",\"line\",\"column\",\"message\"}],\"warnings\":[...]}.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := ReadProgram(args[0])
			if err != nil {
				return err
			}
			r := lang.Check(src)
			if asJSON {
				enc := json.NewEncoder(f.IO.Out)
				if err := enc.Encode(r); err != nil {
					return err
				}
			} else {
				printReport(f.IO.Out, args[0], r)
			}
			if !r.Accepted {
				return fmt.Errorf("%s is refused: %d %s", args[0], len(r.Diagnostics), plural(len(r.Diagnostics), "refusal", "refusals"))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func printReport(w io.Writer, file string, r *lang.Report) {
	for _, d := range r.Diagnostics {
		fmt.Fprintf(w, "%s:%d:%d: %s %s\n", file, d.Line, d.Column, d.Code, d.Message)
	}
	for _, d := range r.Warnings {
		fmt.Fprintf(w, "%s:%d:%d: warning %s %s\n", file, d.Line, d.Column, d.Code, d.Message)
	}
	if r.Accepted {
		fmt.Fprintln(w, "ok")
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// ReadProgram reads a program's source from path: a regular file of at most MaxProgram bytes of
// UTF-8. A problem with the file is a usage error naming it.
func ReadProgram(path string) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", &exit.UsageError{Err: fmt.Errorf("the program %w", err)}
	}
	defer fh.Close()
	if st, err := fh.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", &exit.UsageError{Err: fmt.Errorf("the program %s is not a regular file", path)}
	}
	raw, err := io.ReadAll(io.LimitReader(fh, MaxProgram+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("read the program %s: %w", path, err)
	case len(raw) > MaxProgram:
		return "", &exit.UsageError{Err: fmt.Errorf("the program %s is larger than %d bytes", path, MaxProgram)}
	case !utf8.Valid(raw):
		return "", &exit.UsageError{Err: errors.New("the program " + path + " is not UTF-8 text")}
	}
	return string(raw), nil
}
