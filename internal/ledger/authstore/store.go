package authstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// Store is a space's auth store, cotal_auth_<space>, opened by Open after proving
// the bucket's shape. It is bonded to its space: there is no way to build one from a KV handle
// and a space label, so no function of the ledger can be pointed at the wrong store. Every read is
// leader-served (STREAM.MSG.GET), since the bucket allows no Direct Get and a read may fence.
// It is safe for concurrent use.
type Store struct {
	space  wire.Space
	bucket wire.Bucket
	nc     *nats.Conn
	js     jetstream.JetStream
}

// Open binds the space's auth store on nc, proving its shape from the backing stream's
// config first: no Direct Get, no age limit, no finite message or byte limit, neither a mirror nor
// sourced. A drifted store is refused with ErrStoreShape naming the field.
func Open(ctx context.Context, nc *nats.Conn, space wire.Space) (*Store, error) {
	if _, err := wire.ParseSpace(string(space)); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	b := meshwire.AuthBucket(space)
	st, err := js.Stream(ctx, b.Stream())
	if err != nil {
		return nil, fmt.Errorf("open the auth store %s: %w", b, err)
	}
	if err := proveShape(st.CachedInfo().Config); err != nil {
		return nil, fmt.Errorf("open the auth store %s: %w", b, err)
	}
	return &Store{space: space, bucket: b, nc: nc, js: js}, nil
}

func proveShape(c jetstream.StreamConfig) error {
	switch {
	case c.AllowDirect:
		return fmt.Errorf("%w: allow_direct is on (reads could be served by a replica and miss a fence)", ErrStoreShape)
	case c.MaxAge != 0:
		return fmt.Errorf("%w: max_age is %s (gates and heads must never age out)", ErrStoreShape, c.MaxAge)
	case c.MaxMsgs > 0:
		return fmt.Errorf("%w: max_msgs is %d (rows must never be evicted)", ErrStoreShape, c.MaxMsgs)
	case c.MaxBytes > 0:
		return fmt.Errorf("%w: max_bytes is %d (rows must never be evicted)", ErrStoreShape, c.MaxBytes)
	case c.Mirror != nil:
		return fmt.Errorf("%w: it is a mirror", ErrStoreShape)
	case len(c.Sources) > 0:
		return fmt.Errorf("%w: it is sourced", ErrStoreShape)
	}
	return nil
}

// read returns key's last message (leader-served), or nil when the key never existed (or its
// TTL expired): kvget.ErrNotFound becomes the nil row the store's read methods return for an
// absent key.
func (s *Store) read(ctx context.Context, key string) (*kvget.Entry, error) {
	e, err := kvget.Get(ctx, s.nc, s.bucket, key)
	if errors.Is(err, kvget.ErrNotFound) {
		return nil, nil
	}
	return e, err
}

// readNeverDeleted reads a key that is never deleted (a gate, a head, a uid reservation): a
// delete or purge marker there is corruption, not absence.
func (s *Store) readNeverDeleted(ctx context.Context, key string) (*kvget.Entry, error) {
	r, err := s.read(ctx, key)
	if err != nil || r == nil {
		return r, err
	}
	if r.Deleted {
		return nil, fmt.Errorf("%w: %s carries a delete marker, but it is never deleted", ErrCorrupt, key)
	}
	return r, nil
}

// write stores value under key if its last revision is still rev (0: the key holds nothing). A
// lost race is ErrConflict. ttl, when positive, expires the row (credential rows only).
func (s *Store) write(ctx context.Context, key string, value []byte, rev uint64, ttl time.Duration) (uint64, error) {
	msg := nats.NewMsg(s.bucket.Subject(key))
	msg.Data = value
	if ttl > 0 {
		msg.Header.Set(jetstream.MsgTTLHeader, strconv.FormatInt(int64(ttl.Seconds()), 10)+"s")
	}
	ack, err := s.publish(ctx, msg, rev)
	if err == nil {
		return ack.Sequence, nil
	}
	if jsapi.Conflict(err) {
		return 0, fmt.Errorf("write %s at revision %d: %w", key, rev, ErrConflict)
	}
	return 0, fmt.Errorf("write %s: %w", key, err)
}

// publishTries bounds how often publish sends one write.
const publishTries = 4

// publish writes msg if its subject's last revision is still rev, sending it again when no
// answer came: a replicated store's leader may be changing, or a loaded cluster late to commit.
// The write carries a message id (a fresh one unless msg has one), so a repeat of one that
// landed is answered with the first one's sequence rather than a conflict with itself: a
// clustered stream dedupes it, and a single server, which checks the revision first, is asked
// whose write the subject's last one is.
func (s *Store) publish(ctx context.Context, msg *nats.Msg, rev uint64) (*jetstream.PubAck, error) {
	id := msg.Header.Get(jetstream.MsgIDHeader)
	// A write sent before (a repeat here, or a msg the caller sent already) may be the one the
	// subject holds; a first send's conflict is another writer's, and costs no read.
	sentBefore := id != ""
	if id == "" {
		id = nuid.Next()
		msg.Header.Set(jetstream.MsgIDHeader, id)
	}
	for try := 1; ; try++ {
		ack, err := s.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(rev))
		if jsapi.Conflict(err) && (sentBefore || try > 1) {
			if last, rerr := kvget.ReadLast(ctx, s.nc, s.bucket.Stream(), msg.Subject); rerr == nil && last.Header.Get(jetstream.MsgIDHeader) == id {
				return &jetstream.PubAck{Stream: s.bucket.Stream(), Sequence: last.Seq, Duplicate: true}, nil
			}
		}
		if err == nil || try == publishTries || ctx.Err() != nil || !jsapi.PublishUnanswered(err) {
			return ack, err
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(err, ctx.Err())
		case <-time.After(time.Duration(try) * 250 * time.Millisecond):
		}
	}
}

// remove deletes key if its last revision is still rev.
func (s *Store) remove(ctx context.Context, key string, rev uint64) error {
	return s.purge(ctx, key, rev, 0)
}

// prunedMarkerTTL is how long the marker of a pruned row stays: until then a read of the key
// finds a delete marker on a row that is otherwise never deleted, and reports it corrupt.
const prunedMarkerTTL = 5 * time.Second

// prune removes key (at revision rev) for good: its purge marker itself expires after
// prunedMarkerTTL, so the key is gone from the bucket.
func (s *Store) prune(ctx context.Context, key string, rev uint64) error {
	return s.purge(ctx, key, rev, prunedMarkerTTL)
}

// purge rolls key's history up into a purge marker if its last revision is still rev; a
// positive markerTTL expires the marker too.
func (s *Store) purge(ctx context.Context, key string, rev uint64, markerTTL time.Duration) error {
	msg := nats.NewMsg(s.bucket.Subject(key))
	msg.Header.Set(jsapi.KVOperation, jsapi.KVPurge)
	msg.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	if markerTTL > 0 {
		msg.Header.Set(jetstream.MsgTTLHeader, strconv.Itoa(int(markerTTL.Seconds()))+"s")
	}
	if _, err := s.publish(ctx, msg, rev); err != nil {
		return fmt.Errorf("remove %s: %w", key, err)
	}
	return nil
}

// keys lists the store's keys under a filter such as "cred.<uid>.>".
func (s *Store) keys(ctx context.Context, filter string) ([]string, error) {
	kv, err := s.js.KeyValue(ctx, string(s.bucket))
	if err != nil {
		return nil, err
	}
	lister, err := kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil, nil
		}
		return nil, err
	}
	var out []string
	for k := range lister.Keys() {
		out = append(out, k)
	}
	return out, nil
}
