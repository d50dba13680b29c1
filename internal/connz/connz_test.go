package connz_test

import (
	"slices"
	"testing"

	"github.com/gocotal/cotal/internal/connz"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// TestSubscribing lists only the connections whose subscriptions collide with the subject: a
// channel's reader, not a connection subscribing nothing there, which List still holds.
func TestSubscribing(t *testing.T) {
	m := meshtest.Start(t)
	ctx := t.Context()
	sys, account := m.ConnzObserver(t)

	reader, rc := m.Agent(t, ledger.Request{Name: "reader", Subscribe: []string{"general"}})
	filter, _ := m.Space.ChatFilter("general")
	if _, err := rc.Conn.SubscribeSync(filter); err != nil {
		t.Fatal(err)
	}
	if err := rc.Conn.Flush(); err != nil {
		t.Fatal(err)
	}
	quiet, _ := m.Agent(t, ledger.Request{Name: "quiet"})
	principals := func(conns []connz.Conn) []wire.Principal {
		var out []wire.Principal
		for _, c := range conns {
			if p, ok := c.Principal(); ok {
				out = append(out, p)
			}
		}
		return out
	}

	chat := m.Space.KindAll(wire.KindChat)
	got, err := connz.Subscribing(ctx, sys, account, chat)
	if err != nil {
		t.Fatal(err)
	}
	if ps := principals(got); !slices.Contains(ps, reader.Principal) || slices.Contains(ps, quiet.Principal) {
		t.Errorf("connections subscribing %s: %v; want the reader's and not the quiet agent's", chat, ps)
	}
	all, err := connz.List(ctx, sys, account)
	if err != nil {
		t.Fatal(err)
	}
	if ps := principals(all); !slices.Contains(ps, reader.Principal) || !slices.Contains(ps, quiet.Principal) {
		t.Errorf("every connection: %v; want the reader's and the quiet agent's", ps)
	}
}
