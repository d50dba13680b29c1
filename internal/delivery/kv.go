package delivery

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// The daemon reads and writes buckets with the requests its credential holds: leader-served
// STREAM.MSG.GET point reads (nats.go's KV Get would switch to Direct Get, which the delivery
// profile lacks) and publishes with an expected per-subject sequence for compare-and-set.

// get reads key's last message in bucket from the leader; kvget.ErrNotFound when the key never
// existed or expired.
func (d *Daemon) get(ctx context.Context, b wire.Bucket, key string) (*kvget.Entry, error) {
	return kvget.Get(ctx, d.nc, b, key)
}

// getRow reads key's row in b and decodes it with decode, which refuses a malformed row: a
// bucket can be made to store bytes no writer meant for it (JetStream publishes its acknowledgements to whatever reply subject a client names), and such a
// row is never taken as the key's value. It returns nil, nil when no live value is there.
func getRow[T any](ctx context.Context, d *Daemon, b wire.Bucket, key string, decode func(key string, data []byte) (*T, error)) (*T, *kvget.Entry, error) {
	e, err := d.get(ctx, b, key)
	if errors.Is(err, kvget.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil || e.Deleted {
		return nil, nil, err
	}
	v, err := decode(key, e.Value)
	if err != nil {
		return nil, nil, fmt.Errorf("%s in %s is not valid: %w", key, b, err)
	}
	return v, e, nil
}

// Row decoders of the buckets the daemon reads, in getRow's form.
func aclRow(_ string, data []byte) (*meshwire.ACLRow, error) { return meshwire.DecodeACLRow(data) }
func leaseRow(_ string, data []byte) (*meshwire.DeliveryLease, error) {
	return meshwire.DecodeDeliveryLease(data)
}
func channelRow(_ string, data []byte) (*wire.ChannelConfig, error) {
	return wire.DecodeChannelConfig(data)
}
func defaultsRow(_ string, data []byte) (*wire.ChannelDefaults, error) {
	return wire.DecodeChannelDefaults(data)
}

// put writes value under key if the key's last revision is still rev (0: the key has no value).
// A deleted key counts as having no value.
func (d *Daemon) put(ctx context.Context, b wire.Bucket, key string, value []byte, rev uint64) (uint64, error) {
	ack, err := d.js.Publish(ctx, b.Subject(key), value, jetstream.WithExpectLastSequencePerSubject(rev))
	if err == nil {
		return ack.Sequence, nil
	}
	if rev == 0 && wrongRevision(err) {
		last, gerr := d.get(ctx, b, key)
		switch {
		case errors.Is(gerr, kvget.ErrNotFound):
			// Gone again (expired) since the write found it: still a lost create.
		case gerr != nil:
			return 0, gerr
		case last.Deleted:
			return d.put(ctx, b, key, value, last.Revision)
		}
		return 0, fmt.Errorf("create %s in %s: %w", key, b, errKeyExists)
	}
	return 0, fmt.Errorf("write %s in %s at revision %s: %w", key, b, strconv.FormatUint(rev, 10), err)
}

// wrongRevision reports whether err is a compare-and-set that found another last revision.
func wrongRevision(err error) bool {
	return jsapi.Conflict(err)
}

// rewrittenAs returns key's current revision when its current row decodes with decode to what
// same accepts: the row this daemon wrote, stored again at a new revision (the mesh's warden
// puts a key's last valid row back over a foreign one). It returns 0 when the row is another's.
func rewrittenAs[T any](ctx context.Context, d *Daemon, b wire.Bucket, key string, decode func(string, []byte) (*T, error), same func(*T) bool) uint64 {
	row, e, err := getRow(ctx, d, b, key, decode)
	if err != nil || row == nil || !same(row) {
		return 0
	}
	return e.Revision
}

// remove writes a delete marker for key if its last revision is still rev.
func (d *Daemon) remove(ctx context.Context, b wire.Bucket, key string, rev uint64) error {
	msg := nats.NewMsg(b.Subject(key))
	msg.Header.Set(jsapi.KVOperation, jsapi.KVDelete)
	_, err := d.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(rev))
	if err != nil {
		return fmt.Errorf("delete %s in %s: %w", key, b, err)
	}
	return nil
}
