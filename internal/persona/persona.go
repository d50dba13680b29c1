// Package persona reads and writes agent files, .cotal/agents/<name>.md: YAML front matter that is
// an agent's identity, harness and grants, and a Markdown body that is its persona, the
// instructions its harness is launched with. The shape is the reference's (docs/agent-files.md).
//
// A file's grants are what the agent's credential may do: subscribe is the channels it joins at
// start (omitted: none), allowSubscribe what it may read (omitted: subscribe), allowPublish what
// it may post to (omitted: nothing). Every error names the file, and a line and column where the
// front matter has one.
package persona

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/wire"
)

// File is one agent file.
type File struct {
	Name        string
	Role        string
	Kind        wire.EndpointKind
	Description string
	Tags        []string
	// Agent pins the harness (claude, codex, opencode, cotal); an explicit --agent wins over it.
	Agent   string
	Model   string
	Variant string
	// Subscribe, AllowSubscribe and AllowPublish are the channel grants. A nil list is an omitted
	// field, an empty one a declared "none": Subscribe nil means no channels as [] does, but the
	// file says which its author wrote.
	Subscribe      []string
	AllowSubscribe []string
	AllowPublish   []string
	// Quiet and Muted are attention defaults: concrete channels within the read ACL.
	Quiet []string
	Muted []string
	// LaunchOptions are passed to the harness as they are.
	LaunchOptions map[string]any
	Capabilities  []string
	// Owner is who defined the persona over the wire; only they may redefine it so.
	Owner string
	// Meta keeps the scalar keys the file has that are not modelled here.
	Meta map[string]string
	// Persona is the Markdown body.
	Persona string
}

// ReadACL returns the channels the agent may read: AllowSubscribe, or Subscribe when none is given.
func (f *File) ReadACL() []string {
	if len(f.AllowSubscribe) > 0 {
		return f.AllowSubscribe
	}
	return f.Subscribe
}

// Error is a problem in an agent file, at a line and column of it when known.
type Error struct {
	Path      string
	Line, Col int
	Msg       string
}

// Error implements error: "path:line:col: msg".
func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d:%d: %s", e.Path, e.Line, e.Col, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

// fence opens and closes the front matter.
const fence = "---"

// maxFile bounds an agent file.
const maxFile = 1 << 20

