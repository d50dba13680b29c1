package exit

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal"
)

func TestCode(t *testing.T) {
	base := errors.New("boom")
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, OK},
		{"plain", base, Failed},
		{"usage", &UsageError{Err: base}, Usage},
		{"wrapped usage", fmt.Errorf("parse: %w", &UsageError{Err: base}), Usage},
		{"auth", fmt.Errorf("send: %w", &AuthError{Err: base}), NotAuthorized},
		// The shapes the SDK returns: a refused publish (send.go publishError), a connect the
		// broker refused (client.go dial), a refused join, an expired credential.
		{"refused publish", fmt.Errorf("send m1: %w: %v", cotal.ErrNotPermitted, nats.ErrPermissionViolation), NotAuthorized},
		{"refused connect", fmt.Errorf("%w: connect to nats://x: %v", cotal.ErrNotPermitted, nats.ErrAuthorization), NotAuthorized},
		{"refused join", fmt.Errorf("join secret: %w", fmt.Errorf("%w: %v", cotal.ErrJoinRefused, nats.ErrPermissionViolation)), NotAuthorized},
		{"expired credential", fmt.Errorf("%w at 2026-01-01T00:00:00Z; mint a new one", cotal.ErrCredentialExpired), NotAuthorized},
		// nats.go's own, from the commands that connect without the SDK.
		{"nats authorization", fmt.Errorf("connect: %w", nats.ErrAuthorization), NotAuthorized},
		{"nats revoked", fmt.Errorf("connect: %w", nats.ErrAuthRevoked), NotAuthorized},
		{"nats expired", fmt.Errorf("connect: %w", nats.ErrAuthExpired), NotAuthorized},
		{"nats permission", fmt.Errorf("publish: %w", nats.ErrPermissionViolation), NotAuthorized},
		{"usage beats a refusal", &UsageError{Err: cotal.ErrNotPermitted}, Usage},
		{"unreachable is a failure", fmt.Errorf("%w: nats://x after 3 attempts", cotal.ErrUnreachable), Failed},
		{"refusal text alone is a failure", errors.New("not permitted by the broker"), Failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Code(tt.err); got != tt.want {
				t.Errorf("Code(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}
