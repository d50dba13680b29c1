package mcptools

import (
	"testing"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/wire"
)

// one measures every message as one unit: no budget limits the read.
func one(*cotal.Delivery) int { return 1 }

func delivery(kind wire.DeliveryKind, id string) *cotal.Delivery {
	return &cotal.Delivery{Kind: kind, Message: &wire.CotalMessage{ID: id, Parts: []wire.Part{wire.TextPart(id)}}}
}

// TestInboxAcksOnlyWhatWasShown: a DM is deferred (acknowledged when a read shows it, else
// redelivered) and a redelivery of a shown one is acknowledged; a channel message that does not fit is dropped and counted.
func TestInboxAcksOnlyWhatWasShown(t *testing.T) {
	b := NewInbox(2)
	arrivals := 0
	b.onArrival = func(*cotal.Delivery) { arrivals++ }
	dm := delivery(wire.DeliveryDM, "dm1")
	if err := b.Offer(t.Context(), dm); err != cotal.ErrDefer {
		t.Fatalf("a new DM = %v, want ErrDefer", err)
	}
	if err := b.Offer(t.Context(), dm); err != cotal.ErrDefer || b.Unread() != 1 {
		t.Fatalf("a redelivered, unshown DM = %v with %d unread; want ErrDefer and no copy", err, b.Unread())
	}
	if err := b.Offer(t.Context(), delivery(wire.DeliveryChannel, "c1")); err != nil {
		t.Fatal(err)
	}
	if err := b.Offer(t.Context(), delivery(wire.DeliveryChannel, "c2")); err != nil || b.Unread() != 2 {
		t.Fatalf("an overflowing channel message = %v, %d unread", err, b.Unread())
	}
	if err := b.Offer(t.Context(), delivery(wire.DeliveryAnycast, "task1")); err != errNotShown {
		t.Fatalf("an overflowing task = %v, want errNotShown so it comes back", err)
	}
	if got := b.Read(true, 1<<20, one); len(got.Messages) != 2 || got.Dropped != 2 {
		t.Fatalf("peek = %d messages, %d dropped", len(got.Messages), got.Dropped)
	}
	if err := b.Offer(t.Context(), dm); err != cotal.ErrDefer {
		t.Fatalf("a DM only peeked at = %v, want ErrDefer", err)
	}
	if got := b.Read(false, 1<<20, one); len(got.Messages) != 2 || b.Unread() != 0 {
		t.Fatalf("read = %d messages, %d left", len(got.Messages), b.Unread())
	}
	if err := b.Offer(t.Context(), dm); err != nil || b.Unread() != 0 {
		t.Fatalf("the shown DM's redelivery = %v with %d unread; want it acknowledged, not buffered", err, b.Unread())
	}
	if arrivals != 2 {
		t.Errorf("%d arrivals announced, want 2", arrivals)
	}
}

// TestWakingCounts: a mention held under focus woke the agent (a nudge is about it) though no
// hand-in takes it; a message too large for any read wakes no more once a read named it.
func TestWakingCounts(t *testing.T) {
	b := NewInbox(10)
	b.att.names = []string{"claude"}
	b.SetAttention(wire.AttentionFocus)
	mention := delivery(wire.DeliveryChannel, "m1")
	mention.Message.Mentions = []string{"claude"}
	if err := b.Offer(t.Context(), mention); err != nil {
		t.Fatal(err)
	}
	if n, ever := b.Waking(); n != 1 || ever != 1 || b.Waiting() != 0 {
		t.Fatalf("a held mention under focus: waking %d (ever %d), waiting %d", n, ever, b.Waiting())
	}
	b.SetAttention(wire.AttentionOpen)
	big := delivery(wire.DeliveryDM, "big")
	if err := b.Offer(t.Context(), big); err != cotal.ErrDefer {
		t.Fatal(err)
	}
	if b.Waiting() != 1 || b.Latest() != big {
		t.Fatalf("the big DM: waiting %d, latest %v", b.Waiting(), b.Latest())
	}
	got := b.Take(10, func(d *cotal.Delivery) int {
		if d == big {
			return 100
		}
		return 1
	})
	if len(got.TooLarge) != 1 || b.Waiting() != 0 || b.Unread() != 2 {
		t.Fatalf("after a read named it too large: %+v, waiting %d, unread %d", got, b.Waiting(), b.Unread())
	}
}
