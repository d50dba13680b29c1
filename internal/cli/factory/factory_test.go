package factory_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/wire"
)

// TestRefusal maps the endpoint errors that refuse the caller to exit 4 and leaves the others to
// exit 1, wrapped or not.
func TestRefusal(t *testing.T) {
	refused := func(code wire.ErrorCode) error {
		return wire.NewEndpointError(code, wire.OutcomeNotExecuted, "refused")
	}
	for _, tt := range []struct {
		name string
		err  error
		code int
	}{
		{"permission-denied", refused(wire.CodePermissionDenied), exit.NotAuthorized},
		{"unauthenticated", refused(wire.CodeUnauthenticated), exit.NotAuthorized},
		{"wrapped permission-denied", fmt.Errorf("manager spawn: %w", refused(wire.CodePermissionDenied)), exit.NotAuthorized},
		{"not-found", refused(wire.CodeNotFound), exit.Failed},
		{"no responders", refused(wire.CodeUnavailable), exit.Failed},
		{"another error", errors.New("boom"), exit.Failed},
		{"none", nil, exit.OK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := factory.Refusal(tt.err)
			if got := exit.Code(err); got != tt.code {
				t.Errorf("exit.Code(Refusal(%v)) = %d, want %d", tt.err, got, tt.code)
			}
			if tt.err != nil && !errors.Is(err, tt.err) {
				t.Errorf("Refusal(%v) = %v, which no longer wraps it", tt.err, err)
			}
		})
	}
}
