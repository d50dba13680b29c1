package authority_test

import (
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// TestServeFilterHoldsItsDepth: a serve credential that subscribes beyond its serve filter's
// depth (P.live.manager.*.> under the grant P.live.manager.*.*) gets the requests on the rail,
// but the broker drops every answer on its reply leaves, another instance's included: the
// sub.deny row holds the filter to its depth (SPEC §13.9 rests reply secrecy on it).
func TestServeFilterHoldsItsDepth(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	aliceCred, alice := m.Agent(t, ledger.Request{Name: "alice"})
	sup := m.Mint(t, ledger.Request{Profile: authority.ProfileSupervisor, Name: "sup"})
	supervisor := m.Connect(t, sup)
	for _, tc := range []struct {
		profile   authority.Profile
		filter    string
		requester *meshtest.Client
		request   string
	}{
		{authority.ProfileSupervisor, meshwire.LivenessServeFilter(m.Space, wire.PlaneManager), alice, m.Space.LivenessSubject(wire.PlaneManager, aliceCred.Principal)},
		{authority.ProfileDelivery, meshwire.LivenessServeFilter(m.Space, wire.PlaneDelivery), alice, m.Space.LivenessSubject(wire.PlaneDelivery, aliceCred.Principal)},
		{authority.ProfileDelivery, meshwire.ControlServeFilter(m.Space, wire.ControlDelivery), alice, m.Space.ControlSubject(wire.ControlDelivery, aliceCred.Principal)},
		{authority.ProfileDelivery, meshwire.ControlServeFilter(m.Space, wire.ControlDeliveryAdmin), supervisor, m.Space.ControlSubject(wire.ControlDeliveryAdmin, sup.Principal)},
	} {
		t.Run(tc.filter, func(t *testing.T) {
			snoop := m.Connect(t, m.Mint(t, ledger.Request{Profile: tc.profile, Name: "snoop"}))
			other := m.Connect(t, m.Mint(t, ledger.Request{Profile: tc.profile, Name: "other"}))
			rail := tc.filter[:len(tc.filter)-len("*.*")]
			sub, err := snoop.SubscribeSync(rail + "*.>")
			if err != nil {
				t.Fatal(err)
			}
			if err := snoop.Flush(); err != nil {
				t.Fatal(err)
			}
			request, reply := tc.request, wire.ReplySubject(tc.request, "n2")
			if err := other.Publish(reply, []byte("answer")); err != nil {
				t.Fatal(err)
			}
			if refused, err := other.Refused("Publish", reply); err != nil || refused {
				t.Fatalf("the broker refused the other instance's answer (%v, %v): the test proves nothing", refused, err)
			}
			if err := tc.requester.Publish(request, []byte("request")); err != nil {
				t.Fatal(err)
			}
			msg, err := sub.NextMsg(5 * time.Second)
			if err != nil {
				t.Fatalf("the request within the filter's depth did not arrive: %v", err)
			}
			if msg.Subject != request {
				t.Fatalf("the snooping subscription got %s (%q): an answer beyond the filter's depth", msg.Subject, msg.Data)
			}
			if extra, err := sub.NextMsg(300 * time.Millisecond); err == nil {
				t.Errorf("the snooping subscription got %s", extra.Subject)
			}
		})
	}
}
