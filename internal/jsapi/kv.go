package jsapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// ListKeys returns the keys of kv that filter (a key or a pattern of keys) matches, each once,
// sorted. A listing its ctx cut short is an error, never a shorter list: a reader that decides by
// what it lists must not take part of a bucket for the whole of it.
func ListKeys(ctx context.Context, kv jetstream.KeyValue, filter string) ([]string, error) {
	lister, err := kv.ListKeysFiltered(ctx, filter)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s of %s: %w", filter, kv.Bucket(), err)
	}
	var keys []string
	for k := range lister.Keys() { // closed once every key is listed, or when ctx ends
		keys = append(keys, k)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %s of %s: %w", filter, kv.Bucket(), err)
	}
	slices.Sort(keys)
	return slices.Compact(keys), nil // a key written during the listing can be listed twice
}

// CreateOnce writes value under key of kv unless the key was ever written: the very same value is
// no error (the write was made before), another value is an error naming the key, and a key
// whose last entry deletes it stays deleted (what deleted it was decided after the write this one
// repeats: an import run again must not bring a revoked row back).
func CreateOnce(ctx context.Context, kv jetstream.KeyValue, key string, value []byte) error {
	history, err := kv.History(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		_, err = kv.Create(ctx, key, value)
		if err == nil || !Conflict(err) {
			return err
		}
		history, err = kv.History(ctx, key) // written meanwhile
	}
	if err != nil {
		return fmt.Errorf("%s of %s: %w", key, kv.Bucket(), err)
	}
	last := history[len(history)-1]
	switch {
	case last.Operation() != jetstream.KeyValuePut:
		return nil
	case !bytes.Equal(last.Value(), value):
		return fmt.Errorf("%s of %s holds another value", key, kv.Bucket())
	}
	return nil
}
