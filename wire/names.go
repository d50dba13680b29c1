package wire

import "strconv"

// Stream name prefixes. A space's stream is the prefix followed by the space token.
const (
	chatStreamPrefix  = "CHAT_"
	dmStreamPrefix    = "DM_"
	taskStreamPrefix  = "TASK_"
	inboxStreamPrefix = "INBOX_"
	dlvStreamPrefix   = "DLV_"
	wfjStreamPrefix   = "WFJ_"
)

// ChatStream returns "CHAT_<space>", the stream of every multicast (cotal.<space>.chat.>).
func (s Space) ChatStream() string { return chatStreamPrefix + s.Token() }

// DMStream returns "DM_<space>", the stream of every direct message (cotal.<space>.inst.>).
func (s Space) DMStream() string { return dmStreamPrefix + s.Token() }

// TaskStream returns "TASK_<space>", the work queue of every anycast (cotal.<space>.svc.>).
func (s Space) TaskStream() string { return taskStreamPrefix + s.Token() }

// InboxStream returns "INBOX_<space>", the delivery daemon's fan-out store
// (cotal.<space>.dinbox.>). Agents hold no grant on it.
func (s Space) InboxStream() string { return inboxStreamPrefix + s.Token() }

// DLVStream returns "DLV_<space>", the per-member hand-off store of durable channel copies
// (cotal.<space>.dlv.>).
func (s Space) DLVStream() string { return dlvStreamPrefix + s.Token() }

// WFJStream returns "WFJ_<space>", the workflow-run journals (cotal.<space>.wfj.*).
func (s Space) WFJStream() string { return wfjStreamPrefix + s.Token() }

// Bucket is the name of a JetStream key-value bucket.
type Bucket string

// Bucket name stems: a space's bucket is "cotal_<stem>_<space>".
const (
	bucketPresence   = "presence"
	bucketChannels   = "channels"
	bucketMembers    = "members"
	bucketACL        = "acl"
	bucketMembership = "membership"
	bucketDelivery   = "delivery"
	bucketManager    = "manager"
	bucketRecords    = "records"
	bucketAuth       = "auth"
	bucketSessions   = "sessions"
	bucketArtifacts  = "artifacts"
)

// Bucket returns "cotal_<stem>_<space>", the space's bucket named by stem.
func (s Space) Bucket(stem string) Bucket { return Bucket(Root + "_" + stem + "_" + s.Token()) }

// PresenceBucket returns "cotal_presence_<space>", keyed by principal dot-form (SPEC §6).
func (s Space) PresenceBucket() Bucket { return s.Bucket(bucketPresence) }

// ChannelsBucket returns "cotal_channels_<space>", the channel registry keyed by concrete channel,
// with the space defaults under ChannelDefaultsKey (SPEC §7).
func (s Space) ChannelsBucket() Bucket { return s.Bucket(bucketChannels) }

// MembersBucket returns "cotal_members_<space>", durable channel membership keyed by MemberKey.
func (s Space) MembersBucket() Bucket { return s.Bucket(bucketMembers) }

// ACLBucket returns "cotal_acl_<space>", each lifecycle's read ACL keyed by ACLKey.
func (s Space) ACLBucket() Bucket { return s.Bucket(bucketACL) }

// MembershipBucket returns "cotal_membership_<space>", the display-only membership feed keyed by
// principal, with its heartbeat under MembershipFeedKey.
func (s Space) MembershipBucket() Bucket { return s.Bucket(bucketMembership) }

// DeliveryBucket returns "cotal_delivery_<space>", the delivery daemon's lease keyed by LeaseKey.
func (s Space) DeliveryBucket() Bucket { return s.Bucket(bucketDelivery) }

// ManagerBucket returns "cotal_manager_<space>", the managers' leases keyed by ManagerLeaseKey,
// plus ManagerRenewalKey.
func (s Space) ManagerBucket() Bucket { return s.Bucket(bucketManager) }

// RecordsBucket returns "cotal_records_<space>", the endpoint plane's records store (SPEC
// §13.12): per-key CAS rows of the §13.7 and §14 record kinds.
func (s Space) RecordsBucket() Bucket { return s.Bucket(bucketRecords) }

// AuthBucket returns "cotal_auth_<space>", the authority plane's ledger (SPEC §13.1).
func (s Space) AuthBucket() Bucket { return s.Bucket(bucketAuth) }

