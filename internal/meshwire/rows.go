package meshwire

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gocotal/cotal/wire"
)

const (
	// AckWait is the ack_wait of every explicit-ack consumer of the messaging plane: after it an
	// unacknowledged delivery is redelivered. SPEC §8 fixes it for the dm_ and svc_ durables
	// (ack_wait=60000ms); the reference uses it too for the dlv_ durables and the delivery
	// daemon's fanout and reader.
	AckWait = 60 * time.Second
	// DeliveryLeaseTTL is the max_age of the delivery bucket (DeliveryBucket): a delivery daemon's
	// lease not renewed for this long lapses, and a standby takes over. SPEC.md leaves the value
	// to the reference (streams.ts, 30000 ms), whose bucket a space's must match.
	DeliveryLeaseTTL = 30 * time.Second
	// ManagerLeaseTTL is the max_age of the manager bucket (ManagerBucket): a manager instance's
	// lease not renewed for this long lapses. SPEC.md leaves the value to the reference
	// (streams.ts, 10000 ms).
	ManagerLeaseTTL = 10 * time.Second
)

// Member row states.
const (
	MemberDurableActive = "durable-active"
	MemberLiveConfirmed = "live-confirmed" // a left (tombstoned) membership
)

// MemberRow is a durable membership in the members bucket under MemberKey. A leave rewrites it
// with a LeaveCursor (a tombstone); a rejoin starts a new generation with a new JoinCursor.
type MemberRow struct {
	Channel string `json:"channel"`
	// Owner is the member's principal dot-form (the name is the reference's).
	Owner          string            `json:"owner"`
	LifecycleUID   wire.LifecycleUID `json:"lifecycleUid"`
	State          string            `json:"state"`
	JoinCursor     uint64            `json:"joinCursor"`
	LeaveCursor    *uint64           `json:"leaveCursor,omitempty"`
	Generation     int64             `json:"generation"`
	Activated      bool              `json:"activated"`
	WriterIdentity string            `json:"writerIdentity"`
	UpdatedAt      wire.EpochMillis  `json:"updatedAt"`
}

// Eligible reports whether the CHAT message at seq falls in the membership's interval:
// joinCursor < seq ≤ leaveCursor (SPEC §7: a leave is a hard boundary).
func (r *MemberRow) Eligible(seq uint64) bool {
	return seq > r.JoinCursor && (r.LeaveCursor == nil || seq <= *r.LeaveCursor)
}

// Open reports whether the membership is current (joined and not left).
func (r *MemberRow) Open() bool { return r.State == MemberDurableActive && r.LeaveCursor == nil }

// ACLRow is a lifecycle's read ACL in the ACL bucket under ACLKey, which the delivery daemon
// re-checks before every durable hand-off. An empty AllowSubscribe reads nothing.
type ACLRow struct {
	AllowSubscribe []string `json:"allowSubscribe"`
	// IssuedAllowSubscribe is the ceiling minted into the credential.
	IssuedAllowSubscribe []string         `json:"issuedAllowSubscribe"`
	Revision             int64            `json:"revision"`
	UpdatedAt            wire.EpochMillis `json:"updatedAt"`
}

// DeliveryLease is the delivery daemon's lease row under LeaseKey(0): one active daemon per
// space. Holder is the daemon's principal; Incarnation tells a restarted daemon from its
// predecessor with the same credential.
type DeliveryLease struct {
	Holder      string           `json:"holder"`
	Incarnation string           `json:"incarnation"`
	Since       wire.EpochMillis `json:"since"`
	Ready       bool             `json:"ready"`
}

// Why a copy entered a member's durable inbox.
const (
	ReasonDurableChannel = "durable-channel"
	ReasonLiveMention    = "live-mention"
)

// InboxEntry is what the fan-out writes to a member's dinbox subject: the channel message and
// the CHAT sequence the reader re-authorises it against.
type InboxEntry struct {
	Msg        *wire.CotalMessage `json:"msg"`
	Channel    string             `json:"channel"`
	Seq        uint64             `json:"seq"`
	Reason     string             `json:"reason"`
	Generation int64              `json:"generation"`
}

// PlaneMsgID is the Nats-Msg-Id of a durable copy: "<id>:<owner>.<actor>:<uid>:<generation>",
// so one message is stored once per member lifecycle and membership generation. An id-less
// message gets none (SPEC §8): "" must never de-duplicate.
func PlaneMsgID(msgID string, member wire.Lifecycle, generation int64) string {
	if msgID == "" {
		return ""
	}
	return fmt.Sprintf("%s:%s:%s:%d", msgID, member.Principal, member.UID, generation)
}

