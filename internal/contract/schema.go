package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gocotal/cotal/wire"
)

// Bounds of the JSON Schema profile (SPEC §13.7), checked when a schema is compiled. Breaking one
// is contract-invalid.
const (
	// MaxDocumentBytes bounds one artifact's canonical form.
	MaxDocumentBytes = 256 << 10
	// MaxClosureBytes bounds the canonical forms of a closure's artifacts together.
	MaxClosureBytes = 1 << 20
	// MaxNesting bounds how deep arrays and objects nest in one document.
	MaxNesting = 32
	// MaxRefChain bounds how many by-digest references are followed from the root.
	MaxRefChain = 32
	// MaxClosureArtifacts bounds how many artifacts a closure names (the reference's ceiling).
	MaxClosureArtifacts = 64
	// MaxPatternLength bounds one regular expression, in bytes (the reference's bound).
	MaxPatternLength = 256
)

const (
	// refScheme starts a by-digest reference: "cotal:sha256:<hex>", with an optional fragment.
	refScheme = "cotal:"
	// draft2020 is the only dialect a contract schema may name in $schema.
	draft2020 = "https://json-schema.org/draft/2020-12/schema"
)

// Schema is a compiled contract schema: a closure that is within the profile, with a real
// JSON Schema 2020-12 validator. It is safe for concurrent use.
type Schema struct {
	closure   Closure
	artifacts []Artifact
	compiled  *jsonschema.Schema
}

// Compile checks the schema closure rooted at root against the profile of SPEC §13.7 and
// compiles it as JSON Schema 2020-12. A $ref is local ("#…") or names another artifact by digest
// ("cotal:sha256:<hex>", optionally with a fragment); members holds those artifacts, keyed by
// artifact digest, and every one reached must be there: nothing is fetched from the network, a
// file or the contract stream. Members the root does not reach are ignored.
//
// Every refusal matches ErrInvalid: bytes that are not I-JSON, a document over MaxDocumentBytes
// or nested deeper than MaxNesting, a closure over MaxClosureBytes or MaxClosureArtifacts, a
// reference chain deeper than MaxRefChain, any other $ref, a $schema other than 2020-12, a
// pattern over MaxPatternLength or not in RE2 syntax (RE2 matches in linear time), or a schema
// the 2020-12 meta-schema refuses. The profile's time budgets are not enforced here.
func Compile(root []byte, members map[string][]byte) (*Schema, error) {
	r, err := schemaArtifact(root)
	if err != nil {
		return nil, fmt.Errorf("root schema: %w", err)
	}
	docs := closedLoader{refScheme + r.Digest: r.doc}
	artifacts := []Artifact{r.Artifact}
	total := len(r.Bytes)
	reached := map[string]bool{}
	frontier := r.refs
	for depth := 1; len(frontier) > 0; depth++ {
		if depth > MaxRefChain {
			return nil, invalidf("the reference chain is deeper than %d", MaxRefChain)
		}
		var next []string
		for _, d := range frontier {
			if reached[d] {
				continue
			}
			if reached[d] = true; len(reached) > MaxClosureArtifacts {
				return nil, invalidf("the closure names more than %d artifacts", MaxClosureArtifacts)
			}
			raw, ok := members[d]
			if !ok {
				return nil, invalidf("$ref to %s: the artifact is not in the closure (nothing is fetched)", d)
			}
			m, err := schemaArtifact(raw)
			if err != nil {
				return nil, fmt.Errorf("member %s: %w", d, err)
			}
			if m.Digest != d {
				return nil, invalidf("member %s holds the artifact %s", d, m.Digest)
			}
			if total += len(m.Bytes); total > MaxClosureBytes {
				return nil, invalidf("the closure is over %d bytes in canonical form", MaxClosureBytes)
			}
			docs[refScheme+d] = m.doc
			artifacts = append(artifacts, m.Artifact)
			next = append(next, m.refs...)
		}
		frontier = next
	}

	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(docs)
	c.UseRegexpEngine(boundedRegexp)
	compiled, err := c.Compile(refScheme + r.Digest)
	if err != nil {
		return nil, invalidf("the schema does not compile as JSON Schema 2020-12: %v", err)
	}
	closure := newClosure(r.Digest, slices.Collect(maps.Keys(reached)))
	artifacts = append(artifacts, Artifact{Digest: closure.Digest, Bytes: closure.Manifest})
	return &Schema{closure: closure, artifacts: artifacts, compiled: compiled}, nil
}

// Closure returns the schema's closure; its digest is what op.inputDigest or op.outputDigest
// pins.
func (s *Schema) Closure() Closure { return s.closure }

// Artifacts returns what publishing the schema stores: the root, the members it reaches, and the
// manifest last. The slice is shared; it must not be modified.
func (s *Schema) Artifacts() []Artifact { return s.artifacts }

