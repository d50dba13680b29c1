package warden

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/metrics"
	"github.com/gocotal/cotal/wire"
)

// row is a valid row the warden saw: its value, the stream sequence that stored it, its own time
// to live (zero for none) and when it expires by that TTL or the bucket's max age (zero for
// never). A row the warden restored keeps the deadline of the row it restored.
type row struct {
	value    []byte
	seq      uint64
	ttl      time.Duration
	deadline time.Time
}

// deadlineOf returns when a row stored at at expires by its own ttl or the bucket's maxAge,
// whichever comes first, or the zero time when neither applies.
func deadlineOf(at time.Time, ttl, maxAge time.Duration) time.Time {
	life := ttl
	if maxAge > 0 && (life == 0 || maxAge < life) {
		life = maxAge
	}
	if life == 0 {
		return time.Time{}
	}
	return at.Add(life)
}

// rows keeps, per bucket and key, the last valid row seen. It is safe for concurrent use.
type rows struct {
	mu   sync.Mutex
	good map[wire.Bucket]map[string]row // guarded by mu
}

// keep records v as key's last valid row, unless it is the row already kept at v's sequence: a
// restore the warden recorded itself, with the deadline of the row it restored.
func (r *rows) keep(b wire.Bucket, key string, v row) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.good == nil {
		r.good = map[wire.Bucket]map[string]row{}
	}
	if r.good[b] == nil {
		r.good[b] = map[string]row{}
	}
	if cur, ok := r.good[b][key]; ok && cur.seq == v.seq {
		return
	}
	r.good[b][key] = v
}

func (r *rows) forget(b wire.Bucket, key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.good[b], key)
}

// live returns a copy of b's kept rows stored before seq whose deadline has not passed.
func (r *rows) live(b wire.Bucket, seq uint64) map[string]row {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	out := map[string]row{}
	for k, v := range r.good[b] {
		if v.seq < seq && (v.deadline.IsZero() || v.deadline.After(now)) {
			out[k] = v
		}
	}
	return out
}

// before returns the last valid row of key stored before seq, or nil.
func (r *rows) before(b wire.Bucket, key string, seq uint64) *row {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.good[b][key]; ok && v.seq < seq {
		return &v
	}
	return nil
}

// loadPoll is how often a bucket's initial load is checked until it is complete; slowLoad is how
// long the load, or the creation of a consumer, may take before the warden logs where it is.
const (
	loadPoll = 100 * time.Millisecond
	slowLoad = 10 * time.Second
)

// guardBuckets watches every bucket of the space from each key's current row on, and repairs
// every row that has the shape only a JetStream reply has (jetStreamReply): the key's last valid
// row is put back while it is still alive, or else the row is deleted. Readers hold the rows to
// their own types; the warden judges only what no writer of any version stores.
func (w *Warden) guardBuckets(ctx context.Context) error {
	var started []jetstream.ConsumeContext
	var polls sync.WaitGroup // the checks of each bucket's initial load
	ctx, stop := context.WithCancel(ctx)
	defer func() {
		for _, cc := range started {
			cc.Stop()
		}
		stop() // a failed start returns before the caller's ctx ends: the expiries end with this one
		w.expiries.Wait()
		polls.Wait()
	}()
	names := meshwire.Buckets(w.cfg.Space)
	var loading atomic.Int32
	loading.Store(int32(len(names)))
	loaded := func(once *sync.Once) {
		once.Do(func() {
			if loading.Add(-1) == 0 {
				w.watching()
			}
		})
	}
	for _, b := range names {
		once := new(sync.Once)
		judged := new(judgedMark)
		st, err := w.stream(ctx, b.Stream())
		if err != nil {
			return fmt.Errorf("watch %s: %w", b, err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			return fmt.Errorf("watch %s: %w", b, err)
		}
		trail := newSeqTrail(info.State.LastSeq)
		// No filter: a copy stored under a subject outside the bucket is seen too.
		cons, err := w.js.OrderedConsumer(ctx, b.Stream(), jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
		})
		if err != nil {
			return fmt.Errorf("watch %s: %w", b, err)
		}
		cc, err := w.consume(b.Stream(), cons, func(msg jetstream.Msg) {
			meta := w.judgeRow(ctx, b, trail, msg)
			if meta != nil {
				judged.set(meta.Consumer, meta.Sequence.Consumer)
				if meta.NumPending == 0 {
					loaded(once)
				}
			}
		})
		if err != nil {
			return fmt.Errorf("watch %s: %w", b, err)
		}
		started = append(started, cc)
		// The last row delivered may have been delivered with rows still pending that then
		// expired (a lapsed lease in a bucket with a TTL) and are never delivered, and a bucket
		// whose rows have all expired delivers none: the bucket is loaded too once the consumer
		// has nothing pending and every row it delivered is judged.
		polls.Go(func() { // owned: waited for on return
			t := time.NewTicker(loadPoll)
			defer t.Stop()
			slow := time.Now().Add(slowLoad) // a load that takes longer says why, once
			for {
				info, err := cons.Info(ctx)
				if err == nil && info.NumPending == 0 && judged.covers(info) {
					loaded(once)
					return
				}
				if !slow.IsZero() && time.Now().After(slow) {
					slow = time.Time{}
					if err != nil {
						w.log.Warn("bucket still loading", "bucket", b, "err", err)
					} else {
						w.log.Warn("bucket still loading", "bucket", b, "pending", info.NumPending,
							"delivered", info.Delivered.Consumer, "judged", judged.String())
					}
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		})
	}
	<-ctx.Done()
	return nil
}

// judgedMark is the consumer and consumer sequence of the last row judged in a bucket's load. An
// ordered consumer replaced midway starts its sequence again under a new name.
type judgedMark struct {
	mu       sync.Mutex
	consumer string
	seq      uint64
}

func (m *judgedMark) set(consumer string, seq uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.consumer, m.seq = consumer, seq
}

// covers reports whether every row the consumer of info delivered has been judged. It goes by
// the consumer's sequence, not the stream's: a consumer made on a bucket whose rows all expired
// starts past the stream's last sequence and delivers nothing. It speaks for the current
// consumer only: a row its predecessor delivered just before being replaced may still be in
// judgement, and is judged all the same.
func (m *judgedMark) covers(info *jetstream.ConsumerInfo) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return info.Delivered.Consumer == 0 || (m.consumer == info.Name && m.seq >= info.Delivered.Consumer)
}

func (m *judgedMark) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return fmt.Sprintf("%s:%d", m.consumer, m.seq)
}

