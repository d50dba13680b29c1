// Package personas implements `cotal personas list|show|new|edit|rm`: the mesh directory's agent
// files (.cotal/agents/<name>.md), read and written as files, with no broker.
package personas

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/persona"
)

// Options are the inputs of `cotal personas`.
type Options struct {
	*factory.Factory
	JSON    bool
	Verbose bool
	// The fields `new` writes.
	Role, Model, Agent, Description, Prompt, From string
	Subscribe, AllowSubscribe, AllowPublish       []string
	Force                                         bool
}

// Summary is one persona of `cotal personas list --json`; the field names are a stable interface.
type Summary struct {
	Name        string   `json:"name"`
	Role        string   `json:"role,omitempty"`
	Agent       string   `json:"agent,omitempty"`
	Model       string   `json:"model,omitempty"`
	Description string   `json:"description,omitempty"`
	Subscribe   []string `json:"subscribe"`
	Path        string   `json:"path"`
}

// Detail is `cotal personas show --json`: the summary's fields and the rest of the file.
type Detail struct {
	Summary
	Variant        string            `json:"variant,omitempty"`
	AllowSubscribe []string          `json:"allowSubscribe"`
	AllowPublish   []string          `json:"allowPublish"`
	Capabilities   []string          `json:"capabilities,omitempty"`
	Tags           []string          `json:"tags,omitempty"`
	Meta           map[string]string `json:"meta,omitempty"`
	Persona        string            `json:"persona"`
}

// NewCmdPersonas returns `cotal personas` with its subcommands.
func NewCmdPersonas(f *factory.Factory) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "personas",
		Short: "List, show, write and remove the agent files of .cotal/agents",
		Long: "An agent file, .cotal/agents/NAME.md, is an agent's persona: YAML front matter naming its role,\n" +
			"harness, model and channel grants, and a Markdown body that becomes its instructions. `cotal\n" +
			"spawn NAME` starts an agent from it. These commands read and write the files of the mesh\n" +
			"directory; they need no running mesh.",
	}
	o.Target.Register(cmd.PersistentFlags())
	list := &cobra.Command{Use: "list", Short: "List the personas", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return listRun(o) }}
	list.Flags().BoolVar(&o.JSON, "json", false, "print the list as JSON")
	list.Flags().BoolVarP(&o.Verbose, "verbose", "v", false, "include role, harness, model and description")
	show := &cobra.Command{Use: "show NAME", Short: "Print a persona's file", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error { return showRun(o, args[0]) }}
	show.Flags().BoolVar(&o.JSON, "json", false, "print the persona as JSON")
	newCmd := &cobra.Command{Use: "new NAME", Short: "Write a new persona's file", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error { return newRun(o, args[0]) }}
	nf := newCmd.Flags()
	nf.StringVar(&o.Role, "role", "", "its role, to receive anycast tasks")
	nf.StringVar(&o.Agent, "agent", "", "the harness it runs on (claude, codex, opencode, cotal)")
	nf.StringVar(&o.Model, "model", "", "the model its harness uses")
	nf.StringVar(&o.Description, "description", "", "one line about it")
	nf.StringVar(&o.Prompt, "prompt", "", "its instructions, the file's body")
	nf.StringVar(&o.From, "from", "", "read its instructions from this file (- for standard input)")
	nf.StringSliceVar(&o.Subscribe, "subscribe", nil, "channels it joins (default: none; it is still reachable by DM and anycast)")
	nf.StringSliceVar(&o.AllowSubscribe, "allow-subscribe", nil, "channels it may read (default: --subscribe)")
	nf.StringSliceVar(&o.AllowPublish, "allow-publish", nil, "channels it may post to (default: none)")
	nf.BoolVar(&o.Force, "force", false, "replace an existing file")
	edit := &cobra.Command{Use: "edit NAME", Short: "Open a persona's file in $VISUAL or $EDITOR, and check it after", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error { return editRun(o, args[0]) }}
	rm := &cobra.Command{Use: "rm NAME", Short: "Remove a persona's file", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error { return rmRun(o, args[0]) }}
	cmd.AddCommand(list, show, newCmd, edit, rm)
	return cmd
}

// dir returns the agent files' directory of the mesh directory Target names.
func (o *Options) dir() (string, error) {
	d, err := mesh.FindDir(o.Target.Dir, ".")
	if err != nil {
		return "", err
	}
	return persona.Dir(d.Path), nil
}

// load reads the persona name, a missing one named as such.
func (o *Options) load(name string) (*persona.File, string, error) {
	dir, err := o.dir()
	if err != nil {
		return nil, "", err
	}
	path, err := persona.Path(dir, name)
	if err != nil {
		return nil, "", &exit.UsageError{Err: err}
	}
	f, err := persona.Load(dir, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("no persona %s: %s does not exist (`cotal personas new %s` writes one)", name, path, name)
	}
	return f, path, err
}

