package space

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/wire"
)

// Report says what Provision did to each stream of the space.
type Report struct {
	// Created lists the streams that did not exist.
	Created []string
	// Reconciled lists the TTL buckets whose max_age was brought to the contract's TTL.
	Reconciled []string
	// DefaultsWritten reports whether the space's channel defaults were written.
	DefaultsWritten bool
}

// Changed reports whether Provision changed anything.
func (r *Report) Changed() bool {
	return len(r.Created) > 0 || len(r.Reconciled) > 0 || r.DefaultsWritten
}

// Provision creates every stream and bucket of space that is missing, checks the existing ones
// against the contract, reconciles the TTL buckets' max_age, and writes the channel defaults if
// the space has no delivery class yet (SPEC §7: the default class is always on the wire). The
// connection needs the provisioner profile's grants, or more.
//
// A resource that drifted is never recreated: Provision goes on with the rest and returns a
// *DriftError naming every drifted field, along with the report.
func Provision(ctx context.Context, js jetstream.JetStream, space wire.Space, defaults wire.ChannelDefaults, opts ...Option) (*Report, error) {
	if _, err := wire.ParseSpace(string(space)); err != nil {
		return nil, err
	}
	o := options{replicas: 1}
	for _, opt := range opts {
		opt(&o)
	}
	if err := defaults.Validate(); err != nil {
		return nil, fmt.Errorf("channel defaults: %w", err)
	}
	rep := &Report{}
	var drifts []Drift
	for _, r := range resources(space) {
		r.cfg.Replicas = o.replicas
		// A loaded cluster can take longer than one request's wait to create a replicated
		// stream: ensureStream looks again before it creates, so it is asked again.
		var created, reconciled bool
		var d []Drift
		err := jsapi.RetryUnanswered(ctx, func(ctx context.Context) (err error) {
			created, reconciled, d, err = ensureStream(ctx, js, r)
			return err
		})
		if err != nil {
			return rep, err
		}
		if created {
			rep.Created = append(rep.Created, r.cfg.Name)
		}
		if reconciled {
			rep.Reconciled = append(rep.Reconciled, r.cfg.Name)
		}
		drifts = append(drifts, d...)
	}
	if len(drifts) > 0 {
		return rep, &DriftError{Space: space, Drifts: drifts}
	}
	written, err := ensureDefaults(ctx, js, space, defaults)
	if err != nil {
		return rep, err
	}
	rep.DefaultsWritten = written
	return rep, nil
}

// Option tunes Provision.
type Option func(*options)

type options struct{ replicas int }

// WithReplicas creates every stream and bucket with n replicas (1 by default): 3 on a cluster of
// at least three JetStream nodes. Every other setting is the contract's, whatever n is; an
// existing stream with another count is reported as drift, not changed.
func WithReplicas(n int) Option { return func(o *options) { o.replicas = n } }

// ensureStream creates r's stream if it is missing, and otherwise compares it with the contract.
func ensureStream(ctx context.Context, js jetstream.JetStream, r resource) (created, reconciled bool, drift []Drift, err error) {
	st, err := js.Stream(ctx, r.cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, r.cfg)
		if err == nil {
			return true, false, nil, nil
		}
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return false, false, nil, fmt.Errorf("create stream %s: %w", r.cfg.Name, err)
		}
		// Another provisioner created it between our info and create: compare theirs.
		st, err = js.Stream(ctx, r.cfg.Name)
	}
	if err != nil {
		return false, false, nil, fmt.Errorf("inspect stream %s: %w", r.cfg.Name, err)
	}
	got := st.CachedInfo().Config
	if r.ttl && got.MaxAge != r.cfg.MaxAge {
		got.MaxAge = r.cfg.MaxAge
		got.Duplicates = min(got.Duplicates, r.cfg.MaxAge)
		upd, err := js.UpdateStream(ctx, got)
		if err != nil {
			return false, false, nil, fmt.Errorf("reconcile the TTL of %s: %w", r.cfg.Name, err)
		}
		got = upd.CachedInfo().Config
		reconciled = true
	}
	return false, reconciled, compare(r, got), nil
}

