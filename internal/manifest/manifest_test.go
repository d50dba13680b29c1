package manifest

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	m, err := Load(filepath.Join("testdata", "cotal.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	top := m.Resolve()
	for _, tc := range []struct {
		agent                 string
		read, post, subscribe []string
	}{
		// The manifest is the whole truth for the planner: its file's secret channel is ignored.
		{"planner", []string{"decisions", "general"}, []string{"general"}, []string{"general"}},
		// The builder includes its persona's grants on channels the manifest does not declare.
		{"builder", []string{"general", "team.backend"}, []string{"general", "team.backend"}, []string{"general", "team.backend"}},
		{"lead", []string{"decisions", "general"}, []string{"general"}, []string{"decisions", "general"}},
	} {
		g := top.Agents[tc.agent]
		if !slices.Equal(g.Read, tc.read) || !slices.Equal(g.Post, tc.post) || !slices.Equal(g.Subscribe, tc.subscribe) {
			t.Errorf("%s: read %q post %q subscribe %q; want %q %q %q", tc.agent, g.Read, g.Post, g.Subscribe, tc.read, tc.post, tc.subscribe)
		}
	}
	if got := top.Agents["builder"].Inherited; !slices.Equal(got, []string{"team.backend"}) {
		t.Errorf("builder inherited %q", got)
	}
	if c := top.Channels["decisions"]; !slices.Equal(c.Read, []string{"lead", "planner"}) || len(c.Post) != 0 || !slices.Equal(c.Subscribe, []string{"lead"}) {
		t.Errorf("decisions: %+v", c)
	}
}

func TestParseRefusals(t *testing.T) {
	head := "apiVersion: cotal/v1\nkind: Mesh\nspace: main\n"
	for _, tc := range []struct{ name, src, want string }{
		{"unknown top key", head + "channels: {}\nspaces: [a]\n", `m.yaml:5:1: unknown key "spaces" in the manifest`},
		{"unknown agent key", head + "agents:\n  a:\n    model: x\n    colour: red\nchannels: {}\n", `m.yaml:7:5: unknown key "colour" in agent a`},
		{"unknown channel key", head + "agents:\n  a: {model: x}\nchannels:\n  general:\n    members: [a]\n", `m.yaml:8:5: unknown key "members" in channel general`},
		{"undeclared agent", head + "agents:\n  a: {model: x}\nchannels:\n  general:\n    subscribe: [a, ghost]\n", `m.yaml:8:20: channel "general": subscribe names "ghost", which is not declared in agents`},
		{"wildcard channel", head + "channels:\n  team.>:\n    subscribe: []\n", `m.yaml:5:3: channel "team.>": must be a concrete channel name`},
		{"bad version", "apiVersion: cotal/v2\nkind: Mesh\nspace: main\nchannels: {}\n", `m.yaml:1:13: apiVersion "cotal/v2"`},
		{"missing channels", head, `"channels" is required`},
		{"inline without model", head + "agents:\n  a: {role: x}\nchannels: {}\n", `m.yaml:5:3: agent "a": an inline agent needs`},
		{"subscribe outside read", head + "agents:\n  a: {model: x}\n  b: {model: x}\nchannels:\n  g:\n    subscribe: [a]\n    allowSubscribe: [b]\n", `"a" subscribes but is not in allowSubscribe`},
		{"missing persona file", head + "agents:\n  a: ./nowhere.md\nchannels: {}\n", "does not exist"},
		{"admin capability", head + "agents:\n  a:\n    model: x\n    capabilities: [admin]\nchannels: {}\n", "admin is never granted"},
		{"bad auth", head + "broker:\n  auth: maybe\nchannels: {}\n", `broker.auth "maybe"`},
		{"servers with creds", head + "broker:\n  servers: nats://u:p@h:4222\nchannels: {}\n", "no credentials"},
		{"host with scheme", head + "broker:\n  host: nats://0.0.0.0\nchannels: {}\n", "no scheme"},
		{"idp without user auth", head + "broker:\n  idp: https://idp\nchannels: {}\n", "broker.idp is for"},
		{"bad launch options", head + "agents:\n  a:\n    model: x\n    launchOptions: [x]\nchannels: {}\n", "launchOptions must be a mapping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("m.yaml", []byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse = %v, want it to name %q", err, tc.want)
			}
		})
	}
}

// BenchmarkResolve200 parses and resolves a manifest of 200 agents on 50 channels.
func BenchmarkResolve200(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("apiVersion: cotal/v1\nkind: Mesh\nspace: main\nagents:\n")
	for i := range 200 {
		fmt.Fprintf(&sb, "  a%d: {model: x, role: r%d}\n", i, i%7)
	}
	sb.WriteString("channels:\n")
	for c := range 50 {
		fmt.Fprintf(&sb, "  c%d:\n    subscribe: [", c)
		for i := c; i < 200; i += 50 {
			fmt.Fprintf(&sb, "a%d, ", i)
		}
		sb.WriteString("a0]\n    allowPublish: [a0]\n")
	}
	src := []byte(sb.String())
	for b.Loop() {
		m, err := Parse("m.yaml", src)
		if err != nil {
			b.Fatal(err)
		}
		m.Resolve()
	}
}

// TestRoster: a roster's entries are read in order; an unknown key, a missing harness and a
// repeated name are refused at their line and column.
func TestRoster(t *testing.T) {
	r, err := ParseRoster("roster.yaml", []byte("agents:\n  - { name: planner, agent: claude, role: planner }\n  - { name: builder, agent: cotal, cwd: svc }\n"))
	if err != nil || len(r.Agents) != 2 || r.Agents[0].Role != "planner" || r.Agents[1].Cwd != "svc" {
		t.Fatalf("ParseRoster: %+v, %v", r, err)
	}
	for src, want := range map[string]string{
		"agents:\n  - { name: a, agent: claude, share_tools: [x] }\n": `roster.yaml:2:31: unknown key "share_tools"`,
		"agents:\n  - name: a\n": "roster.yaml:2:5: entry a needs an agent",
		"agents:\n  - { name: a, agent: cotal }\n  - { name: a, agent: cotal }\n": "roster.yaml:3:5: entry a appears twice",
		"team: []\n": `roster.yaml:1:1: unknown key "team"`,
	} {
		if _, err := ParseRoster("roster.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRoster(%q) = %v, want %q", src, err, want)
		}
	}
}
