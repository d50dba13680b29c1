package meshwire_test

import (
	"fmt"
	"testing"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

func TestNames(t *testing.T) {
	const owner, uid = "u_aaaaaaaaaaaaaaaaaaaaaaaaaa", "abcdefghijklmnopqrstuvwxyz"
	sp := wire.Space("main")
	p, err := wire.NewPrincipal(owner, "alice")
	if err != nil {
		t.Fatal(err)
	}
	life := wire.Lifecycle{Principal: p, UID: uid}
	member, err := meshwire.MemberKey("team.backend", life)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, got, want string }{
		{"inbox stream", meshwire.InboxStream(sp), "INBOX_main"},
		{"wfj stream", meshwire.WFJStream(sp), "WFJ_main"},
		{"wfj", meshwire.WFJSubject(sp, "run-1"), "cotal.main.wfj.run-1"},
		{"wfj filter", meshwire.WFJFilter(sp), "cotal.main.wfj.*"},
		{"service key", meshwire.ServiceKey(wire.ManagerEndpoint, uid, meshwire.ServiceSpecLeaf), "svc.manager." + uid + ".spec"},
		{"service keys", meshwire.ServiceEndpointKeys("com.acme.x"), "svc.com_acme_x.>"},
		{"registry", meshwire.ServiceRegistryKeys(), "svc.>"},
		{"members", string(meshwire.MembersBucket(sp)), "cotal_members_main"},
		{"acl", string(meshwire.ACLBucket(sp)), "cotal_acl_main"},
		{"membership", string(meshwire.MembershipBucket(sp)), "cotal_membership_main"},
		{"delivery", string(meshwire.DeliveryBucket(sp)), "cotal_delivery_main"},
		{"manager", string(meshwire.ManagerBucket(sp)), "cotal_manager_main"},
		{"records", string(meshwire.RecordsBucket(sp)), "cotal_records_main"},
		{"auth", string(meshwire.AuthBucket(sp)), "cotal_auth_main"},
		{"userauth", string(meshwire.UserAuthBucket(sp)), "cotal_userauth_main"},
		{"sessions", string(meshwire.SessionsBucket(sp)), "cotal_sessions_main"},
		{"lease grant", meshwire.DeliveryBucket(sp).Subject(meshwire.LeaseKeys()), "$KV.cotal_delivery_main.lease.*"},
		{"lease key", meshwire.LeaseKey(0), "lease.0"},
		{"manager lease", meshwire.ManagerLeaseKey(life.UID), "lease." + uid},
		{"acl key", meshwire.ACLKey(life), owner + ".alice." + uid},
		{"member key", member, "team.backend/" + owner + ".alice." + uid},
		{"feed key", meshwire.MembershipFeedKey, "=feed"},
		{"fanout", meshwire.FanoutDurable, "fanout"},
		{"reader", meshwire.ReaderDurable, "reader"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
	if _, err := meshwire.MemberKey("team.>", life); err == nil {
		t.Error("a member key needs a concrete channel")
	}
	// The reference's order of a space's buckets, then the user-auth store's.
	var got []string
	for _, b := range meshwire.Buckets(sp) {
		got = append(got, string(b))
	}
	want := "cotal_presence_main cotal_channels_main cotal_members_main cotal_acl_main cotal_membership_main cotal_delivery_main cotal_manager_main cotal_records_main cotal_auth_main cotal_userauth_main"
	if g := fmt.Sprint(got); g != "["+want+"]" {
		t.Errorf("buckets = %s, want [%s]", g, want)
	}
}
