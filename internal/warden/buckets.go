package warden

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/wire"
)

// row is a valid row the warden saw: its value, the stream sequence and time that stored it,
// and its own time to live (zero for none).
type row struct {
	value []byte
	seq   uint64
	at    time.Time
	ttl   time.Duration
}

// expiresAt returns when the row expires by its own TTL or the bucket's max age, or the zero
// time when it does not.
func (r row) expiresAt(maxAge time.Duration) time.Time {
	life := r.ttl
	if maxAge > 0 && (life == 0 || maxAge < life) {
		life = maxAge
	}
	if life == 0 {
		return time.Time{}
	}
	return r.at.Add(life)
}

// rows keeps, per bucket and key, the last valid row seen. It is safe for concurrent use.
type rows struct {
	mu   sync.Mutex
	good map[wire.Bucket]map[string]row // guarded by mu
}

func (r *rows) keep(b wire.Bucket, key string, v row) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.good == nil {
		r.good = map[wire.Bucket]map[string]row{}
	}
	if r.good[b] == nil {
		r.good[b] = map[string]row{}
	}
	r.good[b][key] = v
}

func (r *rows) forget(b wire.Bucket, key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.good[b], key)
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

// Headers of a bucket's markers and rows: a delete or purge marker carries KV-Operation, a marker
// the server writes when a row's time to live ran out carries Nats-Marker-Reason, and a row
// written with its own time to live carries Nats-TTL.
const (
	kvOperation  = "KV-Operation"
	markerReason = "Nats-Marker-Reason"
	msgTTL       = "Nats-TTL"
)

// bucketNames lists the space's buckets.
func bucketNames(s wire.Space) []wire.Bucket {
	return []wire.Bucket{
		s.PresenceBucket(), s.ChannelsBucket(), s.MembersBucket(), s.ACLBucket(),
		s.MembershipBucket(), s.DeliveryBucket(), s.ManagerBucket(), s.AuthBucket(),
	}
}

// guardBuckets watches every bucket of the space from each key's current row on, and repairs
// every row that has the shape only a JetStream reply has (jetStreamReply): the key's last valid
// row is put back while it is still alive, or else the row is deleted. Readers hold the rows to
// their own types; the warden judges only what no writer of any version stores.
func (w *Warden) guardBuckets(ctx context.Context) error {
	var started []jetstream.ConsumeContext
	defer func() {
		for _, cc := range started {
			cc.Stop()
		}
	}()
	names := bucketNames(w.cfg.Space)
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
		// No filter: a copy stored under a subject outside the bucket is seen too.
		cons, err := w.js.OrderedConsumer(ctx, b.Stream(), jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
		})
		if err != nil {
			return fmt.Errorf("watch %s: %w", b, err)
		}
		cc, err := cons.Consume(func(msg jetstream.Msg) {
			meta := w.judgeRow(ctx, b, msg)
			if meta != nil && meta.NumPending == 0 {
				loaded(once)
			}
		})
		if err != nil {
			return fmt.Errorf("watch %s: %w", b, err)
		}
		started = append(started, cc)
		info, err := cons.Info(ctx)
		if err != nil {
			return fmt.Errorf("watch %s: %w", b, err)
		}
		if info.NumPending == 0 && info.Delivered.Stream == 0 {
			loaded(once)
		}
	}
	<-ctx.Done()
	return nil
}

// judgeRow judges one stored row and returns its metadata.
func (w *Warden) judgeRow(ctx context.Context, b wire.Bucket, msg jetstream.Msg) *jetstream.MsgMetadata {
	meta, err := msg.Metadata()
	if err != nil {
		return nil
	}
	seq := meta.Sequence.Stream
	key, ok := strings.CutPrefix(msg.Subject(), b.Subject(""))
	if !ok {
		// A consumer delivery keeps its message's own subject (see judgeStored).
		w.quarantine(ctx, location{stream: b.Stream(), seq: seq}, msg.Subject(),
			fmt.Sprintf("%s is not a key of %s", msg.Subject(), b), "a JetStream consumer delivery aimed at this bucket")
		return meta
	}
	h := msg.Headers()
	if h.Get(kvOperation) != "" || h.Get(markerReason) != "" || key == wire.TTLCanaryKey {
		w.rows.forget(b, key)
		return meta
	}
	if err := jetStreamReply(msg.Data()); err != nil {
		w.repairRow(ctx, b, key, seq, err.Error(), w.cause(ctx, msg.Subject(), msg.Data()))
		return meta
	}
	ttl, _ := time.ParseDuration(h.Get(msgTTL)) // absent or unreadable: no TTL of its own
	if n, err := strconv.ParseInt(h.Get(msgTTL), 10, 64); err == nil {
		ttl = time.Duration(n) * time.Second // the header's bare form counts seconds
	}
	w.rows.keep(b, key, row{value: msg.Data(), seq: seq, at: meta.Timestamp, ttl: ttl})
	return meta
}

// repairRow undoes the row stored at seq under key: the last valid row before it is written back
// if seq is still the key's last revision, or the row is deleted when the key had none. A newer
// write since then is left alone: it is judged on its own.
func (w *Warden) repairRow(ctx context.Context, b wire.Bucket, key string, seq uint64, why, cause string) {
	attrs := []any{"bucket", string(b), "key", key, "seq", seq, "reason", why, "cause", cause}
	prev := w.rows.before(b, key, seq)
	var left time.Duration
	if prev != nil {
		// A row past its time to live or the bucket's max age is not brought back: it had
		// expired, and a lease or presence row must stay gone.
		var maxAge time.Duration
		if st, err := w.stream(ctx, b.Stream()); err == nil {
			maxAge = st.CachedInfo().Config.MaxAge
		}
		if end := prev.expiresAt(maxAge); !end.IsZero() {
			if left = time.Until(end); left <= 0 {
				prev = nil
			}
		}
	}
	var err error
	if prev != nil {
		msg := nats.NewMsg(b.Subject(key))
		msg.Data = prev.value
		if prev.ttl > 0 {
			msg.Header.Set(msgTTL, strconv.FormatInt(int64((left+time.Second-1)/time.Second), 10))
		}
		_, err = w.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(seq))
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			w.log.Info("bucket row changed before its repair", attrs...)
			return
		}
		attrs = append(attrs, "restored", prev.seq)
	} else {
		var st jetstream.Stream
		if st, err = w.stream(ctx, b.Stream()); err == nil {
			err = st.DeleteMsg(ctx, seq)
		}
		attrs = append(attrs, "restored", "none: removed")
	}
	if err != nil {
		w.log.Error("repair a bucket row", append(attrs, "err", err)...)
		return
	}
	w.log.Warn("bucket row repaired", attrs...)
}
