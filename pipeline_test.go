package cotal_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/cotaltest"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// TestPipelinedSends: a thousand posts and a thousand DMs sent without waiting, through a small
// window, are each stored once, in order, and surface once; a message sent again under its id is
// stored once; the refusals before publishing stay per message; Wait is safe to repeat.
func TestPipelinedSends(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t)
	ctx := t.Context()
	alice := m.Agent(t, "alice", cotaltest.Channels("general")).Connect(t, cotal.WithSendWindow(16))
	got := cotaltest.NewRecorder()
	bob := m.Agent(t, "bob", cotaltest.Channels("general")).Connect(t, cotal.WithHandler(got.Handle))
	if _, err := bob.Join(ctx, "general"); err != nil {
		t.Fatal(err)
	}
	const n = 1000
	var pending []*cotal.Pending
	for i := range n {
		p, err := alice.PostAsync(ctx, "general", []wire.Part{wire.TextPart(fmt.Sprint("post ", i))})
		if err != nil {
			t.Fatal(err)
		}
		d, err := alice.DirectMessageAsync(ctx, bob.Principal(), []wire.Part{wire.TextPart(fmt.Sprint("dm ", i))})
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, p, d)
	}
	last := map[string]uint64{}
	for _, p := range pending {
		s, err := p.Wait(ctx)
		if err != nil {
			t.Fatalf("%s: %v", p.ID(), err)
		}
		if s.ID != p.ID() || s.Duplicate || s.Seq <= last[s.Stream] {
			t.Fatalf("%s stored as %+v after seq %d", p.ID(), s, last[s.Stream])
		}
		last[s.Stream] = s.Seq
	}
	meshtest.Eventually(t, 30*time.Second, "bob surfacing every post and DM", func() bool { return len(got.Deliveries()) >= 2*n })
	seen := map[string]int{}
	for _, d := range got.Deliveries() {
		seen[d.Message.ID]++
	}
	for _, p := range pending {
		if seen[p.ID()] != 1 {
			t.Fatalf("%s surfaced %d times", p.ID(), seen[p.ID()])
		}
	}

	// The same id again is stored once; Wait from two goroutines, and again, agrees.
	again, err := alice.SendAsync(ctx, &wire.CotalMessage{ID: pending[0].ID(), Channel: "general", Parts: []wire.Part{wire.TextPart("again")}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	sents := make([]*cotal.Sent, 2)
	for i := range sents {
		wg.Go(func() {
			s, err := again.Wait(ctx)
			if err != nil {
				t.Error(err)
			}
			sents[i] = s
		})
	}
	wg.Wait()
	if s, _ := again.Wait(ctx); sents[0] == nil || sents[0] != sents[1] || s != sents[0] || !s.Duplicate {
		t.Errorf("the same id again: %+v %+v %+v", sents[0], sents[1], s)
	}

	if _, err := alice.PostAsync(ctx, "secret", []wire.Part{wire.TextPart("x")}); !errors.Is(err, cotal.ErrNotPermitted) {
		t.Errorf("a post outside allow-publish: %v, want ErrNotPermitted", err)
	}
	if _, err := alice.DirectMessageAsync(ctx, wire.Principal{}, []wire.Part{wire.TextPart("x")}); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("a DM to nobody: %v, want ErrInvalid", err)
	}
	if _, err := cotal.Connect(ctx, m.URL(), cotal.WithSendWindow(0)); !errors.Is(err, cotal.ErrInvalidOption) {
		t.Errorf("a window of 0: %v, want ErrInvalidOption", err)
	}
}

// TestPipelinedSendWindowFull: with the broker gone no acknowledgement comes, so a window of one
// stays full: the next send waits for a slot until its context's deadline and fails with
// ErrWindowFull, and the one in flight fails on its own once its acknowledgement is overdue.
func TestPipelinedSendWindowFull(t *testing.T) {
	t.Parallel()
	m := cotaltest.StartMesh(t)
	ctx := t.Context()
	a := m.Agent(t, "alice", cotaltest.Channels("general"))
	alice, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(a.Creds), cotal.WithPresence(false), cotal.WithSendWindow(1))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close(context.Background()) //nolint:errcheck // the broker is gone by then
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	first, err := alice.PostAsync(ctx, "general", []wire.Part{wire.TextPart("one")})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := alice.PostAsync(wctx, "general", []wire.Part{wire.TextPart("two")}); !errors.Is(err, cotal.ErrWindowFull) {
		t.Fatalf("a send into a full window: %v, want ErrWindowFull", err)
	}
	if _, err := first.Wait(ctx); err == nil {
		t.Fatal("a send the broker never acknowledged succeeded")
	}
}
