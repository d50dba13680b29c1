package exit

import (
	"errors"
	"fmt"
	"testing"
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Code(tt.err); got != tt.want {
				t.Errorf("Code(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}