// Validate checks an argument or reply against the schema. An absent value (empty or only
// whitespace) is validated as null, which is what the void schema accepts (SPEC §13.7). The value
// must be one I-JSON value. A refusal is a *ValueError naming the failing path, which matches
// ErrBadRequest.
func (s *Schema) Validate(value json.RawMessage) error {
	if len(bytes.TrimSpace(value)) == 0 {
		value = json.RawMessage("null")
	}
	c, err := wire.Canonicalize(value)
	if err != nil {
		return &ValueError{Reason: "not one I-JSON value: " + err.Error()}
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(c))
	if err != nil {
		return &ValueError{Reason: err.Error()}
	}
	var ve *jsonschema.ValidationError
	if err := s.compiled.Validate(v); !errors.As(err, &ve) {
		return err
	}
	leaf := deepestLeaf(ve)
	return &ValueError{Path: pointer(leaf.InstanceLocation), Reason: leaf.BasicOutput().Error.String()}
}

// deepestLeaf returns the cause of e that names the deepest value (the first, among equals): the
// most precise account of why a value fails.
func deepestLeaf(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return e
	}
	var best *jsonschema.ValidationError
	for _, c := range e.Causes {
		if l := deepestLeaf(c); best == nil || len(l.InstanceLocation) > len(best.InstanceLocation) {
			best = l
		}
	}
	return best
}

// pointer renders a path as a JSON Pointer (RFC 6901).
func pointer(tokens []string) string {
	var b strings.Builder
	esc := strings.NewReplacer("~", "~0", "/", "~1")
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(esc.Replace(t))
	}
	return b.String()
}

// schemaDoc is one schema artifact, parsed, with the artifact digests it references.
type schemaDoc struct {
	Artifact
	doc  any
	refs []string
}

// schemaArtifact canonicalizes and parses one schema document and checks the per-document bounds.
func schemaArtifact(b []byte) (schemaDoc, error) {
	a, err := canonicalArtifact(b)
	if err != nil {
		return schemaDoc{}, err
	}
	if n := nesting(a.Bytes); n > MaxNesting {
		return schemaDoc{}, invalidf("the document nests %d deep, over the bound of %d", n, MaxNesting)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(a.Bytes))
	if err != nil {
		return schemaDoc{}, invalidf("the document does not parse: %v", err)
	}
	d := schemaDoc{Artifact: a, doc: doc}
	if err := scanRefs(doc, &d.refs); err != nil {
		return schemaDoc{}, err
	}
	return d, nil
}

// scanRefs walks a document for $ref, $dynamicRef and $schema, wherever they appear
// (conservatively, also inside const and enum values), collecting the by-digest references into
// refs.
func scanRefs(v any, refs *[]string) error {
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			if err := scanRefs(e, refs); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			s, isString := v[k].(string)
			switch {
			case isString && (k == "$ref" || k == "$dynamicRef"):
				if strings.HasPrefix(s, "#") {
					break // local: resolved within the document
				}
				digest, _, _ := strings.Cut(strings.TrimPrefix(s, refScheme), "#")
				if !strings.HasPrefix(s, refScheme) || !wire.IsDigest(digest) {
					return invalidf("%s %q: a reference is local (#…) or names an artifact by digest (cotal:sha256:<hex>)", k, s)
				}
				*refs = append(*refs, digest)
			case isString && k == "$schema" && strings.TrimSuffix(s, "#") != draft2020:
				return invalidf("$schema %q: a contract schema is JSON Schema 2020-12", s)
			}
			if err := scanRefs(v[k], refs); err != nil {
				return err
			}
		}
	}
	return nil
}

// nesting returns how deep arrays and objects nest in canonical JSON.
func nesting(canonical []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(canonical); i++ {
		switch c := canonical[i]; {
		case inString && c == '\\':
			i++ // the escaped byte cannot end the string
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// closedLoader hands the compiler a closure's own artifacts, keyed by "cotal:<digest>", and
// refuses every other URL: no reference is resolved over the network or from a file.
type closedLoader map[string]any

// Load returns the artifact at url, or an error for a URL outside the closure.
func (l closedLoader) Load(url string) (any, error) {
	if doc, ok := l[url]; ok {
		return doc, nil
	}
	return nil, fmt.Errorf("%s is outside the closure: nothing is loaded from the network or a file", url)
}

// boundedRegexp compiles a schema's regular expressions with Go's RE2 engine, which matches in
// time linear in the input, and refuses any longer than MaxPatternLength.
func boundedRegexp(s string) (jsonschema.Regexp, error) {
	if len(s) > MaxPatternLength {
		return nil, fmt.Errorf("the pattern is %d bytes, over the bound of %d", len(s), MaxPatternLength)
	}
	re, err := regexp.Compile(s)
	if err != nil {
		return nil, err
	}
	return re, nil
}
