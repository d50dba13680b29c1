package warden

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/wire"
)

// rowJudge returns why a row stored under key is not one any legitimate writer of its bucket
// writes, or nil.
type rowJudge func(key string, value []byte) error

// buckets returns the space's buckets and how each one's rows are judged. The mesh's own rows
// (members, read ACLs, leases) must hold exactly their type's fields; rows that other
// implementations' clients write (presence, the channel registry) are judged by the wire's
// readers; the rest must at least not carry another stored shape's fields.
func buckets(s wire.Space) map[wire.Bucket]rowJudge {
	foreign := func(_ string, v []byte) error { return wire.CheckForeignRow("row", v) }
	lease := func(key string, v []byte) error {
		if !strings.HasPrefix(key, "lease.") {
			return wire.CheckForeignRow("row", v)
		}
		_, err := wire.DecodeDeliveryLease(v)
		return err
	}
	return map[wire.Bucket]rowJudge{
		s.PresenceBucket(): func(key string, v []byte) error {
			_, err := wire.DecodePresence(key, v)
			return err
		},
		s.ChannelsBucket(): func(key string, v []byte) error {
			if key == wire.ChannelDefaultsKey {
				_, err := wire.DecodeChannelDefaults(v)
				return err
			}
			_, err := wire.DecodeChannelConfig(v)
			return err
		},
		s.MembersBucket(): func(key string, v []byte) error {
			_, err := wire.DecodeMemberRow(key, v)
			return err
		},
		s.ACLBucket(): func(key string, v []byte) error {
			if _, err := wire.ParseLifecycle(key); err != nil {
				return err
			}
			_, err := wire.DecodeACLRow(v)
			return err
		},
		s.DeliveryBucket():   lease,
		s.ManagerBucket():    lease,
		s.MembershipBucket(): foreign,
		s.AuthBucket():       foreign,
	}
}

// row is a valid row the warden saw: its value and the stream sequence that stored it.
type row struct {
	value []byte
	seq   uint64
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

// kvOperation is the header a bucket's delete and purge markers carry.
const kvOperation = "KV-Operation"

// guardBuckets watches every bucket of the space from each key's current row on, and repairs
// every row its bucket's judge refuses: the key's last valid row is put back, or, when it never
// had one, the row is deleted.
func (w *Warden) guardBuckets(ctx context.Context) error {
	var started []jetstream.ConsumeContext
	defer func() {
		for _, cc := range started {
			cc.Stop()
		}
	}()
	judges := buckets(w.cfg.Space)
	var loading atomic.Int32
	loading.Store(int32(len(judges)))
	loaded := func(once *sync.Once) {
		once.Do(func() {
			if loading.Add(-1) == 0 {
				w.watching()
			}
		})
	}
	for b, judge := range judges {
		once := new(sync.Once)
		// No filter: a copy stored under a subject outside the bucket is seen too.
		cons, err := w.js.OrderedConsumer(ctx, b.Stream(), jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
		})
		if err != nil {
			return fmt.Errorf("watch %s: %w", b, err)
		}
		cc, err := cons.Consume(func(msg jetstream.Msg) {
			meta := w.judgeRow(ctx, b, judge, msg)
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
func (w *Warden) judgeRow(ctx context.Context, b wire.Bucket, judge rowJudge, msg jetstream.Msg) *jetstream.MsgMetadata {
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
	if op := msg.Headers().Get(kvOperation); op != "" || key == wire.TTLCanaryKey {
		w.rows.forget(b, key)
		return meta
	}
	if err := judge(key, msg.Data()); err != nil {
		w.repairRow(ctx, b, key, seq, err.Error(), w.cause(ctx, msg.Subject(), msg.Data()))
		return meta
	}
	w.rows.keep(b, key, row{value: msg.Data(), seq: seq})
	return meta
}

// repairRow undoes the row stored at seq under key: the last valid row before it is written back
// if seq is still the key's last revision, or the row is deleted when the key had none. A newer
// write since then is left alone: it is judged on its own.
func (w *Warden) repairRow(ctx context.Context, b wire.Bucket, key string, seq uint64, why, cause string) {
	attrs := []any{"bucket", string(b), "key", key, "seq", seq, "reason", why, "cause", cause}
	prev := w.rows.before(b, key, seq)
	var err error
	if prev != nil {
		_, err = w.js.Publish(ctx, b.Subject(key), prev.value, jetstream.WithExpectLastSequencePerSubject(seq))
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
	w.quarantined.Add(1)
	w.log.Warn("bucket row repaired", attrs...)
}
