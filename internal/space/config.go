package space

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// Bucket TTLs and stream sizes (SPEC §6, §8). The lease TTLs and the consumers' ack wait are the
// mesh wire's own constants (meshwire.DeliveryLeaseTTL, meshwire.ManagerLeaseTTL,
// meshwire.AckWait).
const (
	// PresenceTTL expires a presence row once its writer stops heartbeating: the liveness window
	// (SPEC §6, §8: 6000 ms).
	PresenceTTL = wire.LivenessWindow
	// membershipMaxBytes caps the display-only membership feed (the reference's 64 MiB).
	membershipMaxBytes = 64 << 20
	// chatHistoryPerSubject keeps the newest messages per chat subject (SPEC §8:
	// max_msgs_per_subject=1000 on CHAT), and per inbox subject (the reference's INBOX and DLV).
	chatHistoryPerSubject = 1000
	// duplicateWindow is the message streams' de-duplication window for Nats-Msg-Id (the
	// reference's backup-config, 2 min).
	duplicateWindow = 2 * time.Minute
	// inboxDuplicateWindow is longer on the durable backstop, where a copy may be retried later
	// (the reference's INBOX and DLV, 2 h).
	inboxDuplicateWindow = 2 * time.Hour
)

// messageStream is the shared base of the five message streams (the reference's backup-config):
// every limit explicit, file storage, one replica (Provision sets more on a cluster), discard old.
func messageStream(name, subject string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              name,
		Subjects:          []string{subject},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		MaxConsumers:      -1,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgsPerSubject: -1,
		MaxMsgSize:        -1,
		Discard:           jetstream.DiscardOld,
		Replicas:          1,
		Duplicates:        duplicateWindow,
		Compression:       jetstream.NoCompression,
	}
}

// kvStream is a bucket's backing stream as the reference's KV client makes it. It is created
// directly rather than through jetstream.CreateKeyValue, which always sets deny_delete and would
// make the bucket differ from (and refuse to be re-created against) one the reference made.
func kvStream(b wire.Bucket, ttl time.Duration, storage jetstream.StorageType, maxBytes int64) jetstream.StreamConfig {
	c := jetstream.StreamConfig{
		Name:              b.Stream(),
		Subjects:          []string{b.Subject(">")},
		Retention:         jetstream.LimitsPolicy,
		Storage:           storage,
		MaxConsumers:      -1,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgSize:        -1,
		MaxMsgsPerSubject: 1,
		MaxAge:            ttl,
		Discard:           jetstream.DiscardNew,
		Replicas:          1,
		Duplicates:        duplicateWindow,
		Compression:       jetstream.NoCompression,
		AllowDirect:       true,
		AllowRollup:       true,
	}
	if ttl > 0 && ttl < c.Duplicates {
		c.Duplicates = ttl // the server caps the window at max_age
	}
	if maxBytes > 0 {
		c.MaxBytes = maxBytes
	}
	return c
}

// resource is one stream of a space and how to treat an existing copy of it.
type resource struct {
	cfg jetstream.StreamConfig
	// ttl marks a bucket whose max_age is its TTL: a different max_age is reconciled (updated)
	// rather than reported, as TTLs change between releases.
	ttl bool
}

