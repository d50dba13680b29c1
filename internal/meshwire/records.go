package meshwire

import (
	"strconv"

	"github.com/gocotal/cotal/wire"
)

// The auth service's endpoint and its one command (SPEC §13.9, the auth endpoint rail): retire one
// lifecycle, named by the request's target triple.
const (
	AuthEndpoint           wire.EndpointName = "auth"
	CommandRetireLifecycle                   = "retire-lifecycle"
)

// FactFamily is the topic head of one family of an endpoint's canonical facts (SPEC §13.9, the
// commit principal's rows).
type FactFamily string

// The fact families a commit path publishes besides goal results.
const (
	FactEffect     FactFamily = "eff"     // epf.<endpoint>.eff.<cO>.<cA>.<cUid>.<id>: effect complete
	FactReceipt    FactFamily = "receipt" // epf.<endpoint>.receipt.<cO>.<cA>.<cUid>.<id>.<sourceSeq>
	FactWork       FactFamily = "wrk"     // epf.<endpoint>.wrk.<pool>.<cO>.<cA>.<cUid>.<id>: work terminal
	FactCheckpoint FactFamily = "cp"      // epf.<endpoint>.cp.<token>...: one-use checkpoint settle
)

// FactFamilyGrant returns "cotal.<space>.epf.<endpoint>.<family>.>", every fact of one family of
// endpoint.
func FactFamilyGrant(s wire.Space, endpoint wire.EndpointName, family FactFamily) string {
	return s.Subject(wire.KindEpf, endpoint.Token(), string(family), ">")
}

// RecordKind is the first token of a records-bucket key (SPEC §13.7): every key of these kinds
// is "<kind>.<endpoint>.<qualifier...>".
type RecordKind string

// The record kinds an endpoint's commit path, goal writer and run driver write.
const (
	RecordGoal       RecordKind = "goal"      // goal.<endpoint>.<cO>.<cA>.<cUid>.<goalId>.{spec,status}
	RecordGoalIndex  RecordKind = "goalidx"   // goalidx.<endpoint>.<cO>.<cA>.<cUid>.<goalId>
	RecordGoalEffect RecordKind = "goaleff"   // goaleff.<endpoint>.<cO>.<cA>.<cUid>.<goalId>.<gen>
	RecordName       RecordKind = "epname"    // epname.<endpoint>.<nameToken>
	RecordMigrate    RecordKind = "epmig"     // epmig.<endpoint>, one key
	RecordCheckpoint RecordKind = "cp"        // cp.<endpoint>.<token>.{spec,status}
	RecordLease      RecordKind = "lease"     // lease.<endpoint>.<pool>.<cO>.<cA>.<cUid>.<id>...
	RecordRun        RecordKind = "run"       // run.<endpoint>.<runId>.{spec,status,program}
	RecordAnswer     RecordKind = "answer"    // answer.<endpoint>.<token>.<answerId>
	RecordNotice     RecordKind = "notice"    // notice.<endpoint>.<runId>.<addresseeId>.<noticeId>.{spec,status}
	RecordMigration  RecordKind = "migration" // migration.<endpoint>.<runId>.<migrationId>.{spec,status}
)

// Record halves: a split record's spec (decided once) and status (CAS-written); and a run
// record's program, the source its host drives, so another host can take the run over.
const (
	RecordSpecLeaf    = "spec"
	RecordStatusLeaf  = "status"
	RecordProgramLeaf = "program"
)

// RecordKey returns "<kind>.<endpoint>[.<rest>...]", a records-bucket key of endpoint; with a
// last token ">" it is the grant row of a subtree of them.
func RecordKey(kind RecordKind, endpoint wire.EndpointName, rest ...string) string {
	k := string(kind) + "." + endpoint.Token()
	for _, t := range rest {
		k += "." + t
	}
	return k
}

// SessionLedgerKeys returns "session.*", every row of a session ledger: one single-token key
// "session.<sessionId>" per session (SPEC §13.6).
func SessionLedgerKeys() string { return "session.*" }

// The stores of a workflow run's host (SPEC §13.12, §14.8) and of a manager's transfers.
const (
	bucketAdmission    = "admission"
	bucketTransfer     = "xfer"
	timerStreamPrefix  = "EPT_"
	objectSubjectRoot  = "$O."
	admissionKeyPrefix = "admission.v1."
)

// The two subject families of an object store bucket.
const (
	ObjectChunk = "C" // $O.<bucket>.C.<nuid>: an object's chunks
	ObjectMeta  = "M" // $O.<bucket>.M.<base64url(name)>: an object's meta record
)

// AdmissionBucket returns "cotal_admission_<space>", the run admission store (SPEC §14.8):
// write-once records a host re-reads leader-served before every channel effect of a run.
func AdmissionBucket(s wire.Space) wire.Bucket { return s.Bucket(bucketAdmission) }

