// Package manifest reads a mesh manifest, cotal.yaml (apiVersion cotal/v1, kind Mesh): a whole
// team's space, channels and agents in one file, channel-centric, as the reference defines it
// (docs/manifest.md). Resolve inverts the channels' member lists into each agent's least-privilege
// grants. Unknown keys are refused by name, and every error names FILE:LINE:COL.
package manifest

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gocotal/cotal/internal/persona"
	"github.com/gocotal/cotal/wire"
)

// The manifest's version and kind.
const (
	APIVersion = "cotal/v1"
	Kind       = "Mesh"
)

// The persona permission policies.
const (
	// Reject (the default) makes the manifest the whole truth: a persona file's own grants are
	// ignored.
	Reject = "reject"
	// Include inherits a persona file's grants for channels the manifest does not declare.
	Include = "include"
)

// Manifest is a parsed cotal.yaml.
type Manifest struct {
	// Path is the file it was read from; persona paths are relative to its directory.
	Path               string
	Space              wire.Space
	Broker             Broker
	Runtime            string
	Agent              string
	PersonaPermissions string
	Defaults           Defaults
	// Agents and Channels keep the file's order.
	Agents   []*Agent
	Channels []*Channel
}

// Broker is the manifest's broker block.
type Broker struct {
	Servers string
	Host    string
	// Auth is "static" (the default), "open" (auth: false) or "user".
	Auth string
	IdP  string
}

// Defaults are the channel defaults a channel may override.
type Defaults struct {
	Replay        *bool
	ReplayWindow  string
	DeliveryClass wire.DeliveryClass
}

// Agent is one agent of the manifest: a persona file, a persona file with overrides, or inline.
type Agent struct {
	Name string
	// Persona is the persona file's path as written; File is it read.
	Persona            string
	File               *persona.File
	Harness            string
	Cwd                string
	Continuity         string
	Model              string
	Variant            string
	Role               string
	Description        string
	Instructions       string
	Prompt             string
	Capabilities       []string
	PersonaPermissions string
	// LaunchOptions are passed to the harness as they are; Events asks for the agent's events.
	LaunchOptions map[string]any
	Events        bool
}

// Channel is one channel: its registry card and its three member lists.
type Channel struct {
	Name          string
	Description   string
	Instructions  string
	Replay        *bool
	ReplayWindow  string
	DeliveryClass wire.DeliveryClass
	// Subscribe, AllowSubscribe and AllowPublish name agents. AllowSubscribe nil defaults to
	// Subscribe; AllowPublish nil or empty means nobody posts.
	Subscribe, AllowSubscribe, AllowPublish []string
}

// Readers returns the agents that may read the channel.
func (c *Channel) Readers() []string {
	if c.AllowSubscribe != nil {
		return c.AllowSubscribe
	}
	return c.Subscribe
}

// Error is a problem in a manifest, at a line and column of it: the same FILE:LINE:COL error an
// agent file's problems are.
type Error = persona.Error

// maxFile bounds a manifest.
const maxFile = 4 << 20

// Load reads and checks the manifest at path, with the persona files it names.
func Load(path string) (*Manifest, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, src)
}

// document returns the root node of the YAML document src, read from path, refusing one larger
// than maxFile, one that does not parse, and an empty one (with the message empty).
func document(path string, src []byte, empty string) (*yaml.Node, error) {
	if len(src) > maxFile {
		return nil, &Error{Path: path, Msg: fmt.Sprintf("is larger than %d bytes", maxFile)}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, &Error{Path: path, Msg: err.Error()}
	}
	if len(doc.Content) == 0 {
		return nil, &Error{Path: path, Line: 1, Col: 1, Msg: empty}
	}
	return doc.Content[0], nil
}

// parser reads one manifest, failing at the first problem with its position.
type parser struct {
	path string
	err  error
}

func (p *parser) fail(n *yaml.Node, format string, args ...any) {
	if p.err == nil {
		p.err = &Error{Path: p.path, Line: n.Line, Col: n.Column, Msg: fmt.Sprintf(format, args...)}
	}
}

