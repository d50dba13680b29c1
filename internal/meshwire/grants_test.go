package meshwire_test

import (
	"errors"
	"testing"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// TestGrantsAndRails pins the spelling of the grant rows and the mesh's own rails against the
// SPEC's: a grant row is a contract string, so a change of one is a change of what a credential
// may do.
func TestGrantsAndRails(t *testing.T) {
	const ownerA, ownerB = "u_aaaaaaaaaaaaaaaaaaaaaaaaaa", "u_bbbbbbbbbbbbbbbbbbbbbbbbbb"
	sp := wire.Space("main")
	alice, err := wire.NewPrincipal(ownerA, "alice")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := wire.NewPrincipal(ownerB, "bob")
	if err != nil {
		t.Fatal(err)
	}
	life := wire.Lifecycle{Principal: alice, UID: testUID}
	A := ownerA + ".alice"
	conn, err := wire.ParseConnID("abcdefgh")
	if err != nil {
		t.Fatal(err)
	}
	work, err := meshwire.WorkSubject(sp, "manager", "builds", life, "i1")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, got, want string }{
		{"dm send grant", meshwire.DMSendGrant(sp, alice), "cotal.main.inst.*.*." + A},
		{"dm filter", meshwire.DMFilter(sp, bob), "cotal.main.inst." + ownerB + ".bob.>"},
		{"anycast send grant", meshwire.AnycastSendGrant(sp, alice), "cotal.main.svc.*." + A},
		{"ctl serve", meshwire.ControlServeFilter(sp, wire.ControlDeliveryAdmin), "cotal.main.ctl.delivery-admin.*.*"},
		{"ctl reply grant", meshwire.ControlReplyGrant(sp, wire.ControlDelivery), "cotal.main.ctl.delivery.*.*.reply.>"},
		{"live serve", meshwire.LivenessServeFilter(sp, wire.PlaneDelivery), "cotal.main.live.delivery.*.*"},
		{"live reply grant", meshwire.LivenessReplyGrant(sp, wire.PlaneManager), "cotal.main.live.manager.*.*.reply.>"},
		{"live caller subtree", meshwire.Subtree(sp.LivenessSubject(wire.PlaneDelivery, alice)), "cotal.main.live.delivery." + A + ".>"},
		{"timer", meshwire.TimerSubject(sp, "manager", testUID2, 1, "t1", meshwire.TimerArmed), "cotal.main.ept.manager." + string(testUID2) + ".1.t1.armed"},
		{"dinbox", meshwire.DinboxSubject(sp, life), "cotal.main.dinbox." + A + "." + string(testUID)},
		{"dlv", meshwire.DlvSubject(sp, life), "cotal.main.dlv." + A + "." + string(testUID)},
		{"dinbox write grant", meshwire.LifecycleWriteGrant(sp, wire.KindDinbox), "cotal.main.dinbox.*.*.*"},
		{"trace", meshwire.TraceSubject(sp, "x.y"), "cotal.main.trace.x_y"},
		{"inbox grant", meshwire.InboxGrant(conn), "_INBOX_abcdefgh.>"},
		{"artifacts", string(meshwire.ArtifactsBucket(sp)), "cotal_artifacts_main"},
		{"artifacts stream", meshwire.ObjectStream(meshwire.ArtifactsBucket(sp)), "OBJ_cotal_artifacts_main"},
		{"contract stream", meshwire.ContractStream(sp), "EPC_main"},
		{"contract publish", meshwire.ContractPublishGrant(sp), "cotal.main.epc.*"},
		{"event stream", meshwire.EventStream(sp), "EPE_main"},
		{"fact stream", meshwire.FactStream(sp), "EPF_main"},
		{"event publish", meshwire.EventPublishGrant(sp, "manager", testUID2, 3), "cotal.main.epe.manager." + string(testUID2) + ".3.>"},
		{"work", work, "cotal.main.epw.manager.builds." + A + "." + string(testUID) + ".i1"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	if _, err := meshwire.WorkSubject(sp, "manager", "Pool", life, "i"); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("a work pool that is not a command: %v, want invalid", err)
	}
}
