package ledger

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// UserAuthStore returns the space's user-auth store (meshwire.UserAuthBucket), on a connection of
// the ledger's own credential dialled on the first call. The store stays usable as long as the
// ledger is open, so a holder may keep it: each call runs on the held connection as it is then,
// dialled again on a fresh credential before the current one expires. A watch or key listing runs
// on the connection it started on, so it is for a listing's moment, not for a standing watch.
// After Close every call fails with ErrClosed.
func (l *Ledger) UserAuthStore(ctx context.Context) (jetstream.KeyValue, error) {
	if _, err := l.userauth.get(ctx); err != nil {
		return nil, err
	}
	return heldKV{h: l.userauth, bucket: string(meshwire.UserAuthBucket(l.sp))}, nil
}

// openUserAuth binds the user-auth store of sp on a fresh connection. On a cluster the stream's
// info can go unanswered while its leader is elected, so the bind is asked again as the auth
// store's open is.
func openUserAuth(sp wire.Space) func(context.Context, *nats.Conn) (jetstream.KeyValue, error) {
	return func(ctx context.Context, nc *nats.Conn) (kv jetstream.KeyValue, err error) {
		js, err := jetstream.New(nc)
		if err != nil {
			return nil, err
		}
		err = jsapi.RetryUnanswered(ctx, func(ctx context.Context) (err error) {
			kv, err = js.KeyValue(ctx, string(meshwire.UserAuthBucket(sp)))
			return err
		})
		return kv, err
	}
}

// heldKV is a key-value store on a held connection: every call runs on the store as the held
// connection has it at that moment.
type heldKV struct {
	h      *held[jetstream.KeyValue]
	bucket string
}

var _ jetstream.KeyValue = heldKV{}

// Get implements jetstream.KeyValue.
func (s heldKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	kv, err := s.h.get(ctx)
	if err != nil {
		return nil, err
	}
	return kv.Get(ctx, key)
}

// GetRevision implements jetstream.KeyValue.
func (s heldKV) GetRevision(ctx context.Context, key string, revision uint64) (jetstream.KeyValueEntry, error) {
	kv, err := s.h.get(ctx)
	if err != nil {
		return nil, err
	}
	return kv.GetRevision(ctx, key, revision)
}

// Put implements jetstream.KeyValue.
func (s heldKV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	kv, err := s.h.get(ctx)
	if err != nil {
		return 0, err
	}
	return kv.Put(ctx, key, value)
}

// PutString implements jetstream.KeyValue.
func (s heldKV) PutString(ctx context.Context, key string, value string) (uint64, error) {
	kv, err := s.h.get(ctx)
	if err != nil {
		return 0, err
	}
	return kv.PutString(ctx, key, value)
}

// Create implements jetstream.KeyValue.
func (s heldKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	kv, err := s.h.get(ctx)
	if err != nil {
		return 0, err
	}
	return kv.Create(ctx, key, value, opts...)
}

// Update implements jetstream.KeyValue.
func (s heldKV) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	kv, err := s.h.get(ctx)
	if err != nil {
		return 0, err
	}
	return kv.Update(ctx, key, value, revision)
}

// Delete implements jetstream.KeyValue.
func (s heldKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	kv, err := s.h.get(ctx)
	if err != nil {
		return err
	}
	return kv.Delete(ctx, key, opts...)
}

// Purge implements jetstream.KeyValue.
func (s heldKV) Purge(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	kv, err := s.h.get(ctx)
	if err != nil {
		return err
	}
	return kv.Purge(ctx, key, opts...)
}

// Watch implements jetstream.KeyValue.
func (s heldKV) Watch(ctx context.Context, keys string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	kv, err := s.h.get(ctx)
	if err != nil {
		return nil, err
	}
	return kv.Watch(ctx, keys, opts...)
}

// WatchAll implements jetstream.KeyValue.
func (s heldKV) WatchAll(ctx context.Context, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	kv, err := s.h.get(ctx)
	if err != nil {
		return nil, err
	}
	return kv.WatchAll(ctx, opts...)
}

// WatchFiltered implements jetstream.KeyValue.
func (s heldKV) WatchFiltered(ctx context.Context, keys []string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	kv, err := s.h.get(ctx)
	if err != nil {
		return nil, err
	}
	return kv.WatchFiltered(ctx, keys, opts...)
}

// Keys implements jetstream.KeyValue.
func (s heldKV) Keys(ctx context.Context, opts ...jetstream.WatchOpt) ([]string, error) {
	kv, err := s.h.get(ctx)
	if err != nil {
		return nil, err
	}
	return kv.Keys(ctx, opts...)
}

// ListKeys implements jetstream.KeyValue.
func (s heldKV) ListKeys(ctx context.Context, opts ...jetstream.WatchOpt) (jetstream.KeyLister, error) {
	kv, err := s.h.get(ctx)
	if err != nil {
		return nil, err
	}
	return kv.ListKeys(ctx, opts...)
}

// ListKeysFiltered implements jetstream.KeyValue.
func (s heldKV) ListKeysFiltered(ctx context.Context, filters ...string) (jetstream.KeyLister, error) {
	kv, err := s.h.get(ctx)
	if err != nil {
		return nil, err
	}
	return kv.ListKeysFiltered(ctx, filters...)
}

// History implements jetstream.KeyValue.
func (s heldKV) History(ctx context.Context, key string, opts ...jetstream.WatchOpt) ([]jetstream.KeyValueEntry, error) {
	kv, err := s.h.get(ctx)
	if err != nil {
		return nil, err
	}
	return kv.History(ctx, key, opts...)
}

// Bucket implements jetstream.KeyValue.
func (s heldKV) Bucket() string { return s.bucket }

// PurgeDeletes implements jetstream.KeyValue.
func (s heldKV) PurgeDeletes(ctx context.Context, opts ...jetstream.KVPurgeOpt) error {
	kv, err := s.h.get(ctx)
	if err != nil {
		return err
	}
	return kv.PurgeDeletes(ctx, opts...)
}

// Status implements jetstream.KeyValue.
func (s heldKV) Status(ctx context.Context) (jetstream.KeyValueStatus, error) {
	kv, err := s.h.get(ctx)
	if err != nil {
		return nil, err
	}
	return kv.Status(ctx)
}