// resources returns every stream of the space in creation order.
func resources(s wire.Space) []resource {
	chat := messageStream(s.ChatStream(), s.KindAll(wire.KindChat))
	chat.MaxMsgsPerSubject = chatHistoryPerSubject
	chat.AllowDirect = true
	task := messageStream(s.TaskStream(), s.KindAll(wire.KindSvc))
	task.Retention = jetstream.WorkQueuePolicy
	inbox := messageStream(meshwire.InboxStream(s), s.KindAll(wire.KindDinbox))
	inbox.MaxMsgsPerSubject, inbox.Duplicates = chatHistoryPerSubject, inboxDuplicateWindow
	dlv := messageStream(s.DLVStream(), s.KindAll(wire.KindDlv))
	dlv.MaxMsgsPerSubject, dlv.Duplicates = chatHistoryPerSubject, inboxDuplicateWindow
	// The run journals (SPEC §14.4): no age or size limit may evict a live run's prefix, and no
	// Direct Get, so a replay reads from the leader.
	wfj := messageStream(meshwire.WFJStream(s), meshwire.WFJFilter(s))
	return []resource{
		{cfg: chat},
		{cfg: messageStream(s.DMStream(), s.KindAll(wire.KindInst))},
		{cfg: task},
		{cfg: inbox},
		{cfg: dlv},
		{cfg: kvStream(s.PresenceBucket(), PresenceTTL, jetstream.MemoryStorage, 0), ttl: true},
		{cfg: kvStream(meshwire.DeliveryBucket(s), meshwire.DeliveryLeaseTTL, jetstream.FileStorage, 0), ttl: true},
		{cfg: kvStream(meshwire.ManagerBucket(s), meshwire.ManagerLeaseTTL, jetstream.FileStorage, 0), ttl: true},
		{cfg: kvStream(s.ChannelsBucket(), 0, jetstream.FileStorage, 0)},
		{cfg: kvStream(meshwire.MembersBucket(s), 0, jetstream.FileStorage, 0)},
		{cfg: kvStream(meshwire.ACLBucket(s), 0, jetstream.FileStorage, 0)},
		{cfg: kvStream(meshwire.MembershipBucket(s), 0, jetstream.FileStorage, membershipMaxBytes)},
		{cfg: recordsStore(s)},
		{cfg: admissionStore(s)},
		{cfg: AuthStoreConfig(s)},
		{cfg: UserAuthStoreConfig(s)},
		{cfg: wfj},
		{cfg: contractStore(s)},
		{cfg: eventStream(s)},
		{cfg: factStream(s)},
		{cfg: submissionStream(s)},
		{cfg: ingressStream(meshwire.TimerRequestStream(s), meshwire.TimerFilter(s, meshwire.TimerSchedule))},
		{cfg: ingressStream(meshwire.RecordWriteStream(s), s.KindAll(meshwire.KindEpr))},
		{cfg: timerStream(s)},
		{cfg: workStream(s)},
	}
}

// The control surface's retention (the reference's defaults): a day of raw submissions and of
// timer and record-write requests, time for their readers to recover; a month of armed timers,
// the longest deadline one may carry.
const (
	ingressRetention = 24 * time.Hour
	timerRetention   = 31 * 24 * time.Hour
	// submissionDuplicates is EPJ's de-duplication window, the server's minimum: submitters
	// never set Nats-Msg-Id, and a wide window would let one caller's submission suppress
	// another's.
	submissionDuplicates = 100 * time.Millisecond
)

// submissionStream is EPJ_<space> (SPEC §13.12): the untrusted log of journal-class
// submissions, kept a day, with the narrowest duplicate window the server takes.
func submissionStream(s wire.Space) jetstream.StreamConfig {
	c := ingressStream(meshwire.SubmissionStream(s), s.KindAll(meshwire.KindEpj))
	c.Duplicates = submissionDuplicates
	return c
}

// ingressStream is a stream of requests a writer consumes (EPT_REQ, EPR): kept a day. Message
// schedules stay off, so a scheduling header a requester sets arms nothing.
func ingressStream(name, subject string) jetstream.StreamConfig {
	c := messageStream(name, subject)
	c.MaxAge = ingressRetention
	return c
}

// timerStream is EPT_<space> (SPEC §13.12): the schedules the timer writer arms and the fires
// they target, both captured here as the server requires of a schedule's target; the one stream
// that allows message schedules.
func timerStream(s wire.Space) jetstream.StreamConfig {
	c := messageStream(meshwire.TimerStream(s), meshwire.TimerFilter(s, meshwire.TimerArmed))
	c.Subjects = append(c.Subjects, meshwire.TimerFilter(s, meshwire.TimerFire))
	c.MaxAge = timerRetention
	// A schedule is re-armed by a same-subject rollup: the server turns rollups on with
	// schedules, so the stream it stores carries them, whoever created it.
	c.AllowMsgSchedules, c.AllowRollup = true, true
	return c
}

// workStream is EPW_<space> (SPEC §13.12): the work pools' queue, one item per subject, with no
// Direct Get: the reconciliation probe that gates a re-enqueue is a fencing read the leader
// answers.
func workStream(s wire.Space) jetstream.StreamConfig {
	c := messageStream(meshwire.WorkStream(s), s.KindAll(meshwire.KindEpw))
	c.Retention = jetstream.WorkQueuePolicy
	return c
}

// eventRetention is how long EPE_<space> keeps endpoint events (goal progress, cluster events):
// the reference's day.
const eventRetention = 24 * time.Hour

