package wire

import "testing"

// TestRemoteGrantBuilders pins each builder's spelling against the SPEC's: a grant row is a
// contract string, so a change of one is a change of what a credential may do.
func TestRemoteGrantBuilders(t *testing.T) {
	s := Space("main")
	iid := testUID
	caller := testCaller(t)
	goal := GoalTopic(caller, "g1", "bind")
	bind, err := s.FactSubject(ManagerEndpoint, goal...)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, got, want string }{
		{"fact family", s.FactFamilyGrant("com.acme.x", FactWork), "cotal.main.epf.com_acme_x.wrk.>"},
		{"goal bind", s.GoalBindGrant(ManagerEndpoint), "cotal.main.epf.manager.goal.*.*.*.*.bind"},
		{"record key", RecordKey(RecordRun, ManagerEndpoint, "r-1", RecordStatusLeaf), "run.manager.r-1.status"},
		{"record subtree", RecordKey(RecordGoalIndex, "com.acme.x", ">"), "goalidx.com_acme_x.>"},
		{"record one key", RecordKey(RecordMigrate, ManagerEndpoint), "epmig.manager"},
		{"session ledger", SessionLedgerKeys(), "session.*"},
		{"admission bucket", string(s.AdmissionBucket()), "cotal_admission_main"},
		{"admission stream", s.AdmissionBucket().Stream(), "KV_cotal_admission_main"},
		{"admission key", AdmissionKey(ManagerEndpoint, "r-1"), "admission.v1.manager.r-1"},
		{"timer stream", s.TimerStream(), "EPT_main"},
		{"timer schedule", s.TimerScheduleGrant(ManagerEndpoint, iid, 3), "cotal.main.ept.manager." + string(iid) + ".3.*.schedule"},
		{"transfer bucket", string(s.TransferBucket(iid)), "cotal_xfer_main_" + string(iid)},
		{"transfer stream", s.TransferBucket(iid).ObjectStream(), "OBJ_cotal_xfer_main_" + string(iid)},
		{"object chunk", s.TransferBucket(iid).ObjectSubject(ObjectChunk, "ab"), "$O.cotal_xfer_main_" + string(iid) + ".C.ab"},
		{"object meta grant", s.TransferBucket(iid).ObjectMetaGrant(), "$O.cotal_xfer_main_" + string(iid) + ".M.>"},
		{"object all", s.TransferBucket(iid).ObjectAll(), "$O.cotal_xfer_main_" + string(iid) + ".>"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	// The bind grant admits a real bind and nothing of its sibling result leaf.
	if !SubjectMatches(s.GoalBindGrant(ManagerEndpoint), bind) {
		t.Errorf("the bind grant does not admit %s", bind)
	}
	result, _ := s.FactSubject(ManagerEndpoint, GoalResultTopic(caller, "g1")...)
	if SubjectMatches(s.GoalBindGrant(ManagerEndpoint), result) {
		t.Errorf("the bind grant admits the result fact %s", result)
	}
	// Two instances never share a transfer stream, and no instance's is the artifact store's.
	if s.TransferBucket(iid) == s.TransferBucket(testUID2) || s.TransferBucket(iid) == s.ArtifactsBucket() {
		t.Error("transfer buckets collide")
	}
}