// Parse reads an agent file's bytes; path names it in errors.
func Parse(path string, src []byte) (*File, error) {
	fail := func(line, col int, format string, args ...any) (*File, error) {
		return nil, &Error{Path: path, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
	}
	if len(src) > maxFile {
		return fail(0, 0, "is larger than %d bytes", maxFile)
	}
	text := strings.ReplaceAll(string(src), "\r\n", "\n")
	rest, ok := strings.CutPrefix(text, fence+"\n")
	if !ok {
		return fail(1, 1, "must start with a %q line opening the front matter", fence)
	}
	front, body, ok := strings.Cut(rest, "\n"+fence+"\n")
	if !ok {
		if front, ok = strings.CutSuffix(rest, "\n"+fence); !ok {
			return fail(0, 0, "has no %q line closing the front matter", fence)
		}
		body = ""
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(front), &doc); err != nil {
		return fail(0, 0, "front matter: %v", err)
	}
	f := &File{Persona: strings.TrimSpace(body)}
	if len(doc.Content) == 0 {
		return fail(2, 1, "front matter: %q is required", "name")
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return fail(m.Line+1, m.Column, "front matter must be a mapping of key: value pairs")
	}
	// Positions are in the front matter; the file has the opening fence above it.
	at := func(n *yaml.Node) (int, int) { return n.Line + 1, n.Column }
	bad := func(n *yaml.Node, format string, args ...any) (*File, error) {
		l, c := at(n)
		return fail(l, c, format, args...)
	}
	keys := map[string]*yaml.Node{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if _, dup := keys[k.Value]; dup {
			return bad(k, "%q appears twice", k.Value)
		}
		keys[k.Value] = k
		if err := f.set(k.Value, v); err != nil {
			return bad(v, "%s: %v", k.Value, err)
		}
	}
	if _, ok := keys["name"]; !ok {
		return fail(2, 1, "%q is required", "name")
	}
	if err := f.Validate(); err != nil {
		var fe *fieldError
		if errors.As(err, &fe) {
			if k := keys[fe.field]; k != nil {
				return bad(k, "%s", fe)
			}
		}
		return fail(0, 0, "%v", err)
	}
	return f, nil
}

// set sets the field key from the YAML node v.
func (f *File) set(key string, v *yaml.Node) error {
	str := func(p *string) error {
		if v.Kind != yaml.ScalarNode {
			return errors.New("must be a scalar")
		}
		*p = v.Value
		return nil
	}
	list := func(p *[]string) error {
		out := []string{}
		switch v.Kind {
		case yaml.ScalarNode:
			if v.Tag != "!!null" {
				out = append(out, v.Value)
			}
		case yaml.SequenceNode:
			for _, it := range v.Content {
				if it.Kind != yaml.ScalarNode {
					return errors.New("list items must be scalars")
				}
				out = append(out, it.Value)
			}
		default:
			return errors.New("must be a list")
		}
		*p = out
		return nil
	}
	switch key {
	case "name":
		return str(&f.Name)
	case "role":
		return str(&f.Role)
	case "kind":
		var k string
		if err := str(&k); err != nil {
			return err
		}
		f.Kind = wire.EndpointKind(k)
		return nil
	case "description":
		return str(&f.Description)
	case "tags":
		return list(&f.Tags)
	case "agent":
		return str(&f.Agent)
	case "model":
		return str(&f.Model)
	case "variant":
		return str(&f.Variant)
	case "subscribe":
		return list(&f.Subscribe)
	case "allowSubscribe":
		return list(&f.AllowSubscribe)
	case "allowPublish":
		return list(&f.AllowPublish)
	case "quiet":
		return list(&f.Quiet)
	case "muted":
		return list(&f.Muted)
	case "capabilities":
		return list(&f.Capabilities)
	case "owner":
		return str(&f.Owner)
	case "launchOptions":
		if v.Kind != yaml.MappingNode {
			return errors.New("must be a mapping of key: value pairs")
		}
		return v.Decode(&f.LaunchOptions)
	case "channels", "publish":
		return errors.New(`was renamed: use "subscribe" and "allowSubscribe" (read) and "allowPublish" (post)`)
	}
	if v.Kind == yaml.ScalarNode {
		if f.Meta == nil {
			f.Meta = map[string]string{}
		}
		f.Meta[key] = v.Value
	}
	return nil
}

// fieldError is a Validate failure of one front-matter key.
type fieldError struct {
	field, msg string
}

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

// Validate checks the file's values: the name is an actor token, the kind known, every channel
// valid, the subscriptions and attention defaults within the read ACL. Capabilities and the
// harness are checked where the agent is spawned, which knows what is registered.
func (f *File) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &fieldError{field: field, msg: fmt.Sprintf(format, args...)}
	}
	if err := wire.ValidateAgentName(f.Name); err != nil {
		return bad("name", "%v", err)
	}
	if f.Kind != "" && f.Kind != wire.KindAgent && f.Kind != wire.KindEndpoint {
		return bad("kind", "must be %q or %q", wire.KindAgent, wire.KindEndpoint)
	}
	if f.Role != "" {
		if _, err := wire.TaskDurable(f.Role); err != nil {
			return bad("role", "%v", err)
		}
	}
	for field, chans := range map[string][]string{"subscribe": f.Subscribe, "allowSubscribe": f.AllowSubscribe, "allowPublish": f.AllowPublish} {
		for _, ch := range chans {
			if err := wire.ValidateChannelPattern(ch); err != nil {
				return bad(field, "%v", err)
			}
		}
	}
	acl := f.ReadACL()
	for _, ch := range f.Subscribe {
		if !wire.ChannelInAllow(acl, ch) {
			return bad("subscribe", "channel %q is not within allowSubscribe %q", ch, acl)
		}
	}
	for field, chans := range map[string][]string{"quiet": f.Quiet, "muted": f.Muted} {
		for _, ch := range chans {
			if err := wire.ValidateChannel(ch); err != nil || !wire.IsConcreteChannel(ch) {
				return bad(field, "channel %q must be a concrete channel", ch)
			}
			if !wire.ChannelInAllow(acl, ch) {
				return bad(field, "channel %q is not within the read ACL %q", ch, acl)
			}
		}
	}
	for _, ch := range f.Quiet {
		if slices.Contains(f.Muted, ch) {
			return bad("muted", "channel %q is both quiet and muted: pick one", ch)
		}
	}
	return nil
}

