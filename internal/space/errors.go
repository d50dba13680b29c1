package space

import (
	"fmt"
	"strings"

	"github.com/gocotal/cotal/wire"
)

// Drift is one field of an existing stream that differs from the contract.
type Drift struct {
	Resource string
	Field    string
	Want     string
	Got      string
}

// DriftError reports every drifted field Provision found. The drifted resources were left as they
// are, data included: fixing them is an operator's decision.
type DriftError struct {
	Space  wire.Space
	Drifts []Drift
}

// Error implements error.
func (e *DriftError) Error() string {
	parts := make([]string, len(e.Drifts))
	for i, d := range e.Drifts {
		parts[i] = fmt.Sprintf("%s %s is %s, want %s", d.Resource, d.Field, d.Got, d.Want)
	}
	return fmt.Sprintf("space %s drifted from the Cotal contract (left untouched, data kept): %s", e.Space, strings.Join(parts, "; "))
}