// Buckets returns the key-value buckets of a space's messaging and authority planes, in the
// reference's order: presence, channels, members, ACL, membership, delivery lease, manager lease,
// records, auth.
func (s Space) Buckets() []Bucket {
	return []Bucket{
		s.PresenceBucket(), s.ChannelsBucket(), s.MembersBucket(), s.ACLBucket(),
		s.MembershipBucket(), s.DeliveryBucket(), s.ManagerBucket(), s.RecordsBucket(), s.AuthBucket(),
	}
}

// SessionsBucket returns "cotal_sessions_<space>", the session ledger.
func (s Space) SessionsBucket() Bucket { return s.Bucket(bucketSessions) }

// ArtifactsBucket returns "cotal_artifacts_<space>", the object store holding artifact bytes.
func (s Space) ArtifactsBucket() Bucket { return s.Bucket(bucketArtifacts) }

// Stream returns "KV_<bucket>", the stream backing a key-value bucket.
func (b Bucket) Stream() string { return "KV_" + string(b) }

// ObjectStream returns "OBJ_<bucket>", the stream backing an object store bucket.
func (b Bucket) ObjectStream() string { return "OBJ_" + string(b) }

// Subject returns "$KV.<bucket>.<key>", the subject a put of key publishes on; with a pattern key
// ("lease.*", ">") it is the matching grant row.
func (b Bucket) Subject(key string) string { return "$KV." + string(b) + "." + key }

// Keys of the contract's buckets.
const (
	// MembershipFeedKey is the membership bucket's freshness heartbeat.
	MembershipFeedKey = "=feed"
	// ManagerRenewalKey is the manager bucket's per-space credential-renewal lease.
	ManagerRenewalKey = "renewal"
	// TTLCanaryKey is the key written to prove a TTL bucket's max_age is enforced; readers skip it.
	TTLCanaryKey = "_cotal_ttl_reconcile"
	// leaseKeyStem starts every lease key in the delivery and manager buckets.
	leaseKeyStem = "lease"
)

// LeaseKey returns "lease.<shard>", a delivery daemon lease key (one shard today: "lease.0").
func LeaseKey(shard int) string { return leaseKeyStem + "." + strconv.Itoa(shard) }

// LeaseKeys returns "lease.*", every lease key: the grant row of a lease writer.
func LeaseKeys() string { return leaseKeyStem + ".*" }

// ManagerLeaseKey returns "lease.<instanceId>", one manager instance's liveness lease.
func ManagerLeaseKey(instance LifecycleUID) string { return leaseKeyStem + "." + string(instance) }

// PresenceKey returns the presence key of p: its dot-form, which must equal its card.id.
func PresenceKey(p Principal) string { return p.String() }

// ACLKey returns "<owner>.<actor>.<uid>", the ACL-bucket key of one lifecycle.
func ACLKey(l Lifecycle) string { return l.String() }

// MemberKey returns "<channel>/<owner>.<actor>.<uid>", the members-bucket key of one lifecycle's
// membership of a concrete channel. It returns a *ValidationError for a channel that is not
// concrete or not in the channel grammar.
func MemberKey(channel string, l Lifecycle) (string, error) {
	if err := ValidateChannel(channel); err != nil {
		return "", err
	}
	return channel + "/" + l.String(), nil
}

// Durable and consumer names.
const (
	// FanoutDurable is the delivery daemon's consumer on CHAT that copies durable-channel posts.
	FanoutDurable = "fanout"
	// ReaderDurable is the delivery daemon's consumer on INBOX that re-authorises each copy.
	ReaderDurable = "reader"

	dmDurablePrefix   = "dm_"
	dlvDurablePrefix  = "dlv_"
	chatHistPrefix    = "chathist_"
	taskDurablePrefix = "svc_"
)

// DMDurable returns "dm_<owner>-<actor>-<uid>", a lifecycle's bind-only consumer on DM.
func DMDurable(l Lifecycle) string { return dmDurablePrefix + l.Name() }

// DLVDurable returns "dlv_<owner>-<actor>-<uid>", a lifecycle's bind-only consumer on DLV.
func DLVDurable(l Lifecycle) string { return dlvDurablePrefix + l.Name() }

// ChatHistConsumer returns "chathist_<owner>-<actor>-<uid>", the name of a lifecycle's short-lived
// history-read consumer on CHAT.
func ChatHistConsumer(l Lifecycle) string { return chatHistPrefix + l.Name() }

// TaskDurable returns "svc_<role>", the consumer on TASK shared by every member of role. It
// returns a *ValidationError for an empty role.
func TaskDurable(role string) (string, error) {
	r, err := roleToken(role)
	if err != nil {
		return "", err
	}
	return taskDurablePrefix + r, nil
}