// AdmissionKey returns "admission.v1.<endpoint>.<runId>", one run's admission record.
func AdmissionKey(endpoint wire.EndpointName, runID string) string {
	return admissionKeyPrefix + endpoint.Token() + "." + wire.Token(runID)
}

// TimerStream returns "EPT_<space>", the stream of the armed schedules and fires of the space's
// timers (SPEC §13.12).
func TimerStream(s wire.Space) string { return timerStreamPrefix + s.Token() }

// TimerPhase is the last token of a timer subject,
// "cotal.<space>.ept.<endpoint>.<instanceId>.<epoch>.<timerId>.<phase>".
type TimerPhase string

// The three timer subjects of one timer.
const (
	TimerSchedule TimerPhase = "schedule" // the instance's schedule request
	TimerArmed    TimerPhase = "armed"    // the timer writer's authoritative schedule
	TimerFire     TimerPhase = "fire"     // written by the broker's scheduler alone
)

// TimerSubject returns "cotal.<space>.ept.<endpoint>.<instanceId>.<epoch>.<timerId>.<phase>", one
// subject of a timer of one incarnation; timerID "*" makes it the row for every timer.
func TimerSubject(s wire.Space, endpoint wire.EndpointName, instance wire.LifecycleUID, epoch int64, timerID string, phase TimerPhase) string {
	return s.Subject(KindEpt, endpoint.Token(), string(instance), strconv.FormatInt(epoch, 10), timerID, string(phase))
}

// TimerScheduleGrant returns "cotal.<space>.ept.<endpoint>.<instanceId>.<epoch>.*.schedule": the
// schedule requests of every timer of one incarnation (SPEC §13.9, the timer schedule row).
func TimerScheduleGrant(s wire.Space, endpoint wire.EndpointName, instance wire.LifecycleUID, epoch int64) string {
	return TimerSubject(s, endpoint, instance, epoch, "*", TimerSchedule)
}

// TransferBucket returns "cotal_xfer_<space>_<instanceId>", the object store one manager instance
// receives carried transcripts in: one bucket per receiving instance, so that every grant on it
// names the instance in its stream name (reference docs/design/resume-transfer.md §3).
func TransferBucket(s wire.Space, instance wire.LifecycleUID) wire.Bucket {
	return wire.Bucket(string(s.Bucket(bucketTransfer)) + "_" + string(instance))
}

// objectStreamPrefix starts the name of the stream behind every object store bucket.
const objectStreamPrefix = "OBJ_"

// ObjectStream returns "OBJ_<bucket>", the stream backing an object store bucket.
func ObjectStream(b wire.Bucket) string { return objectStreamPrefix + string(b) }

// ObjectSubject returns "$O.<bucket>.<kind>.<token>", a subject of an object store bucket; kind is
// ObjectChunk or ObjectMeta.
func ObjectSubject(b wire.Bucket, kind, token string) string {
	return objectSubjectRoot + string(b) + "." + kind + "." + token
}

// ObjectMetaGrant returns "$O.<bucket>.M.>", every meta record of an object store bucket: the
// row of a writer of delete markers.
func ObjectMetaGrant(b wire.Bucket) string { return ObjectSubject(b, ObjectMeta, ">") }

// ObjectAll returns "$O.<bucket>.>", every subject of an object store bucket.
func ObjectAll(b wire.Bucket) string { return objectSubjectRoot + string(b) + ".>" }

// The service registry in the records bucket (SPEC §13.7): one spec and one status record per
// serving instance.
const (
	serviceKind = "svc"
	// ServiceSpecLeaf is the last token of an instance's spec record.
	ServiceSpecLeaf = "spec"
	// ServiceStatusLeaf is the last token of an instance's status record.
	ServiceStatusLeaf = "status"
)

// ServiceKey returns "svc.<endpoint>.<instanceId>.<leaf>", a serving instance's record key in the
// records bucket; leaf is ServiceSpecLeaf or ServiceStatusLeaf, or ">" for the instance's subtree.
func ServiceKey(endpoint wire.EndpointName, instance wire.LifecycleUID, leaf string) string {
	return serviceKind + "." + endpoint.Token() + "." + string(instance) + "." + leaf
}

// ServiceEndpointKeys returns "svc.<endpoint>.>", the registry keys of every instance of endpoint.
func ServiceEndpointKeys(endpoint wire.EndpointName) string {
	return serviceKind + "." + endpoint.Token() + ".>"
}

// ServiceRegistryKeys returns "svc.>", every key of the service registry.
func ServiceRegistryKeys() string { return serviceKind + ".>" }

// signerKind is the first token of the trust anchors' keys (SPEC §13.10).
const signerKind = "signer"

// SignerKey returns "signer.<keyId>.<leaf>", one half of a trust anchor's record: its spec (the
// key, owner, roles, scope and window) or its status (revocation).
func SignerKey(keyID, leaf string) string { return signerKind + "." + keyID + "." + leaf }

// SignerKeys returns "signer.>", every key of the anchor registry.
func SignerKeys() string { return signerKind + ".>" }