// contractFields are the stream settings the contract fixes. Server-owned metadata is not among
// them.
var contractFields = []struct {
	name string
	get  func(c *jetstream.StreamConfig) any
}{
	{"subjects", func(c *jetstream.StreamConfig) any { return c.Subjects }},
	{"retention", func(c *jetstream.StreamConfig) any { return c.Retention }},
	{"storage", func(c *jetstream.StreamConfig) any { return c.Storage }},
	{"max_consumers", func(c *jetstream.StreamConfig) any { return c.MaxConsumers }},
	{"max_msgs", func(c *jetstream.StreamConfig) any { return c.MaxMsgs }},
	{"max_bytes", func(c *jetstream.StreamConfig) any { return c.MaxBytes }},
	{"max_age", func(c *jetstream.StreamConfig) any { return c.MaxAge }},
	{"max_msgs_per_subject", func(c *jetstream.StreamConfig) any { return c.MaxMsgsPerSubject }},
	{"max_msg_size", func(c *jetstream.StreamConfig) any { return c.MaxMsgSize }},
	{"discard", func(c *jetstream.StreamConfig) any { return c.Discard }},
	{"num_replicas", func(c *jetstream.StreamConfig) any { return c.Replicas }},
	{"no_ack", func(c *jetstream.StreamConfig) any { return c.NoAck }},
	{"duplicate_window", func(c *jetstream.StreamConfig) any { return c.Duplicates }},
	{"compression", func(c *jetstream.StreamConfig) any { return c.Compression }},
	{"allow_direct", func(c *jetstream.StreamConfig) any { return c.AllowDirect }},
	{"mirror_direct", func(c *jetstream.StreamConfig) any { return c.MirrorDirect }},
	{"discard_new_per_subject", func(c *jetstream.StreamConfig) any { return c.DiscardNewPerSubject }},
	{"allow_rollup_hdrs", func(c *jetstream.StreamConfig) any { return c.AllowRollup }},
	{"deny_delete", func(c *jetstream.StreamConfig) any { return c.DenyDelete }},
	{"deny_purge", func(c *jetstream.StreamConfig) any { return c.DenyPurge }},
	{"sealed", func(c *jetstream.StreamConfig) any { return c.Sealed }},
	{"allow_msg_ttl", func(c *jetstream.StreamConfig) any { return c.AllowMsgTTL }},
	{"allow_msg_schedules", func(c *jetstream.StreamConfig) any { return c.AllowMsgSchedules }},
	{"subject_delete_marker_ttl", func(c *jetstream.StreamConfig) any { return c.SubjectDeleteMarkerTTL }},
	{"mirror", func(c *jetstream.StreamConfig) any { return c.Mirror != nil }},
	{"sources", func(c *jetstream.StreamConfig) any { return len(c.Sources) }},
}

// tolerated reports a difference that is an older mesh rather than drift: the reference made TTL
// buckets file-backed before it moved presence to memory, and storage cannot change after
// creation.
func tolerated(r resource, field string, got *jetstream.StreamConfig) bool {
	return field == "storage" && r.ttl && r.cfg.Storage == jetstream.MemoryStorage && got.Storage == jetstream.FileStorage
}

func compare(r resource, got jetstream.StreamConfig) []Drift {
	var out []Drift
	for _, f := range contractFields {
		want, have := f.get(&r.cfg), f.get(&got)
		if !reflect.DeepEqual(want, have) && !tolerated(r, f.name, &got) {
			out = append(out, Drift{Resource: r.cfg.Name, Field: f.name, Want: render(want), Got: render(have)})
		}
	}
	return out
}

func render(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// ensureDefaults writes the channel defaults when the space has none, and adds the delivery class
// to existing defaults that lack one. An existing class is never changed.
func ensureDefaults(ctx context.Context, js jetstream.JetStream, space wire.Space, defaults wire.ChannelDefaults) (bool, error) {
	bucket := string(space.ChannelsBucket())
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return false, fmt.Errorf("open bucket %s: %w", bucket, err)
	}
	value, err := json.Marshal(defaults)
	if err != nil {
		return false, fmt.Errorf("encode channel defaults: %w", err)
	}
	if _, err := kv.Create(ctx, wire.ChannelDefaultsKey, value); err == nil {
		return true, nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return false, fmt.Errorf("write %s in %s: %w", wire.ChannelDefaultsKey, bucket, err)
	}
	entry, err := kv.Get(ctx, wire.ChannelDefaultsKey)
	if err != nil {
		return false, fmt.Errorf("read %s in %s: %w", wire.ChannelDefaultsKey, bucket, err)
	}
	existing, err := wire.DecodeChannelDefaults(entry.Value())
	if err != nil {
		return false, fmt.Errorf("%s in %s is not valid (left untouched): %w", wire.ChannelDefaultsKey, bucket, err)
	}
	if existing.DeliveryClass != "" {
		return false, nil
	}
	existing.DeliveryClass = defaults.DeliveryClass
	merged, err := json.Marshal(existing)
	if err != nil {
		return false, fmt.Errorf("encode channel defaults: %w", err)
	}
	if _, err := kv.Update(ctx, wire.ChannelDefaultsKey, merged, entry.Revision()); err != nil {
		return false, fmt.Errorf("add the delivery class to %s in %s: %w", wire.ChannelDefaultsKey, bucket, err)
	}
	return true, nil
}