const (
	ControlServeBudget = 25 * time.Second
)

// fingerprintTarget is the target member of a fingerprint: the body target as carried.
type fingerprintTarget struct {
	Owner           string `json:"owner"`
	Actor           string `json:"actor"`
	LifecycleUID    string `json:"lifecycleUid"`
	MappingRevision uint64 `json:"mappingRevision,omitempty"`
}

type fingerprintCaller struct {
	ID           string `json:"id"`
	LifecycleUID string `json:"lifecycleUid"`
}

// fingerprintObject is the object SPEC §13.4 digests, absent members omitted, never null.
type fingerprintObject struct {
	Endpoint     string             `json:"endpoint"`
	Command      string             `json:"command"`
	Class        wire.RequestClass  `json:"class,omitempty"`
	Authz        wire.AuthzMode     `json:"authz,omitempty"`
	Target       *fingerprintTarget `json:"target,omitempty"`
	InputDigest  string             `json:"inputDigest,omitempty"`
	OutputDigest string             `json:"outputDigest,omitempty"`
	Args         json.RawMessage    `json:"args,omitempty"`
	AuthDigest   string             `json:"authDigest,omitempty"`
	Caller       fingerprintCaller  `json:"caller"`
	GoalID       string             `json:"goalId,omitempty"`
	ID           string             `json:"id"`
}

// Fingerprint returns the semantic fingerprint of a request (SPEC §13.4): the sha256:<hex>
// digest of the RFC 8785 form of {endpoint, command, class, authz?, target?, inputDigest,
// outputDigest, args, authDigest?, caller: {id, lifecycleUid}, goalId?, id}, where the caller and
// the mode come from the request subject (route) and everything else from the envelope. Absent
// members are omitted, so two implementations digest the same bytes.
func Fingerprint(route wire.EndpointRoute, req *wire.EndpointRequest) (string, error) {
	obj := fingerprintObject{
		Endpoint: req.Op.Endpoint, Command: req.Op.Command, Class: req.Class, Authz: route.Mode,
		InputDigest: req.Op.InputDigest, OutputDigest: req.Op.OutputDigest, Args: req.Args,
		AuthDigest: req.AuthDigest(), GoalID: req.GoalID, ID: req.ID,
		Caller: fingerprintCaller{ID: route.Caller.Principal.String(), LifecycleUID: string(route.Caller.UID)},
	}
	if t := req.Target; t != nil {
		obj.Target = &fingerprintTarget{Owner: t.Owner, Actor: t.Actor, LifecycleUID: t.LifecycleUID, MappingRevision: t.MappingRevision}
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return "", err
	}
	return wire.Digest(raw)
}

// ValidateRunID checks a run id: an id token, 1 to 64 characters of [A-Za-z0-9_-].
func ValidateRunID(id string) error { return wire.ValidateIDToken("runId", id) }

// ValidateTakeoverID checks a takeover id, which names one replay's durable: an id token without
// '_', so that wfj_<runId>_<takeoverId> names one run and takeover only (run a, takeover b_c and
// run a_b, takeover c would otherwise share a durable, and a credential for one would reach the
// other's).
func ValidateTakeoverID(id string) error {
	if wire.ValidateIDToken("takeoverId", id) != nil || strings.Contains(id, "_") {
		return wire.Invalid("takeoverId", id, "must be 1 to 64 characters of [A-Za-z0-9-]")
	}
	return nil
}

// WFJReplayDurable returns "wfj_<runId>_<takeoverId>", the durable one takeover replays a run's
// journal through. The ids are checked by the caller.
func WFJReplayDurable(runID, takeoverID string) string { return "wfj_" + runID + "_" + takeoverID }

// JournalKind is a journal record's kind.
type JournalKind string

// The journal record kinds.
const (
	JournalActivation JournalKind = "activation"
	JournalStep       JournalKind = "step"
)

// journalRecordVersion is the only record version.
const journalRecordVersion = 1

// JournalRecord is one record of a run's journal, as ParseJournalRecord reads it: a read-side
// type (encoding it would write every field, which the closed shapes refuse). Activation fields
// are set on activations and Entry on steps.
type JournalRecord struct {
	V    int         `json:"v"`
	Kind JournalKind `json:"kind"`
	Run  string      `json:"run"`
	N    int64       `json:"n"`
	// Holder, FencingToken, Epoch and ReplayedTo describe an activation: who took the run,
	// under which fencing token and epoch, after replaying how many records.
	Holder       string `json:"holder,omitempty"`
	FencingToken int64  `json:"fencingToken,omitempty"`
	Epoch        int64  `json:"epoch"`
	ReplayedTo   int64  `json:"replayedTo"`
	At           int64  `json:"at"`
	// Entry is a step's language journal entry, carried verbatim.
	Entry json.RawMessage `json:"entry,omitempty"`
}

