package meshwire

import (
	"testing"

	"github.com/gocotal/cotal/wire"
)

// TestControlBudgets holds the order of the join budgets: the daemon answers before the client
// stops waiting.
func TestControlBudgets(t *testing.T) {
	if ControlServeBudget >= wire.ControlJoinWait {
		t.Errorf("ControlServeBudget %s must be shorter than ControlJoinWait %s", ControlServeBudget, wire.ControlJoinWait)
	}
}
