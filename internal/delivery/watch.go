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
