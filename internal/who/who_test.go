package who_test

import (
	"testing"

	"github.com/gocotal/cotal/internal/who"
)

func TestIs(t *testing.T) {
	tests := []struct {
		name, display, principal, want string
	}{
		{"plain", "alice", "local.alice", "alice (local.alice)"},
		{"the principal is the subject's, whatever the name says", "alice", "local.mallory", "alice (local.mallory)"},
		{"spaces kept", "Alice Smith", "local.alice", "Alice Smith (local.alice)"},
		{"colour escape and bidi override stripped", "\x1b[31malice\u202e", "local.mallory", "alice (local.mallory)"},
		{"a forged attribution is quoted", "alice (local.alice)", "local.mallory", `"alice (local.alice)" (local.mallory)`},
		{"a forged message is quoted", `bob: "hi"`, "local.mallory", `"bob: \"hi\"" (local.mallory)`},
		{"newline stripped", "al\nice", "local.mallory", "alice (local.mallory)"},
		{"nothing visible left", "\u200b\u3164", "local.mallory", "(local.mallory)"},
		{"empty", "", "local.bob", "(local.bob)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := who.Is(tt.display, tt.principal); got != tt.want {
				t.Errorf("Is(%q, %q) = %q, want %q", tt.display, tt.principal, got, tt.want)
			}
		})
	}
}
