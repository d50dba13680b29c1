// Package clidoc renders the cotal command tree as Markdown reference pages, one per command,
// into docs/cli. `go generate ./...` rewrites them; TestPagesAreCurrent fails when the tree
// changed without them.
package clidoc

//go:generate go run ./gen ../../../docs/cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/cli"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/cli/iostreams"
)

// Pages returns every page of the command tree, keyed by file name: README.md, the index, and
// one page per visible command.
func Pages() map[string][]byte {
	io, _, _, _ := iostreams.Test()
	root := cli.NewCmdRoot(factory.New(io))
	root.InitDefaultHelpCmd()
	pages := map[string][]byte{}
	var index bytes.Buffer
	index.WriteString("# Command reference\n\nEvery `cotal` command, generated from the command tree by `go generate ./...`.\n\n")
	var walk func(c *cobra.Command, depth int)
	walk = func(c *cobra.Command, depth int) {
		if !visible(c) {
			return
		}
		pages[fileName(c)] = page(c)
		fmt.Fprintf(&index, "%s- [`%s`](%s): %s\n", strings.Repeat("  ", depth), c.CommandPath(), fileName(c), c.Short)
		for _, sub := range c.Commands() {
			walk(sub, depth+1)
		}
	}
	walk(root, 0)
	pages["README.md"] = index.Bytes()
	return pages
}

// Write replaces dir's pages with the tree's: pages of commands that no longer exist are removed.
func Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return err
	}
	pages := Pages()
	for _, p := range old {
		if _, ok := pages[filepath.Base(p)]; !ok {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
	}
	for name, body := range pages {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// visible reports whether c gets a page: hidden and deprecated commands, and cobra's own
// completion and help, do not.
func visible(c *cobra.Command) bool {
	return !c.Hidden && c.Deprecated == "" && c.Name() != "completion" && c.Name() != "help"
}

// fileName is c's page: cotal_up.md, cotal_cluster_bundle.md.
func fileName(c *cobra.Command) string {
	return strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md"
}

// page renders one command: what it does, how it is called, its flags and its subcommands.
func page(c *cobra.Command) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n%s\n\n", c.CommandPath(), c.Short)
	if c.Long != "" {
		fmt.Fprintf(&b, "%s\n\n", c.Long)
	}
	if c.Runnable() {
		fmt.Fprintf(&b, "```\n%s\n```\n\n", c.UseLine())
	}
	if c.Example != "" {
		fmt.Fprintf(&b, "## Examples\n\n```\n%s\n```\n\n", strings.TrimRight(c.Example, "\n"))
	}
	if fs := c.NonInheritedFlags(); fs.HasAvailableFlags() {
		fmt.Fprintf(&b, "## Flags\n\n```\n%s```\n\n", fs.FlagUsages())
	}
	if fs := c.InheritedFlags(); fs.HasAvailableFlags() {
		fmt.Fprintf(&b, "## Flags of the parent commands\n\n```\n%s```\n\n", fs.FlagUsages())
	}
	var subs []*cobra.Command
	for _, sub := range c.Commands() {
		if visible(sub) {
			subs = append(subs, sub)
		}
	}
	if len(subs) > 0 {
		b.WriteString("## Commands\n\n")
		for _, sub := range subs {
			fmt.Fprintf(&b, "- [`%s`](%s): %s\n", sub.CommandPath(), fileName(sub), sub.Short)
		}
		b.WriteString("\n")
	}
	if p := c.Parent(); p != nil {
		fmt.Fprintf(&b, "See also [`%s`](%s).\n", p.CommandPath(), fileName(p))
	} else {
		b.WriteString("See also [the command index](README.md).\n")
	}
	return b.Bytes()
}
