package meshwire

import (
	"fmt"
	"slices"
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
	// FanoutDurable is the delivery daemon's consumer on CHAT that copies durable-channel posts.
	FanoutDurable = "fanout"
	// ReaderDurable is the delivery daemon's consumer on INBOX that re-authorises each copy.
	ReaderDurable = "reader"
)

// DecodeACLRow decodes an ACL-bucket row strictly: exactly ACLRow's fields, every channel
// pattern in the channel grammar.
func DecodeACLRow(data []byte) (*ACLRow, error) {
	var r ACLRow
	if err := decodeRowStrict("acl row", data, &r); err != nil {
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
	if err := decodeRowStrict("member row", data, &r); err != nil {
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
	if err := decodeRowStrict("lease row", data, &r); err != nil {
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
