package manifest

import (
	"slices"
)

// Topology is what a manifest resolves to: each agent's grants and each channel's members.
type Topology struct {
	Space    string                  `json:"space"`
	Agents   map[string]AgentGrant   `json:"agents"`
	Channels map[string]ChannelGroup `json:"channels"`
}

// AgentGrant is one agent's resolved channels: what it may read and post to, and what it joins at
// start.
type AgentGrant struct {
	Read      []string `json:"read"`
	Post      []string `json:"post"`
	Subscribe []string `json:"subscribe"`
	// Inherited names the channels that came from the agent's persona file
	// (personaPermissions: include) rather than the manifest.
	Inherited []string `json:"inherited,omitempty"`
}

// ChannelGroup is one channel's members by verb.
type ChannelGroup struct {
	Read      []string `json:"read"`
	Post      []string `json:"post"`
	Subscribe []string `json:"subscribe"`
}

// Resolve inverts the manifest's channel-centric member lists into one least-privilege grant per
// agent: read from a channel's allowSubscribe (or subscribe), post from its allowPublish
// (default-deny), subscribe only what the agent joins. An agent whose persona policy is include
// also inherits its persona file's grants on channels the manifest does not declare.
func (m *Manifest) Resolve() *Topology {
	t := &Topology{Space: string(m.Space), Agents: map[string]AgentGrant{}, Channels: map[string]ChannelGroup{}}
	declared := map[string]bool{}
	for _, c := range m.Channels {
		declared[c.Name] = true
		t.Channels[c.Name] = ChannelGroup{Read: sorted(c.Readers()), Post: sorted(c.AllowPublish), Subscribe: sorted(c.Subscribe)}
	}
	for _, a := range m.Agents {
		var g AgentGrant
		for _, c := range m.Channels {
			if slices.Contains(c.Readers(), a.Name) {
				g.Read = append(g.Read, c.Name)
			}
			if slices.Contains(c.AllowPublish, a.Name) {
				g.Post = append(g.Post, c.Name)
			}
			if slices.Contains(c.Subscribe, a.Name) {
				g.Subscribe = append(g.Subscribe, c.Name)
			}
		}
		if policy(m, a) == Include && a.File != nil {
			inherit := func(dst *[]string, chans []string) {
				for _, ch := range chans {
					if !declared[ch] && !slices.Contains(*dst, ch) {
						*dst = append(*dst, ch)
						if !slices.Contains(g.Inherited, ch) {
							g.Inherited = append(g.Inherited, ch)
						}
					}
				}
			}
			inherit(&g.Read, a.File.ReadACL())
			inherit(&g.Post, a.File.AllowPublish)
			inherit(&g.Subscribe, a.File.Subscribe)
		}
		g.Read, g.Post, g.Subscribe, g.Inherited = sorted(g.Read), sorted(g.Post), sorted(g.Subscribe), sortedOrNil(g.Inherited)
		t.Agents[a.Name] = g
	}
	return t
}

// sorted returns a sorted copy of s, never nil: an output's lists are never null.
func sorted(s []string) []string {
	out := slices.Clone(s)
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return out
}

func sortedOrNil(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return sorted(s)
}
