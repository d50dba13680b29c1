package manifest

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/wire"
)

// LaunchAPIVersion is a launch spec's version.
const LaunchAPIVersion = "cotal-launch/v1"

// MaxLaunchSpec bounds a launch spec, inline or on disk.
const MaxLaunchSpec = 512 << 10

// LaunchSpec is a manifest resolved for its managers: one entry per agent with everything its
// launch needs, its grants already inverted. A deploy writes it to the manager's run directory
// (RunDir) under its run id, or sends it inline; the manager's launch command starts one agent of
// it by name.
type LaunchSpec struct {
	APIVersion string        `json:"apiVersion"`
	Space      string        `json:"space"`
	RunID      string        `json:"runId"`
	Owner      string        `json:"owner,omitempty"`
	Agents     []LaunchAgent `json:"agents"`
}

// LaunchAgent is one agent of a launch spec: the manifest's entry merged over its persona file.
type LaunchAgent struct {
	Name          string         `json:"name"`
	Agent         string         `json:"agent"`
	Cwd           string         `json:"cwd,omitempty"`
	Continuity    string         `json:"continuity,omitempty"`
	Model         string         `json:"model,omitempty"`
	Variant       string         `json:"variant,omitempty"`
	Role          string         `json:"role,omitempty"`
	Description   string         `json:"description,omitempty"`
	Instructions  string         `json:"instructions,omitempty"`
	Prompt        string         `json:"prompt,omitempty"`
	LaunchOptions map[string]any `json:"launchOptions,omitempty"`
	Events        bool           `json:"events,omitempty"`
	Capabilities  []string       `json:"capabilities,omitempty"`
	// Subscribe, AllowSubscribe and AllowPublish are the agent's resolved grants, never null.
	Subscribe      []string `json:"subscribe"`
	AllowSubscribe []string `json:"allowSubscribe"`
	AllowPublish   []string `json:"allowPublish"`
	PersonaPath    string   `json:"personaPath,omitempty"`
	// Hash fingerprints the launch fields: a deployed agent whose hash differs is stale.
	Hash string `json:"hash"`
}

