package meshwire

import (
	"errors"
	"testing"

	"github.com/gocotal/cotal/wire"
)

func TestParseRailRequest(t *testing.T) {
	sp := wire.Space("main")
	alice := testCaller(t).Principal
	r, err := ParseRailRequest(sp.LivenessSubject(wire.PlaneDelivery, alice))
	if err != nil || r.Kind != wire.KindLive || r.Service != "delivery" || r.Caller != alice || r.Space != "main" {
		t.Errorf("live request parsed as %+v, %v", r, err)
	}
	r, err = ParseRailRequest(sp.ControlSubject(wire.ControlDelivery, alice))
	if err != nil || r.Kind != wire.KindCtl || r.Service != "delivery" || r.Caller != alice {
		t.Errorf("ctl request parsed as %+v, %v", r, err)
	}
	for _, bad := range []string{
		sp.LivenessSubject(wire.PlaneDelivery, alice) + ".reply.x",
		"cotal.main.chat.local.alice.x",
		"cotal.main.live.delivery.a-b.alice",
		"cotal.main.live.delivery.*.*",
	} {
		if _, err := ParseRailRequest(bad); !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("ParseRailRequest(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestParseLifecycleSubject(t *testing.T) {
	life := testCaller(t)
	uid := string(life.UID)
	kind, got, err := ParseLifecycleSubject("cotal.main.dinbox.local.alice." + uid)
	if err != nil || kind != wire.KindDinbox || got != life {
		t.Errorf("dinbox parsed as %s %v, %v", kind, got, err)
	}
	kind, got, err = ParseLifecycleSubject("cotal.main.dlv.local.alice." + uid)
	if err != nil || kind != wire.KindDlv || got != life {
		t.Errorf("dlv parsed as %s %v, %v", kind, got, err)
	}
	for _, bad := range []string{
		"cotal.main.dinbox.local.alice",
		"cotal.main.dinbox.local.alice.NOTAUID",
		"cotal.main.inst.local.alice." + uid,
	} {
		if _, _, err := ParseLifecycleSubject(bad); !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("ParseLifecycleSubject(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestIsBoundReply(t *testing.T) {
	req := "cotal.main.live.manager.local.alice"
	tests := []struct {
		reply string
		ok    bool
	}{
		{req + ".reply.n1", true},
		{req + ".reply.a.b", true},
		{req + ".reply.", false},
		{req + ".reply", false},
		{req, false},
		{req + ".other.n1", false},
		{"_INBOX.x", false},
		{"cotal.main.live.manager.local.bob.reply.n1", false},
		{req + "x.reply.n1", false},
		{req + ".reply..n1", false},
	}
	for _, tt := range tests {
		if got := IsBoundReply(req, tt.reply); got != tt.ok {
			t.Errorf("IsBoundReply(%q) = %v, want %v", tt.reply, got, tt.ok)
		}
	}
}