// mapping walks a mapping node's keys in order, refusing a key outside known (by name) and a
// repeated one; what names the mapping in errors.
func (p *parser) mapping(n *yaml.Node, what string, known []string, each func(key string, k, v *yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		p.fail(n, "%s must be a mapping of key: value pairs", what)
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content) && p.err == nil; i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case seen[k.Value]:
			p.fail(k, "%q appears twice in %s", k.Value, what)
		case known != nil && !slices.Contains(known, k.Value):
			p.fail(k, "unknown key %q in %s (known: %s)", k.Value, what, strings.Join(known, ", "))
		default:
			seen[k.Value] = true
			each(k.Value, k, v)
		}
	}
}

func (p *parser) str(n *yaml.Node, key string) string {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.fail(n, "%q must be a string", key)
		return ""
	}
	return n.Value
}

func (p *parser) boolean(n *yaml.Node, key string) *bool {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil {
		p.fail(n, "%q must be true or false", key)
		return nil
	}
	return &b
}

func (p *parser) list(n *yaml.Node, key string) []string {
	if n.Kind != yaml.SequenceNode {
		p.fail(n, "%q must be a list", key)
		return nil
	}
	out := []string{}
	for _, it := range n.Content {
		if it.Kind != yaml.ScalarNode {
			p.fail(it, "%q list items must be strings", key)
			return nil
		}
		out = append(out, it.Value)
	}
	return out
}

var (
	topKeys     = []string{"apiVersion", "kind", "space", "broker", "runtime", "agent", "personaPermissions", "defaults", "agents", "channels"}
	brokerKeys  = []string{"servers", "host", "auth", "idp"}
	defaultKeys = []string{"replay", "replayWindow", "deliveryClass"}
	agentKeys   = []string{"persona", "agent", "cwd", "continuity", "model", "variant", "launchOptions", "role", "description", "instructions", "prompt", "events", "capabilities", "personaPermissions"}
	channelKeys = []string{"description", "instructions", "replay", "replayWindow", "deliveryClass", "subscribe", "allowSubscribe", "allowPublish"}
)