// hashOf returns the first 16 hex digits of the SHA-256 of a's launch fields: everything but its
// name, description, persona path and the hash itself.
func (a LaunchAgent) hashOf() string {
	a.Name, a.Description, a.PersonaPath, a.Hash = "", "", "", ""
	raw, _ := json.Marshal(a) // a struct of strings, lists and a JSON-decoded map always encodes
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// NewRunID returns a fresh run id: 8 random bytes in hex.
func NewRunID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// runID is a run id's shape.
var runID = regexp.MustCompile(`^[0-9a-f]{16}$`)

// ValidateRunID returns an error unless id is a run id.
func ValidateRunID(id string) error {
	if !runID.MatchString(id) {
		return &wire.ValidationError{Field: "runId", Value: id, Rule: "must be 16 lowercase hex digits"}
	}
	return nil
}

// Launch resolves the manifest into a launch spec for run id: each agent's harness, model, role
// and instructions (the manifest over its persona file), and its grants from the topology. An
// agent with no harness, here or in the manifest's agent key, is an error.
func (m *Manifest) Launch(runID string) (*LaunchSpec, error) {
	top := m.Resolve()
	s := &LaunchSpec{APIVersion: LaunchAPIVersion, Space: string(m.Space), RunID: runID, Agents: []LaunchAgent{}}
	for _, a := range m.Agents {
		g := top.Agents[a.Name]
		la := LaunchAgent{Name: a.Name, Agent: cmp.Or(a.Harness, m.Agent), Cwd: a.Cwd, Continuity: a.Continuity, Model: a.Model,
			Variant: a.Variant, Role: a.Role, Description: a.Description, Instructions: a.Instructions, Prompt: a.Prompt,
			LaunchOptions: a.LaunchOptions, Events: a.Events, Capabilities: slices.Clone(a.Capabilities),
			Subscribe: g.Subscribe, AllowSubscribe: g.Read, AllowPublish: g.Post, PersonaPath: a.Persona}
		if f := a.File; f != nil {
			la.Agent = cmp.Or(a.Harness, f.Agent, m.Agent)
			la.Model, la.Variant, la.Role = cmp.Or(la.Model, f.Model), cmp.Or(la.Variant, f.Variant), cmp.Or(la.Role, f.Role)
			la.Description, la.Instructions = cmp.Or(la.Description, f.Description), cmp.Or(la.Instructions, f.Persona)
			if la.LaunchOptions == nil {
				la.LaunchOptions = f.LaunchOptions
			}
			if policy(m, a) == Include {
				for _, c := range f.Capabilities {
					if !slices.Contains(la.Capabilities, c) {
						la.Capabilities = append(la.Capabilities, c)
					}
				}
			}
		}
		if la.Agent == "" {
			return nil, &Error{Path: m.Path, Msg: fmt.Sprintf("agent %q names no harness: set its agent key, its persona file's, or the manifest's top-level agent", a.Name)}
		}
		la.Hash = la.hashOf()
		s.Agents = append(s.Agents, la)
	}
	return s, nil
}

// policy returns the persona permission policy that applies to agent a.
func policy(m *Manifest, a *Agent) string {
	return cmp.Or(a.PersonaPermissions, m.PersonaPermissions)
}

// Agent returns the entry of the named agent, or nil.
func (s *LaunchSpec) Agent(name string) *LaunchAgent {
	for i := range s.Agents {
		if s.Agents[i].Name == name {
			return &s.Agents[i]
		}
	}
	return nil
}

// ParseLaunchSpec reads a launch spec from untrusted input: its version, run id, space, agent
// names (each once) and channels are checked, every hash is recomputed, and an unknown field is
// refused by name.
func ParseLaunchSpec(raw []byte) (*LaunchSpec, error) {
	if len(raw) > MaxLaunchSpec {
		return nil, fmt.Errorf("launch spec: larger than %d bytes", MaxLaunchSpec)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var s LaunchSpec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("launch spec: %w", err)
	}
	if s.APIVersion != LaunchAPIVersion {
		return nil, fmt.Errorf("launch spec: apiVersion %q: must be %q", s.APIVersion, LaunchAPIVersion)
	}
	if err := ValidateRunID(s.RunID); err != nil {
		return nil, fmt.Errorf("launch spec: %w", err)
	}
	if _, err := wire.ParseSpace(s.Space); err != nil {
		return nil, fmt.Errorf("launch spec: %w", err)
	}
	if s.Owner != "" && !wire.IsDerivedOwner(s.Owner) {
		return nil, fmt.Errorf("launch spec: owner %q: must be a person's derived owner token (u_ and 26 base32 characters)", s.Owner)
	}
	seen := map[string]bool{}
	for _, a := range s.Agents {
		if err := wire.ValidateAgentName(a.Name); err != nil {
			return nil, fmt.Errorf("launch spec: agent %q: %w", a.Name, err)
		}
		if seen[a.Name] {
			return nil, fmt.Errorf("launch spec: agent %s is listed twice", a.Name)
		}
		seen[a.Name] = true
		for _, ch := range slices.Concat(a.Subscribe, a.AllowSubscribe, a.AllowPublish) {
			if !wire.IsConcreteChannel(ch) {
				return nil, fmt.Errorf("launch spec: agent %s: channel %q must be a concrete channel name", a.Name, ch)
			}
		}
		for _, ch := range a.Subscribe {
			if !slices.Contains(a.AllowSubscribe, ch) {
				return nil, fmt.Errorf("launch spec: agent %s subscribes to %s, which it may not read", a.Name, ch)
			}
		}
		if a.Hash != a.hashOf() {
			return nil, fmt.Errorf("launch spec: agent %s: its hash %q is not its launch fields'", a.Name, a.Hash)
		}
	}
	return &s, nil
}

// RunDir is where a mesh directory's launch specs live.
func RunDir(meshDir string) string { return filepath.Join(meshDir, "run") }

// SaveLaunchSpec writes s to dir as <runId>.json (0600), creating dir private.
func SaveLaunchSpec(dir string, s *LaunchSpec) (string, error) {
	if err := ValidateRunID(s.RunID); err != nil {
		return "", err
	}
	if err := atomicfile.MkdirPrivate(dir); err != nil {
		return "", err
	}
	raw, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, s.RunID+".json")
	return path, atomicfile.Write(path, append(raw, '\n'), 0o600)
}

// LoadLaunchSpec reads and checks the launch spec of run id in dir.
func LoadLaunchSpec(dir, id string) (*LaunchSpec, error) {
	if err := ValidateRunID(id); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, id+".json"))
	if err != nil {
		return nil, err
	}
	s, err := ParseLaunchSpec(raw)
	if err != nil {
		return nil, err
	}
	if s.RunID != id {
		return nil, errors.New("launch spec: its runId is not its file's name")
	}
	return s, nil
}