// eventStream is EPE_<space> (SPEC §13.12), as the reference makes it: every limit open but age.
func eventStream(s wire.Space) jetstream.StreamConfig {
	c := messageStream(meshwire.EventStream(s), s.KindAll(wire.KindEpe))
	c.MaxAge = eventRetention
	return c
}

// factStream is EPF_<space> (SPEC §13.12): canonical facts, each written create-only on its own
// subject, with no age limit (a fact outlives the idempotency horizon) and Direct Get on for the
// last-by-subject read of a goal's result.
func factStream(s wire.Space) jetstream.StreamConfig {
	c := messageStream(meshwire.FactStream(s), s.KindAll(wire.KindEpf))
	c.AllowDirect = true
	return c
}

// contractStore is the contract stream EPC_<space> (SPEC §13.7, §13.12): content-addressed
// artifacts, each one message on its own digest subject, kept forever. No age or size limit;
// Direct Get on, as the last-by-subject read is the fetch path; deletes and purges refused by the
// broker. The reference also makes a digest subject hold at most one message whatever the
// publisher's headers (one message per subject, discard new per subject), so no later append can
// shadow a published artifact.
func contractStore(s wire.Space) jetstream.StreamConfig {
	c := messageStream(meshwire.ContractStream(s), s.KindAll(wire.KindEpc))
	c.MaxMsgsPerSubject = 1
	c.Discard, c.DiscardNewPerSubject = jetstream.DiscardNew, true
	c.AllowDirect = true
	c.DenyDelete, c.DenyPurge = true, true
	return c
}

// recordsStore is the backing stream of the records store cotal_records_<space> (SPEC §13.12),
// as the reference makes it: a file bucket of one row per key with Direct Get on (the heads and
// every fencing read still go to the leader), no age, count or byte limit that could evict an
// authority key's row, and neither rollups, message deletes nor purges, since lifecycle, govern,
// uid, policy and oblig rows are never deleted.
func recordsStore(s wire.Space) jetstream.StreamConfig {
	c := kvStream(meshwire.RecordsBucket(s), 0, jetstream.FileStorage, 0)
	c.AllowRollup = false
	c.DenyDelete, c.DenyPurge = true, true
	return c
}

// admissionStore is the backing stream of the run admission store cotal_admission_<space> (SPEC
// §14.8): file, with no age or size limit and no Direct Get (every read is the leader's), and
// write-once per key at the broker (one message per subject, discarding a new one per subject),
// with neither rollups, deletes nor purges: a holder of a key's row can neither widen nor erase
// what was recorded.
func admissionStore(s wire.Space) jetstream.StreamConfig {
	c := kvStream(meshwire.AdmissionBucket(s), 0, jetstream.FileStorage, 0)
	c.AllowDirect, c.AllowRollup = false, false
	c.DiscardNewPerSubject = true
	c.DenyDelete, c.DenyPurge = true, true
	return c
}

// AuthStoreConfig is the backing stream of the auth store cotal_auth_<space> (SPEC §13.12): no
// Direct Get, so every read is leader-served and can fence; no age or size limit, since gates and
// heads are never deleted; per-message TTLs allowed, used only on credential rows.
func AuthStoreConfig(s wire.Space) jetstream.StreamConfig {
	c := kvStream(meshwire.AuthBucket(s), 0, jetstream.FileStorage, 0)
	c.AllowDirect = false
	c.AllowMsgTTL = true
	c.SubjectDeleteMarkerTTL = time.Hour
	return c
}

// UserAuthStoreConfig is the backing stream of the user-auth store cotal_userauth_<space>: the
// people ledger and the registry of remote managers, which every authority node of a cluster
// reads and writes. No Direct Get, so every read is leader-served: a revocation made on one node
// is seen at once by a connect on another. No age or size limit: a row lives until it is revoked.
func UserAuthStoreConfig(s wire.Space) jetstream.StreamConfig {
	c := kvStream(meshwire.UserAuthBucket(s), 0, jetstream.FileStorage, 0)
	c.AllowDirect = false
	return c
}

// Streams returns the names of every stream a provisioned space has, in creation order.
func Streams(s wire.Space) []string {
	rs := resources(s)
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.cfg.Name
	}
	return names
}

// StoredSubjects returns the subjects a provisioned space's streams and buckets capture: what a
// publish must reach to be stored, and so what the space's account imports from its store
// account.
func StoredSubjects(s wire.Space) []string {
	var subjects []string
	for _, r := range resources(s) {
		subjects = append(subjects, r.cfg.Subjects...)
	}
	return subjects
}
