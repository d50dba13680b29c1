package coremsg_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/coremsg"
)

func TestPublished(t *testing.T) {
	rail := &nats.Subscription{Subject: "cotal.main.eps.manager.s.0.in"}
	feed := &nats.Subscription{Subject: "cotal.main.chat.>"}
	for _, c := range []struct {
		name string
		m    *nats.Msg
		want bool
	}{
		{"published on the rail", &nats.Msg{Subject: rail.Subject, Sub: rail}, true},
		{"published under a wildcard", &nats.Msg{Subject: "cotal.main.chat.general.local.alice", Sub: feed}, true},
		{"a direct message delivered onto the rail", &nats.Msg{Subject: "cotal.main.inst.local.mal.local.mal", Sub: rail, Reply: "$JS.ACK.DM_main.d.1.1.1.1.0"}, false},
		{"a direct message delivered onto a feed", &nats.Msg{Subject: "cotal.main.inst.local.mal.local.mal", Sub: feed}, false},
		{"no subscription", &nats.Msg{Subject: rail.Subject}, false},
		{"nil", nil, false},
	} {
		if got := coremsg.Published(c.m); got != c.want {
			t.Errorf("%s: Published = %v, want %v", c.name, got, c.want)
		}
	}
}
