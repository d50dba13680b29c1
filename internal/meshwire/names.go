package meshwire

import (
	"strconv"

	"github.com/gocotal/cotal/wire"
)

// inboxStreamPrefix followed by the space token names the delivery daemon's fan-out stream.
const inboxStreamPrefix = "INBOX_"

// InboxStream returns "INBOX_<space>", the delivery daemon's fan-out store
// (cotal.<space>.dinbox.>). Agents hold no grant on it.
func InboxStream(s wire.Space) string { return inboxStreamPrefix + s.Token() }

// Stems of the mesh's own buckets: a space's bucket is "cotal_<stem>_<space>".
const (
	bucketMembers    = "members"
	bucketACL        = "acl"
	bucketMembership = "membership"
	bucketDelivery   = "delivery"
	bucketManager    = "manager"
	bucketRecords    = "records"
	bucketAuth       = "auth"
	bucketUserAuth   = "userauth"
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

// EndpointGatePrefix starts the auth-store key of every endpoint instance's serve gate.
const EndpointGatePrefix = "epgate."

// EndpointGateKey returns "epgate.<endpoint>.<instanceId>", the auth-store key of an endpoint
// instance's serve gate; endpoint is the endpoint's key token.
func EndpointGateKey(endpoint string, instance wire.LifecycleUID) string {
	return EndpointGatePrefix + endpoint + "." + string(instance)
}

// AuthBucket returns "cotal_auth_<space>", the authority plane's ledger (SPEC §13.1).
func AuthBucket(s wire.Space) wire.Bucket { return s.Bucket(bucketAuth) }

// UserAuthBucket returns "cotal_userauth_<space>", the user-auth store: the people ledger and the
// registry of remote managers, which every authority node of a cluster reads and writes.
func UserAuthBucket(s wire.Space) wire.Bucket { return s.Bucket(bucketUserAuth) }

// Buckets returns the key-value buckets of a space's messaging and authority planes: the
// reference's, in its order (presence, channels, members, ACL, membership, delivery lease,
// manager lease, records, auth), then the user-auth store.
func Buckets(s wire.Space) []wire.Bucket {
	return []wire.Bucket{
		s.PresenceBucket(), s.ChannelsBucket(), MembersBucket(s), ACLBucket(s),
		MembershipBucket(s), DeliveryBucket(s), ManagerBucket(s), RecordsBucket(s), AuthBucket(s),
		UserAuthBucket(s),
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

// The NATS auth callout of user-auth mode (SPEC §10): the subject the broker asks on and the queue
// group the auth service's callout answers in.
const (
	AuthCalloutSubject = "$SYS.REQ.USER.AUTH"
	AuthCalloutQueue   = "cotal-auth-callout"
)
