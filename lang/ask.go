package lang

import (
	"fmt"
	"slices"
)

// askKinds are the kinds the ask schema shorthand names.
var askKinds = []string{"string", "number", "boolean", "array", "record", "null"}

// AskSchema is an ask's schema read as the shorthand of spec §6.5, a record mapping each required
// top-level field of the reply to a kind, and how many non-conforming replies the ask tolerates.
// A handler that performs asks checks each reply with it, as the simulator does.
type AskSchema struct {
	fields *Record
	// Attempts is how many replies the ask checks before it fails: the step's attempts, 1 when
	// it names none.
	Attempts int
}

// ReadAskSchema reads req's schema as the shorthand: a schema it cannot read as one is L4022.
func ReadAskSchema(req *Request) (*AskSchema, error) {
	schema, ok := req.Option("schema").(*Record)
	if ok {
		for _, k := range schema.Keys() {
			kind, _ := schema.fields[k].(string)
			if !slices.Contains(askKinds, kind) {
				ok = false
			}
		}
	}
	if !ok {
		return nil, &EffectError{Code: "L4022", Kind: "ask-schema-unreadable", Message: "Unreadable ask schema: step " + req.Key + "'s schema maps each field to one of string, number, boolean, array, record, null"}
	}
	attempts := 1
	if n, ok := req.Option("attempts").(float64); ok && n >= 1 {
		attempts = int(n)
	}
	return &AskSchema{fields: schema, Attempts: attempts}, nil
}

// Conforms reports whether v is a record carrying every declared field with its declared kind;
// extra fields are allowed.
func (s *AskSchema) Conforms(v Value) bool {
	r, ok := v.(*Record)
	if !ok {
		return false
	}
	for _, k := range s.fields.Keys() {
		field, ok := r.Get(k)
		if !ok || kindOf(field) != s.fields.fields[k] {
			return false
		}
	}
	return true
}

// Exhausted is the failure of the ask at key once n replies did not conform (L4006).
func (s *AskSchema) Exhausted(key string, n int) *EffectError {
	return &EffectError{Code: "L4006", Kind: "ask-nonconforming", Message: fmt.Sprintf("ask never produced a conforming record: %d replies were checked at %s", n, key)}
}

// kindOf names v's kind in the shorthand's words.
func kindOf(v Value) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case *Array:
		return "array"
	case *Record:
		return "record"
	case nil:
		return "null"
	}
	return ""
}
