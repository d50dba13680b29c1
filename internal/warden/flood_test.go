package warden_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
)

// TestNoAcknowledgedWriteIsRolledBack: while a writer keeps writing a channel's registry row,
// attackers (a fresh one for each capture, as the warden revokes each) aim publish
// acknowledgements at the row. Every read after a write was acknowledged shows that write or a
// later one, never an older row put back over a capture. The flood lasts 20 seconds, 3 with
// -short.
func TestNoAcknowledgedWriteIsRolledBack(t *testing.T) {
	flood := 20 * time.Second
	if testing.Short() {
		flood = 3 * time.Second
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

	// Attackers, minted ahead so the flood runs at full rate.
	type attacker struct {
		c   *meshtest.Client
		own string // its own chat subject: the only one it may publish to
	}
	const attackers = 60
	mals := make(chan attacker, attackers)
	for i := range attackers {
		req := ledger.Request{Subscribe: []string{"general"}, AllowPublish: []string{"general"}}
		req.Name = "flood" + strconv.Itoa(i)
		cred, c := r.Agent(t, req)
		own, _ := sp.ChatSubject(cred.Principal, "general")
		mals <- attacker{c: c, own: own}
	}
	close(mals)

	fctx, stop := context.WithTimeout(ctx, flood)
	defer stop()
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := 0 // the newest acknowledged revision
	wg.Go(func() {
		for n := 1; fctx.Err() == nil; n++ {
			if _, err := writer.Publish(fctx, subject, row(n)); err != nil {
				if fctx.Err() == nil {
					t.Errorf("write revision %d: %v", n, err)
				}
				return
			}
			mu.Lock()
			acked = n
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	})
	wg.Go(func() {
		tick := time.NewTicker(flood / attackers)
		defer tick.Stop()
		body := []byte(`{"not":"a post"}`)
		for a := range mals {
			// A burst until the warden revokes it: each acknowledgement is a capture.
			for range 20 {
				_ = a.c.PublishMsg(&nats.Msg{Subject: a.own, Reply: subject, Data: body})
			}
			select {
			case <-fctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	rollbacks := 0
	reads := 0
	for fctx.Err() == nil {
		mu.Lock()
		floor := acked
		mu.Unlock()
		m, err := kvget.ReadLast(ctx, r.inspector, sp.ChannelsBucket().Stream(), subject)
		if err == nil && m.Header.Get("KV-Operation") == "" {
			if got := revision(m.Data); got >= 0 && got < floor {
				rollbacks++
				t.Errorf("read revision %d after revision %d was acknowledged", got, floor)
			}
		} else if err != nil && !errors.Is(err, kvget.ErrNotFound) {
			t.Fatal(err)
		}
		reads++
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	t.Logf("%d reads, %d rollbacks, last acknowledged revision %d", reads, rollbacks, acked)
}
