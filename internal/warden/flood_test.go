package warden_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
)

// TestNoAcknowledgedWriteIsRolledBack: while a writer keeps writing a channel's registry row,
// publish acknowledgements are aimed at the row on behalf of attackers (a fresh one for each
// burst, as the warden revokes each), planted through the store account, where they land as a
// capture would. No row stored after a write was acknowledged holds an older
// revision: the warden never puts a row back over a newer write it missed. The flood lasts 20 s;
// 8 s under the race detector (CI) and 3 s with -short.
func TestNoAcknowledgedWriteIsRolledBack(t *testing.T) {
	flood := 20 * time.Second
	switch {
	case testing.Short():
		flood = 3 * time.Second
	case raceDetector:
		flood = 8 * time.Second // CI's bounded form, beside other packages' tests on 2 cores
	}
	r := startReplyMesh(t)
	ctx := t.Context()
	sp := r.sp
	subject := sp.ChannelsBucket().Subject("general")
	writer := mustJS(t, r.Connect(t, r.Mint(t, ledger.Request{Profile: authority.ProfileChannelWriter, Name: "flood_writer"})).Conn)
	row := func(n int) []byte {
		return fmt.Appendf(nil, `{"deliveryClass":"durable","description":"revision %d"}`, n)
	}
	revision := func(b []byte) int {
		var n int
		if _, err := fmt.Sscanf(string(b), `{"deliveryClass":"durable","description":"revision %d"}`, &n); err != nil {
			return -1
		}
		return n
	}

	// Attackers, minted ahead so the flood runs at full rate: each one's own chat subject, the
	// only one it may publish to.
	store := r.StoreClient(t)
	const attackers = 60
	mals := make(chan string, attackers)
	for i := range attackers {
		req := ledger.Request{Subscribe: []string{"general"}, AllowPublish: []string{"general"}}
		req.Name = "flood" + strconv.Itoa(i)
		cred := r.AgentCred(t, req)
		own, _ := sp.ChatSubject(cred.Principal, "general")
		mals <- own
	}
	close(mals)

	// Every row the bucket stores is watched in order. A row stored after revision n's
	// acknowledgement (a later stream sequence) that holds an older revision is a rollback.
	var mu sync.Mutex
	acks := []uint64{0} // acks[n] is the stream sequence revision n was stored at
	rollbacks, rows := 0, 0
	watch, err := r.js.OrderedConsumer(ctx, sp.ChannelsBucket().Stream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := watch.Consume(func(m jetstream.Msg) {
		meta, err := m.Metadata()
		got := revision(m.Data())
		if err != nil || got < 0 {
			return // a capture, or a deletion
		}
		mu.Lock()
		defer mu.Unlock()
		rows++
		// The newest revision acknowledged before this row was stored.
		n := sort.Search(len(acks), func(i int) bool { return acks[i] >= meta.Sequence.Stream }) - 1
		if got < n {
			rollbacks++
			t.Errorf("revision %d stored at seq %d, after revision %d was acknowledged at seq %d", got, meta.Sequence.Stream, n, acks[n])
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()

	fctx, stop := context.WithTimeout(ctx, flood)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() {
		for n := 1; fctx.Err() == nil; n++ {
			ack, err := writer.Publish(fctx, subject, row(n))
			if err != nil {
				if fctx.Err() == nil {
					t.Errorf("write revision %d: %v", n, err)
				}
				return
			}
			mu.Lock()
			acks = append(acks, ack.Sequence)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	})
	wg.Go(func() {
		tick := time.NewTicker(flood / attackers)
		defer tick.Stop()
		body := []byte(`{"not":"a post"}`)
		for own := range mals {
			// A burst in its name: each acknowledgement is a capture.
			for range 20 {
				_ = store.PublishMsg(&nats.Msg{Subject: own, Reply: subject, Data: body})
			}
			select {
			case <-fctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	wg.Wait()
	time.Sleep(time.Second) // the warden's last repairs, and the watch, catch up
	mu.Lock()
	defer mu.Unlock()
	if rows == 0 {
		t.Fatal("the watch saw no row")
	}
	t.Logf("%d rows watched, %d rollbacks, %d revisions acknowledged", rows, rollbacks, len(acks)-1)
}
