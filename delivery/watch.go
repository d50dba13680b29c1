package delivery

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/wire"
)

// watch keeps a view of bucket current: apply sees every entry, first the current ones, then
// each change (a nil value for a deleted key). It returns once the current entries are applied;
// stop ends the watch and waits for apply to return.
func (d *Daemon) watch(ctx context.Context, b wire.Bucket, apply func(key string, value []byte)) (stop func(), err error) {
	kv, err := d.js.KeyValue(ctx, string(b))
	if err != nil {
		return nil, err
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return nil, err
	}
	loaded, done := make(chan struct{}), make(chan struct{})
	go func() { // owned: stop waits for it
		defer close(done)
		signal := sync.OnceFunc(func() { close(loaded) })
		defer signal()
		for e := range w.Updates() {
			if e == nil { // the current entries are all applied
				signal()
				continue
			}
			var value []byte
			if e.Operation() == jetstream.KeyValuePut {
				value = e.Value()
			}
			apply(e.Key(), value)
		}
	}()
	stop = func() {
		_ = w.Stop() // ends Updates
		<-done
	}
	select {
	case <-loaded:
		return stop, nil
	case <-ctx.Done():
		stop()
		return nil, fmt.Errorf("load %s: %w", b, ctx.Err())
	}
}

// registry is the daemon's view of the channels bucket, so that resolving a channel's class
// costs no read per message. A post's class is decided when the daemon fans it out, from the
// registry as the watch last saw it, as a fresh read at that moment would.
type registry struct {
	mu       sync.RWMutex
	channels map[string]*wire.ChannelConfig
	defaults *wire.ChannelDefaults
	// bad holds the keys whose value does not decode, with why; a post on such a channel waits
	// (is retried) until the entry is repaired.
	bad map[string]error
}

func newRegistry() *registry {
	return &registry{channels: map[string]*wire.ChannelConfig{}, bad: map[string]error{}}
}

// apply records one channels-bucket entry; a nil value deletes it.
func (r *registry) apply(key string, value []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.bad, key)
	if key == wire.ChannelDefaultsKey {
		r.defaults = nil
		if value != nil {
			def, err := wire.DecodeChannelDefaults(value)
			if err != nil {
				r.bad[key] = err
				return
			}
			r.defaults = def
		}
		return
	}
	delete(r.channels, key)
	if value != nil {
		ch, err := wire.DecodeChannelConfig(value)
		if err != nil {
			r.bad[key] = err
			return
		}
		r.channels[key] = ch
	}
}

// resolve returns channel's effective config (SPEC §7), or the error of an entry it depends on
// that does not decode.
func (r *registry) resolve(channel string) (wire.EffectiveChannel, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, key := range []string{channel, wire.ChannelDefaultsKey} {
		if err := r.bad[key]; err != nil {
			return wire.EffectiveChannel{}, fmt.Errorf("%s in the channels bucket is not valid: %w", key, err)
		}
	}
	return wire.ResolveChannel(r.channels[channel], r.defaults), nil
}
