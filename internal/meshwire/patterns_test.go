package meshwire

import "testing"

func TestPatternCovers(t *testing.T) {
	tests := []struct {
		a, p string
		want bool
	}{
		{">", "a", true},
		{">", "a.>", true},
		{">", "*", true},
		{"a.>", "a.b", true},
		{"a.>", "a.*.c", true},
		{"a.>", "a", false},
		{"a.>", ">", false},
		{"a.*", "a.b", true},
		{"a.*", "a.*", true},
		{"a.*", "a.>", false},
		{"a.*", "a.b.c", false},
		{"a.b", "a.b", true},
		{"a.b", "a.*", false},
		{"a.b", "a", false},
		{"*", "a.b", false},
	}
	for _, tt := range tests {
		if got := PatternCovers(tt.a, tt.p); got != tt.want {
			t.Errorf("PatternCovers(%q, %q) = %v, want %v", tt.a, tt.p, got, tt.want)
		}
	}
}

func TestPatternsOverlap(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.*", "a.b", true},
		{"a.*", "*.b", true},
		{"a.>", "a.b.c", true},
		{"a.>", "a", false},
		{">", "a", true},
		{"a.*", "a.b.c", false},
		{"a.*.c", "a.>", true},
		{"a.b", "a.b.c", false},
		{"*.*", "a.>", true},
		{"b.>", "a.>", false},
	}
	for _, tt := range tests {
		if got := PatternsOverlap(tt.a, tt.b); got != tt.want {
			t.Errorf("PatternsOverlap(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := PatternsOverlap(tt.b, tt.a); got != tt.want {
			t.Errorf("PatternsOverlap(%q, %q) = %v, want %v", tt.b, tt.a, got, tt.want)
		}
	}
}
