package contract

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"github.com/gocotal/cotal/wire"
)

// maxSafeInteger is the largest integer a wire field may carry (SPEC §13.7: the I-JSON range).
const maxSafeInteger = 1<<53 - 1

var (
	// urnPattern is a reverse-DNS cluster or trait URN, such as ai.cotal.manager (the
	// reference's grammar).
	urnPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}(\.[a-z0-9][a-z0-9-]{0,62}){1,15}$`)
	// capabilityPattern is a named capability requirement, such as manager.read (the
	// reference's grammar).
	capabilityPattern = regexp.MustCompile(`^[a-z][a-z0-9._-]{0,63}$`)
)

// reservedCommands are served by the endpoint machinery and never declared by a cluster's author:
// describe by every endpoint, cancel for goals, lease and commit by a pool's owner (SPEC §13.2,
// §13.5, §13.6, §13.7).
var reservedCommands = []string{wire.CommandDescribe, wire.CommandCancel, wire.CommandLease, wire.CommandCommit}

// Effect says whether a command is safe to repeat (SPEC §13.7 "Effect"). It is declared only by an
// endpoint that registers at discovery protocol v2, where every command carries it; under v1 it
// is absent and every command counts as write.
type Effect string

// The two effects.
const (
	EffectRead  Effect = "read"  // a repeat changes nothing the command is meant to change
	EffectWrite Effect = "write" // assumed unsafe to repeat
)

// AdmissionCeiling bounds what a journal command's canonicalizer accepts (SPEC §13.4, §13.7): it is
// declared with the command, never compiled in, so two implementations decide the same bytes
// alike.
type AdmissionCeiling struct {
	MaxBytes int64 `json:"maxBytes"`
	MaxDepth int64 `json:"maxDepth"`
	MaxItems int64 `json:"maxItems"`
}

// Command is one command of a cluster document (SPEC §13.7 "Clusters"), as published: optional
// fields are omitted when absent, never null.
type Command struct {
	// Name is the command token, [a-z0-9-]{1,32}.
	Name string `json:"name"`
	// Class is how a request is carried: ephemeral or journal.
	Class wire.RequestClass `json:"class"`
	// Targeted reports whether a request names a target; Modes are then the authorization modes
	// it admits, and an untargeted command has none.
	Targeted bool             `json:"targeted"`
	Modes    []wire.AuthzMode `json:"modes,omitempty"`
	// Capability is the named capability requirement that minting maps to subjects (SPEC §13.9).
	Capability string `json:"capability"`
	// InputDigest and OutputDigest are the closure digests of the input and output schemas: what a
	// caller pins in op.
	InputDigest  string `json:"inputDigest"`
	OutputDigest string `json:"outputDigest"`
	// Effect is declared only under discovery protocol v2.
	Effect Effect `json:"effect,omitempty"`
	// Traits are the reverse-DNS URNs of the traits attached to the command.
	Traits []string `json:"traits,omitempty"`
	// Action marks the action composite (SPEC §13.6): a journal command whose requests carry a
	// goalId. It is published only when true.
	Action bool `json:"action,omitempty"`
	// AdmissionCeiling is declared by a journal command, and only by one.
	AdmissionCeiling *AdmissionCeiling `json:"admissionCeiling,omitempty"`
	// ReadinessDeadlineMs is an action command's readiness bound, when it declares one.
	ReadinessDeadlineMs *int64 `json:"readinessDeadlineMs,omitempty"`
}

// Document is a cluster document, {urn, revision, attributes[], commands[], events[]} (SPEC §13.7),
// shaped as the reference publishes ai.cotal.manager's.
type Document struct {
	URN      string `json:"urn"`
	Revision int64  `json:"revision"`
	// Attributes and Events are carried as they are; NewCluster declares none.
	Attributes []json.RawMessage `json:"attributes"`
	Commands   []Command         `json:"commands"`
	Events     []json.RawMessage `json:"events"`
}

// Declaration is a command as its author declares it: the Command with its two digests left
// empty, and the JSON Schemas they are computed from. A side with no payload declares VoidSchema.
type Declaration struct {
	Command
	Input, Output json.RawMessage
}

// Schemas are one command's compiled input and output schemas.
type Schemas struct {
	Input, Output *Schema
}

// Cluster is a cluster built from declarations: its document, its closure, each command's
// compiled schemas, and every artifact to publish.
type Cluster struct {
	Document Document
	// Closure is the cluster's closure. Its root is the document's artifact digest; the document
	// names schemas by closure digest, not by $ref, so its members are empty, as in the
	// reference. Closure.Digest is what a service record's clusterDigests[] carries.
	Closure Closure
	// Schemas are the commands' compiled schemas, by command name.
	Schemas map[string]Schemas
	// Artifacts are every schema artifact and schema manifest, then the document and its
	// manifest, each once, in an order where an artifact precedes every manifest that names it.
	Artifacts []Artifact
}

// NewCluster validates the declarations, compiles their schemas and builds the cluster document
// with URN urn at revision. Every refusal matches ErrInvalid and names what it refuses.
func NewCluster(urn string, revision int64, decls ...Declaration) (*Cluster, error) {
	if !urnPattern.MatchString(urn) {
		return nil, invalidf("cluster URN %q is not reverse-DNS (such as com.acme.deploy)", urn)
	}
	if revision < 0 || revision > maxSafeInteger {
		return nil, invalidf("cluster revision %d is not an integer from 0 to 2^53-1", revision)
	}
	if len(decls) == 0 {
		return nil, invalidf("cluster %s declares no command", urn)
	}
	c := &Cluster{
		Document: Document{URN: urn, Revision: revision, Attributes: []json.RawMessage{}, Events: []json.RawMessage{}},
		Schemas:  map[string]Schemas{},
	}
	published := map[string]bool{}
	publish := func(as []Artifact) {
		for _, a := range as {
			if !published[a.Digest] {
				published[a.Digest] = true
				c.Artifacts = append(c.Artifacts, a)
			}
		}
	}
	for _, d := range decls {
		if err := d.validate(); err != nil {
			return nil, err
		}
		if _, dup := c.Schemas[d.Name]; dup {
			return nil, invalidf("command %q is declared twice", d.Name)
		}
		in, err := d.schema("input", d.Input)
		if err != nil {
			return nil, err
		}
		out, err := d.schema("output", d.Output)
		if err != nil {
			return nil, err
		}
		cmd := d.Command
		cmd.InputDigest, cmd.OutputDigest = in.Closure().Digest, out.Closure().Digest
		c.Document.Commands = append(c.Document.Commands, cmd)
		c.Schemas[d.Name] = Schemas{Input: in, Output: out}
		publish(in.Artifacts())
		publish(out.Artifacts())
	}
	b, err := json.Marshal(c.Document)
	if err != nil {
		return nil, fmt.Errorf("encode cluster %s: %w", urn, err)
	}
	doc, err := canonicalArtifact(b)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", urn, err)
	}
	c.Closure = newClosure(doc.Digest, nil)
	publish([]Artifact{doc, {Digest: c.Closure.Digest, Bytes: c.Closure.Manifest}})
	return c, nil
}

// schema compiles one side's schema, which must be declared.
func (d *Declaration) schema(side string, schema json.RawMessage) (*Schema, error) {
	if len(schema) == 0 {
		return nil, invalidf("command %q declares no %s schema (a side with no payload declares VoidSchema)", d.Name, side)
	}
	s, err := Compile(schema, nil)
	if err != nil {
		return nil, fmt.Errorf("command %q %s schema: %w", d.Name, side, err)
	}
	return s, nil
}

// validate checks a declaration's command fields (SPEC §13.2, §13.7).
func (d *Declaration) validate() error {
	if err := wire.ValidateCommand(d.Name); err != nil {
		return invalidf("command: %v", err)
	}
	if slices.Contains(reservedCommands, d.Name) {
		return invalidf("command %q is reserved: the endpoint machinery serves it, a cluster never declares it", d.Name)
	}
	if d.InputDigest != "" || d.OutputDigest != "" {
		return invalidf("command %q: the digests are computed from Input and Output, never declared", d.Name)
	}
	if d.Class != wire.ClassEphemeral && d.Class != wire.ClassJournal {
		return invalidf("command %q class %q is not %q or %q", d.Name, d.Class, wire.ClassEphemeral, wire.ClassJournal)
	}
	if err := d.validateModes(); err != nil {
		return err
	}
	if !capabilityPattern.MatchString(d.Capability) {
		return invalidf("command %q capability %q is not a capability name (such as manager.read)", d.Name, d.Capability)
	}
	if d.Effect != "" && d.Effect != EffectRead && d.Effect != EffectWrite {
		return invalidf("command %q effect %q is not %q or %q", d.Name, d.Effect, EffectRead, EffectWrite)
	}
	for i, t := range d.Traits {
		if !urnPattern.MatchString(t) || slices.Contains(d.Traits[:i], t) {
			return invalidf("command %q trait %q is not a reverse-DNS URN, or is declared twice", d.Name, t)
		}
	}
	switch c := d.AdmissionCeiling; {
	case d.Class == wire.ClassJournal && c == nil:
		return invalidf("journal command %q declares no admissionCeiling {maxBytes, maxDepth, maxItems}", d.Name)
	case d.Class == wire.ClassEphemeral && c != nil:
		return invalidf("ephemeral command %q declares an admissionCeiling, which only a journal command has", d.Name)
	case c != nil && !(inRange(c.MaxBytes, 1) && inRange(c.MaxDepth, 1) && inRange(c.MaxItems, 1)):
		return invalidf("command %q admissionCeiling %+v: each bound is an integer from 1 to 2^53-1", d.Name, *c)
	}
	if d.Action && d.Class != wire.ClassJournal {
		return invalidf("action command %q is %s: an action's requests are journal-class", d.Name, d.Class)
	}
	if r := d.ReadinessDeadlineMs; r != nil && (!d.Action || !inRange(*r, 0)) {
		return invalidf("command %q readinessDeadlineMs: only an action declares one, an integer from 0 to 2^53-1", d.Name)
	}
	return nil
}

// validateModes checks that a targeted command admits one or more distinct modes and an
// untargeted one none.
func (d *Declaration) validateModes() error {
	if !d.Targeted {
		if len(d.Modes) > 0 {
			return invalidf("untargeted command %q declares authorization modes", d.Name)
		}
		return nil
	}
	if len(d.Modes) == 0 {
		return invalidf("targeted command %q declares no authorization mode (one or more of %q)", d.Name, wire.AuthzModes)
	}
	for i, m := range d.Modes {
		if _, err := wire.ParseAuthzMode(string(m)); err != nil {
			return invalidf("command %q: %v", d.Name, err)
		}
		if slices.Contains(d.Modes[:i], m) {
			return invalidf("command %q admits mode %q twice", d.Name, m)
		}
	}
	return nil
}

// inRange reports whether v is an integer from lo to 2^53-1.
func inRange(v, lo int64) bool { return v >= lo && v <= maxSafeInteger }