// Parse reads a manifest's bytes; path names it in errors and anchors its persona paths.
func Parse(path string, src []byte) (*Manifest, error) {
	root, err := document(path, src, "is empty: a manifest needs apiVersion, kind, space and channels")
	if err != nil {
		return nil, err
	}
	p := &parser{path: path}
	m := &Manifest{Path: path, PersonaPermissions: Reject}
	seen := map[string]*yaml.Node{}
	var agentsNode, channelsNode *yaml.Node
	p.mapping(root, "the manifest", topKeys, func(key string, k, v *yaml.Node) {
		seen[key] = k
		switch key {
		case "apiVersion":
			if s := p.str(v, key); p.err == nil && s != APIVersion {
				p.fail(v, "apiVersion %q: must be %q", s, APIVersion)
			}
		case "kind":
			if s := p.str(v, key); p.err == nil && s != Kind {
				p.fail(v, "kind %q: must be %q", s, Kind)
			}
		case "space":
			sp, err := wire.ParseSpace(p.str(v, key))
			if p.err == nil && err != nil {
				p.fail(v, "space: %v", err)
			}
			m.Space = sp
		case "broker":
			p.mapping(v, "broker", brokerKeys, func(key string, _, v *yaml.Node) {
				switch key {
				case "servers":
					m.Broker.Servers = p.str(v, key)
					for _, u := range strings.Split(m.Broker.Servers, ",") {
						if parsed, err := url.Parse(strings.TrimSpace(u)); p.err == nil && (err != nil || parsed.Scheme == "" || parsed.Host == "") {
							p.fail(v, "broker.servers %q: must be comma-separated URLs such as nats://127.0.0.1:4222", u)
						} else if p.err == nil && parsed.User != nil {
							p.fail(v, "broker.servers: a URL must carry no credentials")
						}
					}
				case "host":
					m.Broker.Host = p.str(v, key)
					if p.err == nil && strings.Contains(m.Broker.Host, "://") {
						p.fail(v, "broker.host %q: a bind interface, with no scheme (the port comes from servers)", m.Broker.Host)
					}
				case "idp":
					m.Broker.IdP = p.str(v, key)
				case "auth":
					m.Broker.Auth = p.auth(v)
				}
			})
		case "runtime":
			m.Runtime = p.str(v, key)
		case "agent":
			m.Agent = p.str(v, key)
		case "personaPermissions":
			m.PersonaPermissions = p.policy(v)
		case "defaults":
			p.mapping(v, "defaults", defaultKeys, func(key string, _, v *yaml.Node) {
				switch key {
				case "replay":
					m.Defaults.Replay = p.boolean(v, key)
				case "replayWindow":
					m.Defaults.ReplayWindow = p.str(v, key)
				case "deliveryClass":
					m.Defaults.DeliveryClass = p.class(v)
				}
			})
		case "agents":
			agentsNode = v
		case "channels":
			channelsNode = v
		}
	})
	if p.err == nil && m.Broker.IdP != "" && m.Broker.Auth != "user" {
		p.fail(seen["broker"], `broker.idp is for broker.auth: "user"`)
	}
	for _, req := range []string{"apiVersion", "kind", "space", "channels"} {
		if seen[req] == nil && p.err == nil {
			p.fail(root, "%q is required", req)
		}
	}
	if agentsNode != nil && p.err == nil {
		p.mapping(agentsNode, "agents", nil, func(name string, k, v *yaml.Node) { m.Agents = append(m.Agents, p.agent(m, name, k, v)) })
	}
	if channelsNode != nil && p.err == nil {
		p.mapping(channelsNode, "channels", nil, func(name string, k, v *yaml.Node) { m.Channels = append(m.Channels, p.channel(m, name, k, v)) })
	}
	if p.err != nil {
		return nil, p.err
	}
	return m, nil
}

func (p *parser) auth(v *yaml.Node) string {
	switch {
	case v.Kind == yaml.ScalarNode && v.Tag == "!!bool" && v.Value == "true":
		return "static"
	case v.Kind == yaml.ScalarNode && v.Tag == "!!bool" && v.Value == "false":
		return "open"
	case v.Kind == yaml.ScalarNode && (v.Value == "static" || v.Value == "user"):
		return v.Value
	}
	p.fail(v, `broker.auth %q: must be true, false, "static" or "user"`, v.Value)
	return ""
}

func (p *parser) policy(v *yaml.Node) string {
	s := p.str(v, "personaPermissions")
	if p.err == nil && s != Reject && s != Include {
		p.fail(v, "personaPermissions %q: must be %q or %q", s, Reject, Include)
	}
	return s
}

func (p *parser) class(v *yaml.Node) wire.DeliveryClass {
	s := wire.DeliveryClass(p.str(v, "deliveryClass"))
	if p.err == nil && s != wire.ClassLive && s != wire.ClassDurable {
		p.fail(v, "deliveryClass %q: must be %q or %q", s, wire.ClassLive, wire.ClassDurable)
	}
	return s
}

