package meshwire

import (
	"strconv"

	"github.com/gocotal/cotal/wire"
)

const (
	OpListMemberships = "listMemberships"
)

// ListMembershipsArgs are the arguments of listMemberships.
type ListMembershipsArgs struct {
	LifecycleUID wire.LifecycleUID `json:"lifecycleUid"`
}

// Membership is one entry of listMemberships' data.
type Membership struct {
	Channel    string `json:"channel"`
	Generation int64  `json:"generation"`
	Activated  bool   `json:"activated"`
}

// ListMembershipsResult is listMemberships' data.
type ListMembershipsResult struct {
	Memberships []Membership `json:"memberships"`
}

// ContractPublishGrant returns "cotal.<space>.epc.*": every artifact subject of the contract
// stream, which a publisher writes create-only, one artifact per digest.
func ContractPublishGrant(s wire.Space) string { return s.Subject(wire.KindEpc, "*") }

// The streams that capture the event and fact planes (SPEC §13.12).
const (
	epeStreamPrefix = "EPE_"
	epfStreamPrefix = "EPF_"
)

// EventStream returns "EPE_<space>", the stream of the space's endpoint events
// (cotal.<space>.epe.>): ordered and replayable, kept a day.
func EventStream(s wire.Space) string { return epeStreamPrefix + s.Token() }

// FactStream returns "EPF_<space>", the stream of the space's canonical facts
// (cotal.<space>.epf.>), written create-only by their mediated writers.
func FactStream(s wire.Space) string { return epfStreamPrefix + s.Token() }

const (
	topicEvent = "ev"
)

// EventPublishGrant returns "cotal.<space>.epe.<endpoint>.<instanceId>.<epoch>.>", the events an
// incarnation may publish.
func EventPublishGrant(s wire.Space, endpoint wire.EndpointName, instance wire.LifecycleUID, epoch int64) string {
	return s.Subject(wire.KindEpe, endpoint.Token(), string(instance), strconv.FormatInt(epoch, 10), ">")
}

// ClusterEventTopic returns "ev.<cluster>.<event>", a cluster event's topic.
func ClusterEventTopic(cluster, event string) []string { return []string{topicEvent, cluster, event} }

// WorkSubject returns "cotal.<space>.epw.<endpoint>.<pool>.<cOwner>.<cActor>.<cUid>.<id>", one
// work item keyed by its acceptance identity.
func WorkSubject(s wire.Space, endpoint wire.EndpointName, pool string, caller wire.Lifecycle, id string) (string, error) {
	if _, err := wire.ParseEndpointName(string(endpoint)); err != nil {
		return "", err
	}
	if err := wire.ValidateCommand(pool); err != nil {
		return "", wire.Within("pool", err)
	}
	if err := wire.ValidateIDToken("id", id); err != nil {
		return "", err
	}
	return s.Subject(KindEpw, endpoint.Token(), pool, caller.Principal.Owner(), caller.Principal.Actor(), string(caller.UID), id), nil
}

// epcStreamPrefix starts the name of a space's contract stream.
const epcStreamPrefix = "EPC_"

// ContractStream returns "EPC_<space>", the stream of the space's contract artifacts
// (cotal.<space>.epc.>).
func ContractStream(s wire.Space) string { return epcStreamPrefix + s.Token() }

const (
	bucketArtifacts = "artifacts"
)

// ArtifactsBucket returns "cotal_artifacts_<space>", the object store holding artifact bytes.
func ArtifactsBucket(s wire.Space) wire.Bucket { return s.Bucket(bucketArtifacts) }

// DMSendGrant returns "cotal.<space>.inst.*.*.<owner>.<actor>": a direct message to anyone, only
// as sender. The broker's enforcement of this row is the forge lock of SPEC §3.
func DMSendGrant(s wire.Space, sender wire.Principal) string {
	return s.Subject(wire.KindInst, "*", "*", sender.Owner(), sender.Actor())
}

// DMFilter returns "cotal.<space>.inst.<owner>.<actor>.>": every direct message to recipient,
// the filter of its dm_ durable.
func DMFilter(s wire.Space, recipient wire.Principal) string {
	return s.Subject(wire.KindInst, recipient.Owner(), recipient.Actor(), ">")
}

// AnycastSendGrant returns "cotal.<space>.svc.*.<owner>.<actor>": a task to any role, only as
// sender.
func AnycastSendGrant(s wire.Space, sender wire.Principal) string {
	return s.Subject(wire.KindSvc, "*", sender.Owner(), sender.Actor())
}

// ControlServeFilter returns "cotal.<space>.ctl.<service>.*.*", what the serving daemon
// queue-subscribes.
func ControlServeFilter(s wire.Space, svc wire.ControlService) string {
	return s.Subject(wire.KindCtl, string(svc), "*", "*")
}

// LivenessServeFilter returns "cotal.<space>.live.<plane>.*.*", what the plane's responder
// queue-subscribes.
func LivenessServeFilter(s wire.Space, plane wire.Plane) string {
	return s.Subject(wire.KindLive, string(plane), "*", "*")
}

// ControlReplyGrant returns "cotal.<space>.ctl.<service>.*.*.reply.>": the daemon may answer any
// caller, but only on the reply leaf, so it can never forge a request.
func ControlReplyGrant(s wire.Space, svc wire.ControlService) string {
	return s.Subject(wire.KindCtl, string(svc), "*", "*", wire.ReplyLeaf, ">")
}

// LivenessReplyGrant returns "cotal.<space>.live.<plane>.*.*.reply.>", the responder's only
// publish row on the rail.
func LivenessReplyGrant(s wire.Space, plane wire.Plane) string {
	return s.Subject(wire.KindLive, string(plane), "*", "*", wire.ReplyLeaf, ">")
}

// DinboxSubject returns "cotal.<space>.dinbox.<owner>.<actor>.<uid>", the fan-out target of a
// member's durable copies.
func DinboxSubject(s wire.Space, member wire.Lifecycle) string {
	return s.Subject(wire.KindDinbox, member.Principal.Owner(), member.Principal.Actor(), string(member.UID))
}

// DlvSubject returns "cotal.<space>.dlv.<owner>.<actor>.<uid>", where the delivery daemon hands a
// re-authorised durable copy to its member.
func DlvSubject(s wire.Space, member wire.Lifecycle) string {
	return s.Subject(wire.KindDlv, member.Principal.Owner(), member.Principal.Actor(), string(member.UID))
}

// LifecycleWriteGrant returns "cotal.<space>.<kind>.*.*.*", a write to any lifecycle's subject on
// the dinbox or dlv rail (the delivery daemon's rows).
func LifecycleWriteGrant(s wire.Space, kind wire.SubjectKind) string {
	return s.Subject(kind, "*", "*", "*")
}

// TraceSubject returns "cotal.<space>.trace.<instance>", reserved for lifecycle traces.
func TraceSubject(s wire.Space, instance string) string {
	return s.Subject(KindTrace, wire.Token(instance))
}

// Subtree returns "<subject>.>", everything beneath a subject.
func Subtree(subject string) string { return subject + ".>" }

// InboxGrant returns "_INBOX_<connId>.>", the only inbox subtree a credential may subscribe.
func InboxGrant(c wire.ConnID) string { return Subtree(c.InboxPrefix()) }