// Marshal returns the file's bytes: the front matter in a fixed order, then the persona body.
// Subscribe is always written ([] for none), so a reader can tell a declared "none" from an
// omitted field.
func (f *File) Marshal() ([]byte, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	var fm yaml.Node
	fm.Kind = yaml.MappingNode
	add := func(key string, v any) {
		var n yaml.Node
		if err := n.Encode(v); err != nil {
			panic(fmt.Sprintf("persona: encode %s: %v", key, err)) // strings, lists and maps encode
		}
		if n.Kind == yaml.SequenceNode {
			n.Style = yaml.FlowStyle
		}
		fm.Content = append(fm.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, &n)
	}
	addStr := func(key, v string) {
		if v != "" {
			add(key, v)
		}
	}
	addStr("name", f.Name)
	addStr("role", f.Role)
	addStr("kind", string(f.Kind))
	addStr("description", f.Description)
	if len(f.Tags) > 0 {
		add("tags", f.Tags)
	}
	add("subscribe", nonNil(f.Subscribe))
	if f.AllowSubscribe != nil {
		add("allowSubscribe", f.AllowSubscribe)
	}
	if f.AllowPublish != nil {
		add("allowPublish", f.AllowPublish)
	}
	if len(f.Quiet) > 0 {
		add("quiet", f.Quiet)
	}
	if len(f.Muted) > 0 {
		add("muted", f.Muted)
	}
	addStr("agent", f.Agent)
	addStr("model", f.Model)
	addStr("variant", f.Variant)
	if len(f.LaunchOptions) > 0 {
		add("launchOptions", f.LaunchOptions)
	}
	if len(f.Capabilities) > 0 {
		add("capabilities", f.Capabilities)
	}
	addStr("owner", f.Owner)
	for _, k := range slices.Sorted(maps.Keys(f.Meta)) {
		add(k, f.Meta[k])
	}
	var b bytes.Buffer
	b.WriteString(fence + "\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&fm); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	b.WriteString(fence + "\n")
	if f.Persona != "" {
		b.WriteString(f.Persona + "\n")
	}
	return b.Bytes(), nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Dir returns the directory of a mesh's agent files: agents/ under its mesh directory.
func Dir(meshDir string) string { return filepath.Join(meshDir, "agents") }

// Path returns the file of the persona name in dir, refusing a name that is not an agent name.
func Path(dir, name string) (string, error) {
	if err := wire.ValidateAgentName(name); err != nil {
		return "", fmt.Errorf("persona %q: %w", name, err)
	}
	return filepath.Join(dir, name+".md"), nil
}

// Load reads the persona name from dir: <dir>/<name>.md, whose name must be name.
func Load(dir, name string) (*File, error) {
	path, err := Path(dir, name)
	if err != nil {
		return nil, err
	}
	f, err := LoadFile(path)
	if err != nil {
		return nil, err
	}
	if f.Name != name {
		return nil, &Error{Path: path, Msg: fmt.Sprintf("names the agent %q: the file of persona %q must name it %q", f.Name, name, name)}
	}
	return f, nil
}

// LoadFile reads the agent file at path.
func LoadFile(path string) (*File, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, src)
}

// Entry is one file of a persona directory: its persona name (the file's base name), and the
// file read, or why it could not be.
type Entry struct {
	Name string
	File *File
	Err  error
}

// Entries reads every agent file in dir, sorted by name; a file that does not parse is an entry
// with its error.
func Entries(dir string) ([]Entry, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(paths))
	for _, p := range paths { // Glob sorts
		f, err := LoadFile(p)
		out = append(out, Entry{Name: strings.TrimSuffix(filepath.Base(p), ".md"), File: f, Err: err})
	}
	return out, nil
}

// List reads every agent file in dir, by name. A file that does not parse is an error naming it,
// after the others are read.
func List(dir string) ([]*File, error) {
	entries, err := Entries(dir)
	if err != nil {
		return nil, err
	}
	var out []*File
	var errs []error
	for _, e := range entries {
		if e.Err != nil {
			errs = append(errs, e.Err)
			continue
		}
		out = append(out, e.File)
	}
	slices.SortFunc(out, func(a, b *File) int { return strings.Compare(a.Name, b.Name) })
	return out, errors.Join(errs...)
}

// Save writes f as the persona of its name in dir (0600, atomically). create refuses to replace
// an existing file.
func Save(dir string, f *File, create bool) (string, error) {
	path, err := Path(dir, f.Name)
	if err != nil {
		return "", err
	}
	raw, err := f.Marshal()
	if err != nil {
		return "", &Error{Path: path, Msg: err.Error()}
	}
	if err := atomicfile.MkdirPrivate(dir); err != nil {
		return "", err
	}
	if create {
		err = atomicfile.Create(path, raw, 0o600)
	} else {
		err = atomicfile.Write(path, raw, 0o600)
	}
	return path, err
}
