package delivery_test

import (
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
)

// TestRevocationAndLeaveRaceTheBackstop: while a sender keeps posts flowing, pipelined so that
// the fan-out and the reader handle them in batches, one member's read ACL is revoked and
// another member leaves. Every post stored after the revocation, or after the leave, is never
// handed over to that member, though the batch it is in was fetched before; what each got
// before is handed over.
func TestRevocationAndLeaveRaceTheBackstop(t *testing.T) {
	t.Parallel()
	m, alice := teamBackstop(t)
	ctx := t.Context()
	// The members connect without a handler: their hand-offs stay in the dlv stream to be read.
	members := map[string]*authority.Credential{}
	clients := map[string]*cotal.Client{}
	for _, name := range []string{"bob", "carol", "dave"} {
		members[name] = m.AgentCred(t, ledger.Request{Name: name, Subscribe: []string{"team"}})
		clients[name] = connect(t, m, members[name].Creds, nil)
		joinDurable(t, clients[name], "team")
	}
	// The warden's credential reads every message stream.
	js := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileWarden, Name: "check"})).JS
	frontier := func() uint64 {
		st, err := js.Stream(ctx, m.Space.ChatStream())
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().State.LastSeq
	}

	// Fewer posts than a subject keeps (CHAT per sender and channel, dlv per member), in chunks
	// of pipelined posts, so that many are in flight when the revocation and the leave land.
	const posts, chunk = 900, 30
	var mu sync.Mutex
	seqOf := map[string]uint64{} // message id → CHAT sequence
	chunks := make(chan int, posts/chunk)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(chunks)
		for c := range posts / chunk {
			pending := make([]*cotal.Pending, 0, chunk)
			for range chunk {
				p, err := alice.PostAsync(ctx, "team", say("p"))
				if err != nil {
					t.Error(err)
					return
				}
				pending = append(pending, p)
			}
			for _, p := range pending {
				sent, err := p.Wait(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seqOf[sent.ID] = sent.Seq
				mu.Unlock()
			}
			chunks <- c
		}
	})
	for c := range chunks {
		if c == posts/chunk/4 {
			break
		}
	}
	prov := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileProvisioner, Name: "prov"}))
	carol := members["carol"]
	if err := space.WriteACL(ctx, prov.JS, m.Space, wire.Lifecycle{Principal: carol.Principal, UID: carol.LifecycleUID}, nil, false); err != nil {
		t.Fatal(err)
	}
	revoked := frontier() // every post after it was stored after the revocation
	beforeLeave := frontier()
	if err := clients["dave"].Leave(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	left := frontier() // every post after it was stored after the leave
	for range chunks {
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if left >= frontier() {
		t.Fatalf("the leave at %d came after the last post: no race", left)
	}
	t.Logf("revoked at %d, left between %d and %d, %d posts up to %d", revoked, beforeLeave, left, posts, frontier())
	inboxDrained(t, m)

	handed := func(name string) []uint64 {
		cred := members[name]
		cons, err := js.OrderedConsumer(ctx, m.Space.DLVStream(), jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{meshwire.DlvSubject(m.Space, wire.Lifecycle{Principal: cred.Principal, UID: cred.LifecycleUID})},
		})
		if err != nil {
			t.Fatal(err)
		}
		var seqs []uint64
		for {
			msg, err := cons.Next(jetstream.FetchMaxWait(time.Second))
			if err != nil {
				return seqs // nothing more within a second: the stream is read
			}
			frame, err := wire.DecodeDeliveryFrame(msg.Data())
			if err != nil {
				t.Fatalf("%s's hand-off: %v", name, err)
			}
			mu.Lock()
			seq, ok := seqOf[frame.Msg.ID]
			mu.Unlock()
			if !ok {
				t.Fatalf("%s was handed %s, which was never posted", name, frame.Msg.ID)
			}
			seqs = append(seqs, seq)
		}
	}
	if got := handed("bob"); len(got) != posts {
		t.Errorf("bob, a member throughout, was handed %d of %d posts", len(got), posts)
	}
	// What was stored after the revocation is never handed over; what came before may be, if the
	// reader handed it over before the revocation.
	for _, seq := range handed("carol") {
		if seq > revoked {
			t.Errorf("carol was handed the post at %d, stored after her revocation at %d", seq, revoked)
		}
	}
	// A leave is a cursor: what came before it is handed over, what came after never.
	var before int
	for _, seq := range handed("dave") {
		if seq > left {
			t.Errorf("dave was handed the post at %d, stored after he left at %d", seq, left)
		}
		before++
	}
	var want int
	for _, seq := range seqOf {
		if seq <= beforeLeave {
			want++
		}
	}
	if before < want {
		t.Errorf("dave was handed %d posts, want the %d stored before he left", before, want)
	}
}