var journalFields = map[JournalKind][]string{
	JournalActivation: {"v", "kind", "run", "n", "holder", "fencingToken", "epoch", "replayedTo", "at"},
	JournalStep:       {"v", "kind", "run", "n", "at", "entry"},
}

// ParseJournalRecord decodes one journal record, refusing an unknown version, kind or field, a
// missing field, and an activation without a holder or a fencing token of at least 1.
func ParseJournalRecord(data []byte) (JournalRecord, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return JournalRecord{}, fmt.Errorf("journal record: %w", err)
	}
	var kind JournalKind
	if err := json.Unmarshal(fields["kind"], &kind); err != nil {
		return JournalRecord{}, wire.Invalid("kind", string(fields["kind"]), "must be a string")
	}
	want, ok := journalFields[kind]
	if !ok {
		return JournalRecord{}, wire.Invalid("kind", string(kind), `must be "activation" or "step"`)
	}
	for name := range fields {
		if !slices.Contains(want, name) {
			return JournalRecord{}, wire.Invalid(name, "", "is not a field of a journal "+string(kind))
		}
	}
	for _, name := range want {
		if _, ok := fields[name]; !ok {
			return JournalRecord{}, wire.Invalid(name, "", "is required in a journal "+string(kind))
		}
	}
	var r JournalRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return JournalRecord{}, fmt.Errorf("journal record: %w", err)
	}
	switch {
	case r.V != journalRecordVersion:
		return JournalRecord{}, wire.Invalidf("v", fmt.Sprint(r.V), "must be %d", journalRecordVersion)
	case r.Run == "":
		return JournalRecord{}, wire.Invalid("run", "", "is required")
	case r.N < 0:
		return JournalRecord{}, wire.Invalid("n", fmt.Sprint(r.N), "must not be negative")
	case kind == JournalActivation && r.Epoch < 0:
		return JournalRecord{}, wire.Invalid("epoch", fmt.Sprint(r.Epoch), "must not be negative")
	case kind == JournalActivation && (r.ReplayedTo < 0 || r.ReplayedTo > r.N):
		return JournalRecord{}, wire.Invalid("replayedTo", fmt.Sprint(r.ReplayedTo), "must be within 0 and the record's ordinal")
	case kind == JournalActivation && r.Holder == "":
		return JournalRecord{}, wire.Invalid("holder", "", "is required in an activation")
	case kind == JournalActivation && r.FencingToken < 1:
		return JournalRecord{}, wire.Invalid("fencingToken", fmt.Sprint(r.FencingToken), "must be at least 1")
	}
	return r, nil
}

// MembershipRow is a principal's row in the membership feed (SPEC §8), stored in the space's
// membership bucket under the principal's dot-form (its card.id): the channel patterns its
// connections subscribe live, wildcards kept, and the channels it is a durable member of, each
// sorted, as observed at ObservedAt. The feed is display only: no delivery, ACL or authorization
// decision reads it.
type MembershipRow struct {
	Live       []string         `json:"live"`
	Durable    []string         `json:"durable"`
	ObservedAt wire.EpochMillis `json:"observedAt"`
}

// SameMembership reports whether r and o list the same channels, whenever each was observed.
func (r *MembershipRow) SameMembership(o *MembershipRow) bool {
	return slices.Equal(r.Live, o.Live) && slices.Equal(r.Durable, o.Durable)
}

// MembershipFeedRow is the membership feed's heartbeat under MembershipFeedKey, rewritten at every
// reconcile of the feed even when no row changed, so that a reader can tell a current feed from a
// stale one: when the feed was last observed, and how many principal rows it holds.
type MembershipFeedRow struct {
	ObservedAt wire.EpochMillis `json:"observedAt"`
	Count      int              `json:"count"`
}

const (
	inboxStreamPrefix = "INBOX_"
)

// InboxStream returns "INBOX_<space>", the delivery daemon's fan-out store
// (cotal.<space>.dinbox.>). Agents hold no grant on it.
func InboxStream(s wire.Space) string { return inboxStreamPrefix + s.Token() }

const (
	bucketMembers    = "members"
	bucketACL        = "acl"
	bucketMembership = "membership"
	bucketDelivery   = "delivery"
	bucketManager    = "manager"
	bucketRecords    = "records"
	bucketAuth       = "auth"
	bucketSessions   = "sessions"
)

// MembersBucket returns "cotal_members_<space>", durable channel membership keyed by MemberKey.
func MembersBucket(s wire.Space) wire.Bucket { return s.Bucket(bucketMembers) }

