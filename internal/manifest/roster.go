package manifest

import (
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gocotal/cotal/wire"
)

// Roster is a manager's roster (`cotal supervise --roster FILE`): the agents it boots, each from
// its persona file as `cotal spawn --detach` starts one. It declares no channels: each agent's
// access is its persona's.
type Roster struct {
	Path   string
	Agents []RosterAgent
}

// RosterAgent is one entry of a roster.
type RosterAgent struct {
	// Name is the persona to boot, .cotal/agents/<name>.md; Config, when set, another persona to
	// load instead.
	Name   string
	Agent  string
	Role   string
	Config string
	Cwd    string
	// ShareTools are the declared MCP servers to share.
	ShareTools []string
}

var (
	rosterKeys      = []string{"agents"}
	rosterAgentKeys = []string{"name", "agent", "role", "config", "cwd", "share-tools"}
)

// LoadRoster reads and checks the roster at path: unknown keys are refused by name, and every
// error names FILE:LINE:COL.
func LoadRoster(path string) (*Roster, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseRoster(path, src)
}

// ParseRoster reads a roster from src, read from path.
func ParseRoster(path string, src []byte) (*Roster, error) {
	root, err := document(path, src, "is empty: a roster lists agents")
	if err != nil {
		return nil, err
	}
	p := &parser{path: path}
	r := &Roster{Path: path}
	names := map[string]bool{}
	p.mapping(root, "the roster", rosterKeys, func(_ string, _, v *yaml.Node) {
		if v.Kind != yaml.SequenceNode {
			p.fail(v, "agents must be a list of entries")
			return
		}
		for _, it := range v.Content {
			a := RosterAgent{}
			p.mapping(it, "a roster entry", rosterAgentKeys, func(key string, _, v *yaml.Node) {
				switch key {
				case "name":
					a.Name = p.str(v, key)
				case "agent":
					a.Agent = p.str(v, key)
				case "role":
					a.Role = p.str(v, key)
				case "config":
					a.Config = p.str(v, key)
				case "cwd":
					a.Cwd = p.str(v, key)
					if p.err == nil && (a.Cwd == "" || strings.ContainsRune(a.Cwd, 0)) {
						p.fail(v, "cwd: must be a non-empty path")
					}
				case "share-tools":
					a.ShareTools = p.list(v, key)
				}
			})
			switch {
			case p.err != nil:
				return
			case a.Name == "":
				p.fail(it, "a roster entry needs a name: the persona it boots")
			case wire.ValidateAgentName(a.Name) != nil:
				p.fail(it, "name %q: %v", a.Name, wire.ValidateAgentName(a.Name))
			case a.Agent == "":
				p.fail(it, "entry %s needs an agent (the harness): there is no default", a.Name)
			case names[a.Name]:
				p.fail(it, "entry %s appears twice", a.Name)
			}
			names[a.Name] = true
			r.Agents = append(r.Agents, a)
		}
	})
	if p.err != nil {
		return nil, p.err
	}
	return r, nil
}
