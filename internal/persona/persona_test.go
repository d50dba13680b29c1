package persona

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const dave = `---
name: dave
role: builder
description: "builds: carefully"
tags: [edit, test]
subscribe: [general, team.backend]
allowSubscribe: [general, team.>]
allowPublish: [general]
quiet: [team.backend]
model: opus
variant: high
agent: claude
capabilities: [spawn]
launchOptions:
  permission-mode: plan
theme: dark
---
You are a builder on a shared mesh.

Coordinate on #general.
`

func TestParse(t *testing.T) {
	f, err := Parse("dave.md", []byte(dave))
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "dave" || f.Role != "builder" || f.Description != "builds: carefully" || f.Model != "opus" || f.Variant != "high" || f.Agent != "claude" {
		t.Errorf("scalars: %+v", f)
	}
	if !slices.Equal(f.Subscribe, []string{"general", "team.backend"}) || !slices.Equal(f.ReadACL(), []string{"general", "team.>"}) || !slices.Equal(f.AllowPublish, []string{"general"}) {
		t.Errorf("grants: %q %q %q", f.Subscribe, f.AllowSubscribe, f.AllowPublish)
	}
	if f.Meta["theme"] != "dark" || f.LaunchOptions["permission-mode"] != "plan" || !slices.Equal(f.Capabilities, []string{"spawn"}) {
		t.Errorf("meta %v, launch options %v, capabilities %q", f.Meta, f.LaunchOptions, f.Capabilities)
	}
	if f.Persona != "You are a builder on a shared mesh.\n\nCoordinate on #general." {
		t.Errorf("persona %q", f.Persona)
	}
	// What Marshal writes reads back the same.
	raw, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("dave.md", raw)
	if err != nil {
		t.Fatalf("%v\n%s", err, raw)
	}
	if back.Name != f.Name || !slices.Equal(back.Subscribe, f.Subscribe) || !slices.Equal(back.AllowSubscribe, f.AllowSubscribe) ||
		back.Persona != f.Persona || back.Meta["theme"] != "dark" || back.LaunchOptions["permission-mode"] != "plan" {
		t.Errorf("round trip:\n%s\nread back %+v", raw, back)
	}
	// Omitted grants: no channels, read = subscribe, post nothing; a declared [] is written back.
	min, err := Parse("min.md", []byte("---\nname: min\n---\n"))
	if err != nil || min.Subscribe != nil || min.AllowPublish != nil || len(min.ReadACL()) != 0 {
		t.Fatalf("a minimal file: %+v, %v", min, err)
	}
	raw, _ = min.Marshal()
	if !strings.Contains(string(raw), "subscribe: []") {
		t.Errorf("a file with no subscriptions does not say so:\n%s", raw)
	}
}

func TestParseRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"no front matter", "name: x\n", "bad.md:1:1: must start with"},
		{"unclosed", "---\nname: x\n", "no \"---\" line closing"},
		{"no name", "---\nrole: x\n---\n", "\"name\" is required"},
		{"bad name", "---\nname: a.b\n---\n", "bad.md:2:1: name:"},
		{"old key", "---\nname: x\nchannels: [general]\n---\n", "bad.md:3:11: channels: was renamed"},
		{"duplicate", "---\nname: x\nname: y\n---\n", "bad.md:3:1: \"name\" appears twice"},
		{"subscribe outside", "---\nname: x\nsubscribe: [a]\nallowSubscribe: [b]\n---\n", "bad.md:3:1: subscribe: channel \"a\" is not within allowSubscribe"},
		{"wildcard quiet", "---\nname: x\nsubscribe: [a]\nquiet: [\"*\"]\n---\n", "quiet: channel \"*\" must be a concrete channel"},
		{"both", "---\nname: x\nsubscribe: [a]\nquiet: [a]\nmuted: [a]\n---\n", "both quiet and muted"},
		{"bad kind", "---\nname: x\nkind: robot\n---\n", "bad.md:3:1: kind: must be"},
		{"list of maps", "---\nname: x\ntags: [{a: 1}]\n---\n", "list items must be scalars"},
		{"not a mapping", "---\n- a\n---\n", "must be a mapping"},
		{"bad yaml", "---\nname: [x\n---\n", "front matter:"},
		{"bad channel", "---\nname: x\nallowPublish: [\"a..b\"]\n---\n", "allowPublish"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.md", []byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse = %v, want it to name %q", err, tc.want)
			}
		})
	}
}

func TestSaveLoadList(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agents")
	f := &File{Name: "reviewer", Role: "reviewer", Subscribe: []string{"general"}, AllowPublish: []string{"general"}, Persona: "Review."}
	path, err := Save(dir, f, true)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 || filepath.Base(path) != "reviewer.md" {
		t.Fatalf("saved %s: %v %v", path, fi, err)
	}
	if _, err := Save(dir, f, true); !errors.Is(err, fs.ErrExist) {
		t.Errorf("a second create = %v, want ErrExist", err)
	}
	got, err := Load(dir, "reviewer")
	if err != nil || got.Persona != "Review." || got.Role != "reviewer" {
		t.Fatalf("Load = %+v, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "liar.md"), []byte("---\nname: someone\n---\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, "liar"); err == nil || !strings.Contains(err.Error(), "must name it") {
		t.Errorf("a file naming another agent: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken.md"), []byte("nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	all, err := List(dir)
	if len(all) != 2 || all[0].Name != "reviewer" || all[1].Name != "someone" || err == nil || !strings.Contains(err.Error(), "broken.md") {
		t.Errorf("List = %d files, %v", len(all), err)
	}
	if _, err := Path(dir, "../x"); err == nil {
		t.Error("a path outside the directory was accepted")
	}
}
