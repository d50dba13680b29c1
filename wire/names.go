package wire

// Stream name prefixes. A space's stream is the prefix followed by the space token.
const (
	chatStreamPrefix = "CHAT_"
	dmStreamPrefix   = "DM_"
	taskStreamPrefix = "TASK_"
	dlvStreamPrefix  = "DLV_"
)

// ChatStream returns "CHAT_<space>", the stream of every multicast (cotal.<space>.chat.>).
func (s Space) ChatStream() string { return chatStreamPrefix + s.Token() }

// DMStream returns "DM_<space>", the stream of every direct message (cotal.<space>.inst.>).
func (s Space) DMStream() string { return dmStreamPrefix + s.Token() }

// TaskStream returns "TASK_<space>", the work queue of every anycast (cotal.<space>.svc.>).
func (s Space) TaskStream() string { return taskStreamPrefix + s.Token() }

// DLVStream returns "DLV_<space>", the per-member hand-off store of durable channel copies
// (cotal.<space>.dlv.>).
func (s Space) DLVStream() string { return dlvStreamPrefix + s.Token() }

// Bucket is the name of a JetStream key-value bucket.
type Bucket string

// Bucket name stems: a space's bucket is "cotal_<stem>_<space>".
const (
	bucketPresence = "presence"
	bucketChannels = "channels"
)

// Bucket returns "cotal_<stem>_<space>", the space's bucket named by stem.
func (s Space) Bucket(stem string) Bucket { return Bucket(Root + "_" + stem + "_" + s.Token()) }

// PresenceBucket returns "cotal_presence_<space>", keyed by principal dot-form (SPEC §6).
func (s Space) PresenceBucket() Bucket { return s.Bucket(bucketPresence) }

// ChannelsBucket returns "cotal_channels_<space>", the channel registry keyed by concrete channel,
// with the space defaults under ChannelDefaultsKey (SPEC §7).
func (s Space) ChannelsBucket() Bucket { return s.Bucket(bucketChannels) }

// Stream returns "KV_<bucket>", the stream backing a key-value bucket.
func (b Bucket) Stream() string { return "KV_" + string(b) }

// Subject returns "$KV.<bucket>.<key>", the subject a put of key publishes on; with a pattern key
// ("lease.*", ">") it is the matching grant row.
func (b Bucket) Subject(key string) string { return "$KV." + string(b) + "." + key }

// Keys of the contract's buckets.
const (
	// TTLCanaryKey is the key written to prove a TTL bucket's max_age is enforced; readers skip it.
	TTLCanaryKey = "_cotal_ttl_reconcile"
)

// PresenceKey returns the presence key of p: its dot-form, which must equal its card.id.
func PresenceKey(p Principal) string { return p.String() }

// Durable and consumer names.
const (
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