// ACLBucket returns "cotal_acl_<space>", each lifecycle's read ACL keyed by ACLKey.
func ACLBucket(s wire.Space) wire.Bucket { return s.Bucket(bucketACL) }

// MembershipBucket returns "cotal_membership_<space>", the display-only membership feed keyed by
// principal, with its heartbeat under MembershipFeedKey.
func MembershipBucket(s wire.Space) wire.Bucket { return s.Bucket(bucketMembership) }

// DeliveryBucket returns "cotal_delivery_<space>", the delivery daemon's lease keyed by LeaseKey.
func DeliveryBucket(s wire.Space) wire.Bucket { return s.Bucket(bucketDelivery) }

// ManagerBucket returns "cotal_manager_<space>", the managers' leases keyed by ManagerLeaseKey,
// plus ManagerRenewalKey.
func ManagerBucket(s wire.Space) wire.Bucket { return s.Bucket(bucketManager) }

// RecordsBucket returns "cotal_records_<space>", the endpoint plane's records store (SPEC
// §13.12): per-key CAS rows of the §13.7 and §14 record kinds.
func RecordsBucket(s wire.Space) wire.Bucket { return s.Bucket(bucketRecords) }

// AuthBucket returns "cotal_auth_<space>", the authority plane's ledger (SPEC §13.1).
func AuthBucket(s wire.Space) wire.Bucket { return s.Bucket(bucketAuth) }

// Buckets returns the key-value buckets of a space's messaging and authority planes, in the
// reference's order: presence, channels, members, ACL, membership, delivery lease, manager lease,
// records, auth.
func Buckets(s wire.Space) []wire.Bucket {
	return []wire.Bucket{
		s.PresenceBucket(), s.ChannelsBucket(), MembersBucket(s), ACLBucket(s),
		MembershipBucket(s), DeliveryBucket(s), ManagerBucket(s), RecordsBucket(s), AuthBucket(s),
	}
}

// SessionsBucket returns "cotal_sessions_<space>", the session ledger.
func SessionsBucket(s wire.Space) wire.Bucket { return s.Bucket(bucketSessions) }

const (
	// MembershipFeedKey is the membership bucket's freshness heartbeat.
	MembershipFeedKey = "=feed"
	// ManagerRenewalKey is the manager bucket's per-space credential-renewal lease.
	ManagerRenewalKey = "renewal"
	// leaseKeyStem starts every lease key in the delivery and manager buckets.
	leaseKeyStem = "lease"
)

// LeaseKey returns "lease.<shard>", a delivery daemon lease key (one shard today: "lease.0").
func LeaseKey(shard int) string { return leaseKeyStem + "." + strconv.Itoa(shard) }

// LeaseKeys returns "lease.*", every lease key: the grant row of a lease writer.
func LeaseKeys() string { return leaseKeyStem + ".*" }

// ManagerLeaseKey returns "lease.<instanceId>", one manager instance's liveness lease.
func ManagerLeaseKey(instance wire.LifecycleUID) string { return leaseKeyStem + "." + string(instance) }

// ACLKey returns "<owner>.<actor>.<uid>", the ACL-bucket key of one lifecycle.
func ACLKey(l wire.Lifecycle) string { return l.String() }

// MemberKey returns "<channel>/<owner>.<actor>.<uid>", the members-bucket key of one lifecycle's
// membership of a concrete channel. It returns a *ValidationError for a channel that is not
// concrete or not in the channel grammar.
func MemberKey(channel string, l wire.Lifecycle) (string, error) {
	if err := wire.ValidateChannel(channel); err != nil {
		return "", err
	}
	return channel + "/" + l.String(), nil
}

const (
	// FanoutDurable is the delivery daemon's consumer on CHAT that copies durable-channel posts.
	FanoutDurable = "fanout"
	// ReaderDurable is the delivery daemon's consumer on INBOX that re-authorises each copy.
	ReaderDurable = "reader"
)

// DecodeACLRow decodes an ACL-bucket row strictly: exactly ACLRow's fields, every channel
// pattern in the channel grammar.
func DecodeACLRow(data []byte) (*ACLRow, error) {
	var r ACLRow
	if err := wire.DecodeRowStrict("acl row", data, &r); err != nil {
		return nil, err
	}
	for _, p := range append(slices.Clip(r.AllowSubscribe), r.IssuedAllowSubscribe...) {
		if err := wire.ValidateChannelPattern(p); err != nil {
			return nil, wire.Within("allowSubscribe", err)
		}
	}
	return &r, nil
}

