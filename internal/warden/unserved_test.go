package warden_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/warden"
	"github.com/gocotal/cotal/wire"
)

// TestMailToNobodyIsBounded: an agent stores 24 MiB of direct messages to a principal that has no
// lifecycle, and as much in tasks for a role nobody serves, half again the warden's bound; what
// waits for each stays within it. Mail to an agent that has a durable is never touched.
func TestMailToNobodyIsBounded(t *testing.T) {
	r := startReplyMesh(t)
	ctx := t.Context()
	sp := r.sp
	mal := r.malCred.Principal
	ghost, _ := wire.NewPrincipal("local", "ghost")
	big := strings.Repeat("x", 512<<10)
	js := mustJS(t, r.mal.Conn)
	const sent = 48 // 24 MiB each way
	for range sent {
		dm := message(t, sp, mal, big, func(m *wire.CotalMessage) { m.To = ghost.String() })
		if _, err := js.Publish(ctx, sp.DMSubject(ghost, mal), dm); err != nil {
			t.Fatalf("store a DM to nobody: %v", err)
		}
		task, _ := sp.AnycastSubject("nobody_serves", mal)
		body := message(t, sp, mal, big, func(m *wire.CotalMessage) { m.ToService = "nobody_serves" })
		if _, err := js.Publish(ctx, task, body); err != nil {
			t.Fatalf("store a task for nobody: %v", err)
		}
	}
	bob := r.bob.Principal
	for range 8 { // to bob, who has a durable: kept whole
		dm := message(t, sp, mal, big, func(m *wire.CotalMessage) { m.To = bob.String() })
		if _, err := js.Publish(ctx, sp.DMSubject(bob, mal), dm); err != nil {
			t.Fatalf("store a DM to bob: %v", err)
		}
	}
	bound := int(warden.DefaultUnservedBytes/(512<<10)) + 1
	count := func(stream, filter string) int {
		st, err := r.js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, c := range info.State.Subjects {
			n += int(c)
		}
		return n
	}
	toGhost, toRole := meshwire.DMFilter(sp, ghost), "cotal."+string(sp)+".svc.nobody_serves.>"
	until := time.Now().Add(15 * time.Second)
	for count(sp.DMStream(), toGhost) > bound || count(sp.TaskStream(), toRole) > bound {
		if time.Now().After(until) {
			t.Fatalf("still waiting for nobody: %d DMs and %d tasks, over the bound of %d", count(sp.DMStream(), toGhost), count(sp.TaskStream(), toRole), bound)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := count(sp.DMStream(), meshwire.DMFilter(sp, bob)); n != 8 {
		t.Errorf("bob's mail: %d of 8 kept", n)
	}
}