// consume starts consuming through an ordered consumer, and logs once when the consumer is slow to
// be created: an ordered consumer retries its creation without end, so a stream that cannot take
// it would otherwise keep the warden from ever watching, without a word.
func (w *Warden) consume(stream string, cons jetstream.Consumer, h jetstream.MessageHandler) (jetstream.ConsumeContext, error) {
	t := time.AfterFunc(slowLoad, func() { w.log.Warn("the warden's consumer is slow to start", "stream", stream) })
	defer t.Stop()
	return cons.Consume(h)
}

// judgeRow judges one stored row and returns its metadata; trail is the bucket's watch so far.
func (w *Warden) judgeRow(ctx context.Context, b wire.Bucket, trail *seqTrail, msg jetstream.Msg) *jetstream.MsgMetadata {
	meta, err := msg.Metadata()
	if err != nil {
		return nil
	}
	seq := meta.Sequence.Stream
	trail.observe(seq)
	key, ok := strings.CutPrefix(msg.Subject(), b.Subject(""))
	if !ok {
		// A consumer delivery keeps its message's own subject (see judgeStored).
		w.quarantine(ctx, location{stream: b.Stream(), seq: seq}, msg.Subject(),
			fmt.Sprintf("%s is not a key of %s", msg.Subject(), b), culprit{kind: "consumer-delivery", text: "a JetStream consumer delivery aimed at this bucket"})
		return meta
	}
	h := msg.Headers()
	if h.Get(jsapi.Rollup) == jsapi.RollupAll {
		// No writer of a bucket rolls the whole of it up: a writer of one key wiped every other.
		w.undoRollup(ctx, b, key, seq)
		return meta
	}
	if h.Get(jsapi.KVOperation) != "" || h.Get(jsapi.MarkerReason) != "" || key == wire.TTLCanaryKey {
		w.rows.forget(b, key)
		return meta
	}
	if err := jetStreamReply(msg.Data()); err != nil {
		c := w.culpritOf(ctx, msg.Subject(), msg.Data())
		w.repairRow(ctx, b, trail, key, seq, err.Error(), c)
		w.punish(ctx, c, "aimed a JetStream reply at "+string(b))
		return meta
	}
	ttl, _ := time.ParseDuration(h.Get(jsapi.MsgTTL)) // absent or unreadable: no TTL of its own
	if n, err := strconv.ParseInt(h.Get(jsapi.MsgTTL), 10, 64); err == nil {
		ttl = time.Duration(n) * time.Second // the header's bare form counts seconds
	}
	w.rows.keep(b, key, row{value: msg.Data(), seq: seq, ttl: ttl, deadline: deadlineOf(meta.Timestamp, ttl, w.maxAge(ctx, b))})
	return meta
}

// maxAge returns the max age of b's stream, zero when it has none or it cannot be read.
func (w *Warden) maxAge(ctx context.Context, b wire.Bucket) time.Duration {
	st, err := w.stream(ctx, b.Stream())
	if err != nil {
		return 0
	}
	return st.CachedInfo().Config.MaxAge
}