func summary(f *persona.File, path string) Summary {
	sub := f.Subscribe
	if sub == nil {
		sub = []string{}
	}
	return Summary{Name: f.Name, Role: f.Role, Agent: f.Agent, Model: f.Model, Description: f.Description, Subscribe: sub, Path: path}
}

func listRun(o *Options) error {
	dir, err := o.dir()
	if err != nil {
		return err
	}
	files, err := persona.List(dir)
	if err != nil {
		// The files that read are still listed; the broken ones are named.
		fmt.Fprintf(o.IO.ErrOut, "cotal personas: %v\n", err)
	}
	out := make([]Summary, 0, len(files))
	for _, f := range files {
		path, _ := persona.Path(dir, f.Name) // listed files have valid names
		out = append(out, summary(f, path))
	}
	if o.JSON {
		return json.NewEncoder(o.IO.Out).Encode(out)
	}
	if len(out) == 0 {
		fmt.Fprintf(o.IO.Out, "no personas in %s (`cotal personas new NAME` writes one)\n", dir)
		return nil
	}
	if !o.Verbose {
		for _, s := range out {
			fmt.Fprintln(o.IO.Out, s.Name)
		}
		return nil
	}
	tw := tabwriter.NewWriter(o.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tAGENT\tMODEL\tDESCRIPTION")
	for _, s := range out {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, dash(s.Role), dash(s.Agent), dash(s.Model), dash(s.Description))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func showRun(o *Options, name string) error {
	f, path, err := o.load(name)
	if err != nil {
		return err
	}
	if !o.JSON {
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		_, err = o.IO.Out.Write(raw)
		return err
	}
	return json.NewEncoder(o.IO.Out).Encode(Detail{
		Summary: summary(f, path), Variant: f.Variant, AllowSubscribe: orEmpty(f.ReadACL()), AllowPublish: orEmpty(f.AllowPublish),
		Capabilities: f.Capabilities, Tags: f.Tags, Meta: f.Meta, Persona: f.Persona,
	})
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// template is the body of a persona written without --prompt or --from.
const template = "Describe what %s does and how it works with its peers: what it reads, what it posts,\nwhom it asks, and when it is done."

func newRun(o *Options, name string) error {
	dir, err := o.dir()
	if err != nil {
		return err
	}
	if o.Prompt != "" && o.From != "" {
		return &exit.UsageError{Err: errors.New("--prompt and --from both give the instructions: pass one")}
	}
	body := fmt.Sprintf(template, name)
	switch {
	case o.Prompt != "":
		body = o.Prompt
	case o.From == "-":
		raw, err := io.ReadAll(io.LimitReader(o.IO.In, 1<<20))
		if err != nil {
			return err
		}
		body = string(raw)
	case o.From != "":
		raw, err := os.ReadFile(o.From)
		if err != nil {
			return &exit.UsageError{Err: fmt.Errorf("--from: %w", err)}
		}
		body = string(raw)
	}
	f := &persona.File{
		Name: name, Role: o.Role, Agent: o.Agent, Model: o.Model, Description: o.Description,
		Subscribe: orEmpty(o.Subscribe), AllowSubscribe: o.AllowSubscribe, AllowPublish: orEmpty(o.AllowPublish),
		Persona: strings.TrimSpace(body),
	}
	path, err := persona.Save(dir, f, !o.Force)
	if _, invalid := errors.AsType[*persona.Error](err); invalid || path == "" && err != nil {
		return &exit.UsageError{Err: err}
	}
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("persona %s exists (%s): edit it, or pass --force to replace it", name, path)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(o.IO.Out, "wrote %s\n", path)
	return nil
}

func editRun(o *Options, name string) error {
	_, path, err := o.load(name)
	if err != nil {
		return err
	}
	editor := os.Getenv("VISUAL")
	if editor == "" {
		editor = os.Getenv("EDITOR")
	}
	if editor == "" {
		return errors.New("no editor: set $VISUAL or $EDITOR, or edit " + path + " yourself")
	}
	fields := strings.Fields(editor)
	cmd := exec.Command(fields[0], append(fields[1:], path)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.IO.In, o.IO.Out, o.IO.ErrOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", editor, err)
	}
	if _, err := persona.Load(filepath.Dir(path), name); err != nil {
		return fmt.Errorf("the file no longer reads as a persona (fix it with `cotal personas edit %s`): %w", name, err)
	}
	return nil
}

// rmRun removes the persona's file, whether or not it still reads.
func rmRun(o *Options, name string) error {
	dir, err := o.dir()
	if err != nil {
		return err
	}
	path, err := persona.Path(dir, name)
	if err != nil {
		return &exit.UsageError{Err: err}
	}
	if err := os.Remove(path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no persona %s: %s does not exist", name, path)
	} else if err != nil {
		return err
	}
	fmt.Fprintf(o.IO.Out, "removed %s\n", path)
	return nil
}
