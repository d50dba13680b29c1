package warden

import "sync"

// seqTrail records where a bucket's watch skipped stream sequences. A bucket keeps one row per
// key: a write stored while the warden was behind can be replaced (by a capture, say) before the
// watch reaches it, and the watch then skips its sequence. Sequences skipped before the watch
// began (rows already replaced then) are no such loss and are not recorded. The warden puts a
// kept row back over a capture only when no sequence between the two was skipped: otherwise a
// newer legitimate write may have stood between them, and restoring the older row would roll it
// back. It is safe for concurrent use.
type seqTrail struct {
	mu       sync.Mutex
	snapshot uint64 // the stream's last sequence when the watch began
	last     uint64 // the last sequence delivered
	gaps     []seqSpan
	// forgotten is the end of the newest gap dropped to bound memory: nothing at or below it can
	// be proven unbroken.
	forgotten uint64
}

type seqSpan struct{ from, to uint64 }

// maxGaps bounds the gaps a trail keeps.
const maxGaps = 4096

func newSeqTrail(snapshot uint64) *seqTrail { return &seqTrail{snapshot: snapshot} }

// observe records that the watch delivered seq.
func (t *seqTrail) observe(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	from := max(t.last, t.snapshot) + 1
	if seq > from {
		t.gaps = append(t.gaps, seqSpan{from: from, to: seq - 1})
		if len(t.gaps) > maxGaps {
			t.forgotten = t.gaps[0].to
			t.gaps = t.gaps[1:]
		}
	}
	t.last = max(t.last, seq)
}

// unbroken reports whether the watch delivered every sequence after from and before to.
func (t *seqTrail) unbroken(from, to uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if from <= t.forgotten {
		return false
	}
	for _, g := range t.gaps {
		if g.from < to && g.to > from {
			return false
		}
	}
	return true
}
