package warden

import "testing"

// TestUnservedBounds: a mailbox takes messages up to its byte and message bounds, and every
// mailbox together up to the total, however many recipients the mail is spread over.
func TestUnservedBounds(t *testing.T) {
	var u unservedMail
	b := unservedBounds{perBytes: 100, perMessages: 3, totalBytes: 250}
	admit := func(filter string, size int64) bool {
		ok, _, _ := u.admit("DM_main", filter, 1, size, b)
		return ok
	}
	for i, c := range []struct {
		filter string
		size   int64
		want   bool
	}{
		{"a", 60, true},
		{"a", 50, false}, // over a's 100 bytes
		{"a", 20, true},
		{"a", 10, true},
		{"a", 1, false}, // a's fourth message
		{"b", 90, true},
		{"c", 90, false}, // 90 + 90 + 90 over the total of 250
		{"c", 60, true},
	} {
		if got := admit(c.filter, c.size); got != c.want {
			t.Errorf("step %d: admit(%s, %d) = %v, want %v", i, c.filter, c.size, got, c.want)
		}
	}
	if u.total != 240 {
		t.Errorf("total %d, want 240", u.total)
	}
}
