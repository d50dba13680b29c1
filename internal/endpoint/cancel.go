package endpoint

import (
	"encoding/json"
	"errors"
	"fmt"
)

// The modes of the reserved cancel command (SPEC §13.6): graceful lets the goal's owner stop its
// work cleanly, terminate stops it at once.
const (
	CancelGraceful  = "graceful"
	CancelTerminate = "terminate"
)

// CancelArgs are cancel's args: {"mode": "graceful"|"terminate"}, the mode graceful when absent.
type CancelArgs struct {
	Mode string `json:"mode,omitempty"`
}

// cancelMode returns the mode args name: graceful for null, {} or no mode, and an error for
// anything but an object whose only member is a known mode.
func cancelMode(args json.RawMessage) (string, error) {
	if string(args) == "null" {
		return CancelGraceful, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil || m == nil {
		return "", errors.New("must be an object, or null")
	}
	mode := CancelGraceful
	for k, v := range m {
		if k != "mode" {
			return "", fmt.Errorf("/%s: not a member of cancel's args", k)
		}
		if err := json.Unmarshal(v, &mode); err != nil || mode != CancelGraceful && mode != CancelTerminate {
			return "", fmt.Errorf("/mode: must be %q or %q", CancelGraceful, CancelTerminate)
		}
	}
	return mode, nil
}

// cancelArgs is cancel's input schema.
type cancelArgs struct{}

func (cancelArgs) Validate(v json.RawMessage) error {
	_, err := cancelMode(v)
	return err
}

// anyValue is the output schema of a reserved command whose answer the endpoint defines.
type anyValue struct{}

func (anyValue) Validate(json.RawMessage) error { return nil }