// agent reads one agent in any of its three forms.
func (p *parser) agent(m *Manifest, name string, k, v *yaml.Node) *Agent {
	a := &Agent{Name: name}
	if err := wire.ValidateAgentName(name); err != nil {
		p.fail(k, "agent %q: %v", name, err)
		return a
	}
	if v.Kind == yaml.ScalarNode {
		a.Persona = p.str(v, "agent "+name)
	} else {
		p.mapping(v, "agent "+name, agentKeys, func(key string, _, v *yaml.Node) {
			switch key {
			case "persona":
				a.Persona = p.str(v, key)
			case "agent":
				a.Harness = p.str(v, key)
			case "cwd":
				a.Cwd = p.str(v, key)
				if p.err == nil && (a.Cwd == "" || strings.ContainsRune(a.Cwd, 0)) {
					p.fail(v, "cwd: must be a non-empty path")
				}
			case "continuity":
				a.Continuity = p.str(v, key)
				if p.err == nil && a.Continuity != "none" && a.Continuity != "exact" {
					p.fail(v, `continuity %q: must be "none" or "exact"`, a.Continuity)
				}
			case "model":
				a.Model = p.str(v, key)
			case "variant":
				a.Variant = p.str(v, key)
			case "role":
				a.Role = p.str(v, key)
			case "description":
				a.Description = p.str(v, key)
			case "instructions":
				a.Instructions = p.str(v, key)
			case "prompt":
				a.Prompt = p.str(v, key)
			case "capabilities":
				a.Capabilities = p.list(v, key)
				if slices.Contains(a.Capabilities, "admin") {
					p.fail(v, "capabilities: admin is never granted by a manifest")
				}
			case "personaPermissions":
				a.PersonaPermissions = p.policy(v)
			case "launchOptions":
				if v.Kind != yaml.MappingNode {
					p.fail(v, "launchOptions must be a mapping of key: value pairs")
				} else if err := v.Decode(&a.LaunchOptions); err != nil {
					p.fail(v, "launchOptions: %v", err)
				}
			case "events":
				if b := p.boolean(v, key); b != nil {
					a.Events = *b
				}
			}
		})
	}
	if p.err != nil {
		return a
	}
	if a.Persona == "" && a.Model == "" && a.Variant == "" && a.Instructions == "" {
		p.fail(k, "agent %q: an inline agent needs at least a model, a variant or instructions (or name a persona file)", name)
		return a
	}
	if a.Persona != "" {
		path := a.Persona
		if !filepath.IsAbs(path) {
			path = filepath.Join(filepath.Dir(m.Path), path)
		}
		f, err := persona.LoadFile(path)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				err = fmt.Errorf("persona file %s does not exist", path)
			}
			p.fail(v, "agent %q: %v", name, err)
			return a
		}
		a.File = f
	}
	return a
}

// channel reads one channel, checking its name is concrete and its members are declared agents.
func (p *parser) channel(m *Manifest, name string, k, v *yaml.Node) *Channel {
	c := &Channel{Name: name}
	if err := wire.ValidateChannel(name); err != nil || !wire.IsConcreteChannel(name) {
		p.fail(k, "channel %q: must be a concrete channel name (no wildcards in v1)", name)
		return c
	}
	members := map[string]*yaml.Node{}
	p.mapping(v, "channel "+name, channelKeys, func(key string, _, v *yaml.Node) {
		switch key {
		case "description":
			c.Description = p.str(v, key)
		case "instructions":
			c.Instructions = p.str(v, key)
		case "replay":
			c.Replay = p.boolean(v, key)
		case "replayWindow":
			c.ReplayWindow = p.str(v, key)
		case "deliveryClass":
			c.DeliveryClass = p.class(v)
		case "subscribe":
			c.Subscribe = p.list(v, key)
			members[key] = v
		case "allowSubscribe":
			c.AllowSubscribe = p.list(v, key)
			members[key] = v
		case "allowPublish":
			c.AllowPublish = p.list(v, key)
			members[key] = v
		}
	})
	if p.err != nil {
		return c
	}
	declared := func(n string) bool {
		return slices.ContainsFunc(m.Agents, func(a *Agent) bool { return a.Name == n })
	}
	for key, names := range map[string][]string{"subscribe": c.Subscribe, "allowSubscribe": c.AllowSubscribe, "allowPublish": c.AllowPublish} {
		for i, n := range names {
			if !declared(n) {
				p.fail(members[key].Content[i], "channel %q: %s names %q, which is not declared in agents", name, key, n)
				return c
			}
		}
	}
	if c.AllowSubscribe != nil {
		for i, n := range c.Subscribe {
			if !slices.Contains(c.AllowSubscribe, n) {
				p.fail(members["subscribe"].Content[i], "channel %q: %q subscribes but is not in allowSubscribe", name, n)
				return c
			}
		}
	}
	return c
}
