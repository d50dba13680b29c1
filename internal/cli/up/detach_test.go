package up

import (
	"context"
	"testing"

	"github.com/spf13/pflag"

	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/cli/iostreams"
)

// odd returns a value for f unlike its default, of its type.
func odd(t *testing.T, f *pflag.Flag) []string {
	switch f.Value.Type() {
	case "bool":
		return []string{"true"}
	case "int":
		return []string{"7"}
	case "string":
		return []string{"some value"}
	case "duration":
		return []string{"2h30m0s"}
	case "stringSlice":
		return []string{"a", "b,c"}
	}
	t.Fatalf("--%s: no test value for a %s flag", f.Name, f.Value.Type())
	return nil
}

// TestDetachPassesEveryFlag: every `up` flag given on the command line, of every type, reaches the
// detached process's command line, and parses there to the same value; --detach and --dir do not
// (the child is given the directory found).
func TestDetachPassesEveryFlag(t *testing.T) {
	io, _, _, _ := iostreams.Test()
	var given *Options
	cmd := NewCmdUp(factory.New(io), func(_ context.Context, o *Options) error { given = o; return nil })
	var args []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return
		}
		for _, v := range odd(t, f) {
			args = append(args, "--"+f.Name+"="+v)
		}
	})
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	child := NewCmdUp(factory.New(io), nil)
	if err := child.ParseFlags(given.setFlags); err != nil {
		t.Fatalf("the detached command line %q: %v", given.setFlags, err)
	}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		c := child.Flags().Lookup(f.Name)
		switch {
		case f.Name == "help":
		case f.Name == "detach" || f.Name == "dir":
			if c.Changed {
				t.Errorf("--%s was passed to the detached process", f.Name)
			}
		case !c.Changed:
			t.Errorf("--%s did not reach the detached process", f.Name)
		case c.Value.String() != f.Value.String():
			t.Errorf("--%s reached the detached process as %s, given %s", f.Name, c.Value, f.Value)
		}
	})
}
