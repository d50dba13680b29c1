package meshwire_test

import (
	"testing"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

const (
	testUID  wire.LifecycleUID = "abcdefghijklmnopqrstuvwxyz"
	testUID2 wire.LifecycleUID = "zyxwvutsrqponmlkjihgfedcba23"
)

// TestRecordAndGrantBuilders pins each builder's spelling against the SPEC's: a grant row is a
// contract string, so a change of one is a change of what a credential may do.
func TestRecordAndGrantBuilders(t *testing.T) {
	s := wire.Space("main")
	iid := testUID
	manager := wire.ManagerEndpoint
	for _, tt := range []struct{ name, got, want string }{
		{"fact family", meshwire.FactFamilyGrant(s, "com.acme.x", meshwire.FactWork), "cotal.main.epf.com_acme_x.wrk.>"},
		{"record key", meshwire.RecordKey(meshwire.RecordRun, manager, "r-1", meshwire.RecordStatusLeaf), "run.manager.r-1.status"},
		{"record subtree", meshwire.RecordKey(meshwire.RecordGoalIndex, "com.acme.x", ">"), "goalidx.com_acme_x.>"},
		{"record one key", meshwire.RecordKey(meshwire.RecordMigrate, manager), "epmig.manager"},
		{"session ledger", meshwire.SessionLedgerKeys(), "session.*"},
		{"admission bucket", string(meshwire.AdmissionBucket(s)), "cotal_admission_main"},
		{"admission stream", meshwire.AdmissionBucket(s).Stream(), "KV_cotal_admission_main"},
		{"admission key", meshwire.AdmissionKey(manager, "r-1"), "admission.v1.manager.r-1"},
		{"timer stream", meshwire.TimerStream(s), "EPT_main"},
		{"timer schedule", meshwire.TimerScheduleGrant(s, manager, iid, 3), "cotal.main.ept.manager." + string(iid) + ".3.*.schedule"},
		{"transfer bucket", string(meshwire.TransferBucket(s, iid)), "cotal_xfer_main_" + string(iid)},
		{"transfer stream", meshwire.ObjectStream(meshwire.TransferBucket(s, iid)), "OBJ_cotal_xfer_main_" + string(iid)},
		{"object chunk", meshwire.ObjectSubject(meshwire.TransferBucket(s, iid), meshwire.ObjectChunk, "ab"), "$O.cotal_xfer_main_" + string(iid) + ".C.ab"},
		{"object meta grant", meshwire.ObjectMetaGrant(meshwire.TransferBucket(s, iid)), "$O.cotal_xfer_main_" + string(iid) + ".M.>"},
		{"object all", meshwire.ObjectAll(meshwire.TransferBucket(s, iid)), "$O.cotal_xfer_main_" + string(iid) + ".>"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	// Two instances never share a transfer stream, and no instance's is the artifact store's.
	if meshwire.TransferBucket(s, iid) == meshwire.TransferBucket(s, testUID2) || meshwire.TransferBucket(s, iid) == meshwire.ArtifactsBucket(s) {
		t.Error("transfer buckets collide")
	}
}