// repairRow undoes the row stored at seq under key: the last valid row before it is written back
// if seq is still the key's last revision, the row has at least a second left to live and the
// watch skipped no sequence between the two (a skipped one may have been a newer write of the
// key that the capture replaced: the older row is then never put back); or else the row is
// deleted. A restored row keeps its original deadline: one with its own TTL is written with what
// is left of it, one that expires by the bucket's max age is deleted at that deadline. A newer
// write since then is left alone: it is judged on its own.
func (w *Warden) repairRow(ctx context.Context, b wire.Bucket, trail *seqTrail, key string, seq uint64, why string, c culprit) {
	attrs := []any{"bucket", string(b), "key", key, "seq", seq, "reason", why, "cause", c.text}
	logKey := "repair " + string(b) + " " + c.kind
	prev := w.rows.before(b, key, seq)
	if prev != nil && !trail.unbroken(prev.seq, seq) {
		attrs = append(attrs, "stale", prev.seq)
		prev = nil
	}
	if prev != nil {
		if _, alive := prev.lifeLeft(); !alive {
			prev = nil
		}
	}
	var err error
	if prev != nil {
		err = retrying(ctx, func() error { return w.restore(ctx, b, key, prev, seq) })
	} else {
		err = w.deleteMsg(ctx, b.Stream(), seq)
	}
	switch {
	case prev != nil && jsapi.Conflict(err):
		w.limited(logKey+" conflict", slog.LevelInfo, "bucket row changed before its repair", attrs...)
		return
	case prev != nil:
		attrs = append(attrs, "restored", prev.seq)
	default:
		attrs = append(attrs, "restored", "none: removed")
	}
	if err != nil {
		w.limited(logKey+" failed", slog.LevelError, "repair a bucket row", append(attrs, "err", err)...)
		return
	}
	metrics.WardenRepairs.WithLabelValues(string(b), c.kind).Inc()
	w.limited(logKey, slog.LevelWarn, "bucket row repaired", attrs...)
}

// lifeLeft returns how long r has left to live, in whole seconds (the server takes no TTL under a
// second, and rounding up would let repeated captures keep a row alive), and whether that is at
// least a second: a row with less is not put back. A row that never expires has all the time.
func (r *row) lifeLeft() (time.Duration, bool) {
	if r.deadline.IsZero() {
		return 0, true
	}
	left := time.Until(r.deadline).Truncate(time.Second)
	return left, left >= time.Second
}

// restore writes prev back as key's row, if the key's last revision is still after (zero: the key
// has no message), with what is left of its own TTL, and schedules the end of a row that expires
// by the bucket's max age at its original deadline. A conflict means the key moved on: a newer
// write is judged on its own.
func (w *Warden) restore(ctx context.Context, b wire.Bucket, key string, prev *row, after uint64) error {
	msg := nats.NewMsg(b.Subject(key))
	msg.Data = prev.value
	if prev.ttl > 0 {
		left, _ := prev.lifeLeft()
		msg.Header.Set(jsapi.MsgTTL, strconv.FormatInt(int64(left/time.Second), 10))
	}
	ack, err := w.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(after))
	if err != nil {
		return err
	}
	w.rows.keep(b, key, row{value: prev.value, seq: ack.Sequence, ttl: prev.ttl, deadline: prev.deadline})
	if prev.ttl == 0 && !prev.deadline.IsZero() {
		w.expireAt(ctx, b, ack.Sequence, prev.deadline)
	}
	return nil
}

// undoRollup answers a row stored at seq under key with a rollup of the whole bucket: its sender
// (a presence key names its only writer) is revoked, every other key's last valid row that still
// has a second to live is written back where the key is still empty, and the rollup row itself is
// deleted.
func (w *Warden) undoRollup(ctx context.Context, b wire.Bucket, key string, seq uint64) {
	c := culprit{kind: "rollup", text: "a rollup of the whole bucket by the writer of " + key}
	if p, ok := w.senderOf(b.Subject(key)); ok {
		c.sender = &p
		c.text = p.String() + ", rolling up the whole bucket from its own key"
	}
	w.punish(ctx, c, "rolled up the whole of "+string(b))
	restored, failed := 0, 0
	for k, r := range w.rows.live(b, seq) {
		if _, alive := r.lifeLeft(); k == key || !alive {
			continue
		}
		switch err := w.restore(ctx, b, k, &r, 0); {
		case err == nil:
			restored++
		case !jsapi.Conflict(err): // a conflict: its writer wrote it again first
			failed++
		}
	}
	attrs := []any{"bucket", string(b), "key", key, "seq", seq, "cause", c.text, "restored", restored, "failed", failed}
	if err := w.deleteMsg(ctx, b.Stream(), seq); err != nil {
		attrs = append(attrs, "err", err)
	}
	w.limited("rollup "+string(b), slog.LevelWarn, "bucket rollup undone", attrs...)
}

// expireAt deletes the message at seq of b's stream at deadline: a row restored in a bucket that
// expires rows by its max age would otherwise start a new life, and a lease or presence row must
// end when it would have. A newer write has already removed seq, and then the delete finds
// nothing. The timers end with ctx.
func (w *Warden) expireAt(ctx context.Context, b wire.Bucket, seq uint64, deadline time.Time) {
	w.expiries.Go(func() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := w.deleteMsg(ctx, b.Stream(), seq); err != nil && ctx.Err() == nil {
			w.log.Warn("expire a restored row", "bucket", string(b), "seq", seq, "err", err)
		}
	})
}