// DecodeMemberRow decodes a members-bucket row strictly and checks it against its key: the key
// must be the MemberKey of the row's channel and lifecycle.
func DecodeMemberRow(key string, data []byte) (*MemberRow, error) {
	var r MemberRow
	if err := wire.DecodeRowStrict("member row", data, &r); err != nil {
		return nil, err
	}
	p, err := wire.ParsePrincipal(r.Owner)
	if err != nil {
		return nil, wire.Within("owner", err)
	}
	want, err := MemberKey(r.Channel, wire.Lifecycle{Principal: p, UID: r.LifecycleUID})
	if err != nil {
		return nil, err
	}
	if want != key {
		return nil, wire.Invalidf("member row", key, "is stored under a key other than its own %q", want)
	}
	switch r.State {
	case MemberDurableActive, MemberLiveConfirmed:
	default:
		return nil, wire.Invalidf("state", r.State, "must be %q or %q", MemberDurableActive, MemberLiveConfirmed)
	}
	return &r, nil
}

// DecodeDeliveryLease decodes a lease row of the delivery or manager bucket strictly: exactly
// DeliveryLease's fields, with a holder in principal form.
func DecodeDeliveryLease(data []byte) (*DeliveryLease, error) {
	var r DeliveryLease
	if err := wire.DecodeRowStrict("lease row", data, &r); err != nil {
		return nil, err
	}
	if _, err := wire.ParsePrincipal(r.Holder); err != nil {
		return nil, wire.Within("holder", err)
	}
	if r.Incarnation == "" {
		return nil, wire.Invalid("incarnation", "", "is required")
	}
	return &r, nil
}

// RunState is a run status record's state.
type RunState string

// The run states.
const (
	RunRunning   RunState = "running"
	RunReleased  RunState = "released"
	RunCompleted RunState = "completed"
	RunFailed    RunState = "failed"
)

// runStates are the states a status record may hold.
var runStates = []RunState{RunRunning, RunReleased, RunCompleted, RunFailed}

// runStatusVersion is the only status record version.
const runStatusVersion = 1

// RunStatus is a run's status record: its state, the holder of its lease at an epoch and fencing
// token, how far its journal reached, and when it was written (Unix milliseconds).
type RunStatus struct {
	V                    int      `json:"v"`
	ObservedSpecRevision uint64   `json:"observedSpecRevision"`
	State                RunState `json:"state"`
	Holder               string   `json:"holder"`
	Epoch                int64    `json:"epoch"`
	FencingToken         int64    `json:"fencingToken"`
	JournalHigh          int64    `json:"journalHigh"`
	At                   int64    `json:"at"`
}

// ParseRunStatus decodes a run status record, refusing an unknown version, field or state,
// trailing data, and a running record without a holder or with a fencing token below 1.
func ParseRunStatus(data []byte) (RunStatus, error) {
	var r RunStatus
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return RunStatus{}, fmt.Errorf("run status: %w", err)
	}
	if dec.More() {
		return RunStatus{}, wire.Invalid("run status", "", "must hold one JSON object")
	}
	switch {
	case r.V != runStatusVersion:
		return RunStatus{}, wire.Invalidf("v", fmt.Sprint(r.V), "must be %d", runStatusVersion)
	case !slices.Contains(runStates, r.State):
		return RunStatus{}, wire.Invalidf("state", string(r.State), "must be one of %q", runStates)
	case r.Epoch < 0:
		return RunStatus{}, wire.Invalid("epoch", fmt.Sprint(r.Epoch), "must not be negative")
	case r.State == RunRunning && r.Holder == "":
		return RunStatus{}, wire.Invalid("holder", "", "is required while the run is running")
	case r.State == RunRunning && r.FencingToken < 1:
		return RunStatus{}, wire.Invalid("fencingToken", fmt.Sprint(r.FencingToken), "must be at least 1 while the run is running")
	}
	return r, nil
}

// RunCaller returns the caller lifecycle a run's own actions ride, owned by owner: derived from
// the run id alone (the actor "wf_" and the first 12 hex characters of its SHA-256, the uid the
// next 26), so every host that resumes the run calls as the same triple.
func RunCaller(owner, runID string) (wire.Lifecycle, error) {
	if err := ValidateRunID(runID); err != nil {
		return wire.Lifecycle{}, err
	}
	sum := sha256.Sum256([]byte(runID))
	h := hex.EncodeToString(sum[:])
	p, err := wire.NewPrincipal(owner, "wf_"+h[:12])
	if err != nil {
		return wire.Lifecycle{}, err
	}
	return wire.Lifecycle{Principal: p, UID: wire.LifecycleUID(h[12:38])}, nil
}
