package warden

import "testing"

func TestSeqTrail(t *testing.T) {
	tr := newSeqTrail(10)
	// The initial load skips what was replaced before the watch began: no loss.
	for _, seq := range []uint64{3, 7, 10, 11, 12, 15, 16} {
		tr.observe(seq)
	}
	for _, c := range []struct {
		from, to uint64
		want     bool
	}{
		{3, 11, true},   // the skips before the snapshot
		{11, 12, true},  // neighbours
		{12, 15, false}, // 13 and 14 were skipped while watching
		{10, 16, false},
		{15, 16, true},
	} {
		if got := tr.unbroken(c.from, c.to); got != c.want {
			t.Errorf("unbroken(%d, %d) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
	// Past its bound the trail forgets its oldest gaps, and proves nothing before them.
	for i := range uint64(maxGaps + 1) {
		tr.observe(100 + 2*i)
	}
	if tr.unbroken(15, 16) {
		t.Error("a span before the forgotten gaps was proven unbroken")
	}
}
