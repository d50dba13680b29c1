package mcptools

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/wire"
)

// TestAttentionTable pins the state machine: every attention mode against every kind of arrival,
// with the channel modes and replayed history before it.
func TestAttentionTable(t *testing.T) {
	type arr = arrival
	var (
		through  = arr{wake: true}
		quiet    = arr{}
		deferred = arr{later: true}
		held     = arr{held: true}
		recall   = arr{held: true, wake: true}
		dropped  = arr{drop: true}
	)
	for _, tc := range []struct {
		name    string
		mode    wire.AttentionMode
		channel wire.ChannelMode
		working bool
		kind    wire.DeliveryKind
		mention bool
		history bool
		want    arrival
	}{
		{"open DM", wire.AttentionOpen, "", false, wire.DeliveryDM, false, false, through},
		{"open task", wire.AttentionOpen, "", false, wire.DeliveryAnycast, false, false, through},
		{"open mention", wire.AttentionOpen, "", true, wire.DeliveryChannel, true, false, through},
		{"open ambient, idle", wire.AttentionOpen, "", false, wire.DeliveryChannel, false, false, through},
		{"open ambient, working", wire.AttentionOpen, "", true, wire.DeliveryChannel, false, false, deferred},
		{"dnd DM", wire.AttentionDND, "", false, wire.DeliveryDM, false, false, through},
		{"dnd mention", wire.AttentionDND, "", false, wire.DeliveryChannel, true, false, through},
		{"dnd ambient", wire.AttentionDND, "", false, wire.DeliveryChannel, false, false, quiet},
		{"focus DM", wire.AttentionFocus, "", false, wire.DeliveryDM, false, false, through},
		{"focus task", wire.AttentionFocus, "", false, wire.DeliveryAnycast, false, false, through},
		{"focus mention", wire.AttentionFocus, "", false, wire.DeliveryChannel, true, false, recall},
		{"focus ambient", wire.AttentionFocus, "", false, wire.DeliveryChannel, false, false, held},
		{"quiet ambient", wire.AttentionOpen, wire.ChannelQuiet, false, wire.DeliveryChannel, false, false, held},
		{"quiet ambient under focus", wire.AttentionFocus, wire.ChannelQuiet, false, wire.DeliveryChannel, false, false, held},
		{"quiet mention", wire.AttentionOpen, wire.ChannelQuiet, false, wire.DeliveryChannel, true, false, through},
		{"muted ambient", wire.AttentionOpen, wire.ChannelMuted, false, wire.DeliveryChannel, false, false, dropped},
		{"muted mention", wire.AttentionOpen, wire.ChannelMuted, false, wire.DeliveryChannel, true, false, dropped},
		{"muted channel, DM", wire.AttentionOpen, wire.ChannelMuted, false, wire.DeliveryDM, false, false, through},
		{"history never wakes", wire.AttentionOpen, "", false, wire.DeliveryChannel, true, true, quiet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := attention{mode: tc.mode, channels: map[string]wire.ChannelMode{"x": tc.channel}, names: []string{"claude"}, working: tc.working}
			d := &cotal.Delivery{Kind: tc.kind, Historical: tc.history, Message: &wire.CotalMessage{ID: "m"}}
			if tc.kind == wire.DeliveryChannel {
				d.Channel = "x"
			}
			if tc.mention {
				d.Message.Mentions = []string{"Claude"}
			}
			if got := a.decide(d); got != tc.want {
				t.Errorf("decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestInboxWindow: 60 DMs of a kilobyte do not fit one reply of InboxWindow characters: the first
// read is within it and says more are held, the second returns the rest, none lost, none twice;
// direct messages come before channel chatter; a message too large for any reply is named and
// kept.
func TestInboxWindow(t *testing.T) {
	b := NewInbox(500)
	size := func(d *cotal.Delivery) int { return len(inboxLine(d, true)) }
	body := strings.Repeat("x", 1000)
	bob, err := wire.ParsePrincipal("local.bob")
	if err != nil {
		t.Fatal(err)
	}
	offer := func(kind wire.DeliveryKind, id, text string) {
		d := &cotal.Delivery{Kind: kind, Sender: bob, Message: &wire.CotalMessage{ID: id, Parts: []wire.Part{wire.TextPart(text)}}}
		if kind == wire.DeliveryChannel {
			d.Channel = "general"
		}
		_ = b.Offer(t.Context(), d)
	}
	offer(wire.DeliveryChannel, "chatter", "hello all")
	for i := range 60 {
		offer(wire.DeliveryDM, fmt.Sprintf("dm%02d", i), body)
	}
	offer(wire.DeliveryDM, "huge", strings.Repeat("y", 60000))
	budget := InboxWindow - 1000
	seen := map[string]int{}
	first := b.Read(false, budget, size)
	if first.More == 0 || len(first.TooLarge) != 1 || first.TooLarge[0] != "huge" {
		t.Fatalf("the first read: %d shown, %d more, too large %v", len(first.Messages), first.More, first.TooLarge)
	}
	total := 0
	for i, d := range first.Messages {
		total += size(d)
		seen[d.Message.ID]++
		if d.Kind != wire.DeliveryDM {
			t.Fatalf("message %d of the first read is %s, before a DM", i, d.Kind)
		}
	}
	if total > budget {
		t.Fatalf("the first read carries %d characters, over %d", total, budget)
	}
	second := b.Read(false, budget, size)
	for _, d := range second.Messages {
		seen[d.Message.ID]++
	}
	if second.More != 0 || len(seen) != 61 {
		t.Fatalf("two reads returned %d distinct messages, %d more", len(seen), second.More)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s returned %d times", id, n)
		}
	}
	if last := second.Messages[len(second.Messages)-1]; last.Message.ID != "chatter" {
		t.Errorf("the channel message came before a DM: last is %s", last.Message.ID)
	}
	if b.Unread() != 1 {
		t.Errorf("the too-large DM was not kept: %d unread", b.Unread())
	}
}
