package endpoint

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// The service registry (SPEC §13.7): one svc record per serving instance in the space's records
// bucket, its spec and its status under keys of their own, each written by revision CAS.
//
//	svc.<endpoint>.<instanceId>.spec     {endpoint, owner, endpointType?, clusterDigests, protocol}
//	svc.<endpoint>.<instanceId>.status   {state, epoch, observedSpecRevision}
//
// The spec's store revision is the instance's registrationRevision, which a scatter freezes.
// Rows are read through a watch (an ordered consumer pinned to the endpoint's subtree), never by
// Direct Get, which the records bucket serves but no caller's grant holds.

// ServiceSpec is an instance's svc spec record.
type ServiceSpec struct {
	Endpoint       string   `json:"endpoint"`
	Owner          string   `json:"owner"`
	EndpointType   string   `json:"endpointType,omitempty"`
	ClusterDigests []string `json:"clusterDigests"`
	Protocol       Protocol `json:"protocol"`
}

// valid reports whether the spec is a whole record of endpoint: its name, an owner, at least one
// cluster digest and protocol v1.
func (s ServiceSpec) valid(endpoint wire.EndpointName) error {
	switch {
	case s.Endpoint != string(endpoint):
		return fmt.Errorf("a service spec of %s names endpoint %q", endpoint, s.Endpoint)
	case s.Owner == "" || len(s.ClusterDigests) == 0 || s.Protocol.V != 1:
		return errors.New("a service spec names an owner, at least one cluster digest and protocol v1")
	}
	return nil
}

// ServiceStatus is an instance's svc status record.
type ServiceStatus struct {
	State                string `json:"state"`
	Epoch                int64  `json:"epoch"`
	ObservedSpecRevision uint64 `json:"observedSpecRevision"`
}

// valid reports whether the status is a whole record: a state, observing a spec revision.
func (st ServiceStatus) valid() bool { return st.State != "" && st.ObservedSpecRevision > 0 }

// The status states a registry reader distinguishes.
const (
	StateReady  = "ready"
	StateExited = "exited"
)

// Instance is one slot of a frozen expected set: the instance, the revision of its registration
// and the epoch its status reports.
type Instance struct {
	ID                   wire.LifecycleUID
	RegistrationRevision uint64
	Epoch                int64
}

// Registration is one instance's place in the registry, as its server holds it. From Register
// to Deregister it keeps its two records: a write it did not make (a JetStream reply captured
// under one of its keys: NATS never checks a reply subject) is answered by writing both again.
type Registration struct {
	kv       jetstream.KeyValue
	endpoint wire.EndpointName
	instance wire.LifecycleUID
	log      *slog.Logger

	mu     sync.Mutex
	spec   ServiceSpec
	specAt uint64 // the spec key's revision, as last written
	state  string
	epoch  int64
	status uint64 // the status key's revision, as last written
	gone   bool   // deregistered: nothing is kept any more

	stop context.CancelFunc
	kept chan struct{} // closed when the keeper has stopped
}

// Register writes the instance's spec, then its status at epoch (state ready, observing the
// spec's revision), each by revision CAS against what the registry held: a lost race is an
// error wrapping jetstream.ErrKeyExists. The registration keeps its records until Deregister;
// log (nil to discard) hears of each one it had to write again.
func Register(ctx context.Context, kv jetstream.KeyValue, instance wire.LifecycleUID, epoch int64, spec ServiceSpec, log *slog.Logger) (*Registration, error) {
	endpoint, err := wire.ParseEndpointName(spec.Endpoint)
	if err != nil {
		return nil, err
	}
	if err := spec.valid(endpoint); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Registration{kv: kv, endpoint: endpoint, instance: instance, log: log, spec: spec, state: StateReady, epoch: epoch, kept: make(chan struct{})}
	// The keeper watches from before the first write, so no foreign row slips in between.
	// On a loaded cluster the watch's consumer and the writes can take longer than one request's
	// wait to be answered: both are asked again (the write reads what is held before it writes).
	kctx, stop := context.WithCancel(context.Background())
	var w jetstream.KeyWatcher
	err = jsapi.RetryUnanswered(ctx, func(context.Context) (err error) {
		w, err = kv.Watch(kctx, meshwire.ServiceKey(endpoint, instance, ">"), jetstream.UpdatesOnly())
		if errors.Is(err, nats.ErrJetStreamNotEnabled) {
			// The watch's consumer found no responders (the account's JetStream API re-imported
			// while new claims apply): nats.go names that JetStream not being enabled.
			return errors.Join(err, nats.ErrNoResponders)
		}
		return err
	})
	if err != nil {
		stop()
		return nil, fmt.Errorf("keep the registration of %s %s: %w", endpoint, instance, err)
	}
	if err := jsapi.RetryUnanswered(ctx, r.write); err != nil {
		stop()
		_ = w.Stop() // the registration failed: nothing to keep
		return nil, err
	}
	r.stop = stop
	go r.keep(kctx, w) // owned: ends with Deregister
	return r, nil
}

// write writes the spec, then the status observing it, each at the revision the registry holds
// now. The caller holds mu or owns r alone.
func (r *Registration) write(ctx context.Context) error {
	held, err := readSubtree(ctx, r.kv, meshwire.ServiceKey(r.endpoint, r.instance, ">"))
	if err != nil {
		return err
	}
	raw, _ := json.Marshal(r.spec) // strings and numbers always encode
	if r.specAt, err = r.kv.Update(ctx, meshwire.ServiceKey(r.endpoint, r.instance, meshwire.ServiceSpecLeaf), raw, held[meshwire.ServiceSpecLeaf]); err != nil {
		return fmt.Errorf("register %s %s: %w", r.endpoint, r.instance, err)
	}
	r.status = held[meshwire.ServiceStatusLeaf]
	return r.writeStatus(ctx)
}

// writeStatus writes the status at the revision last written. The caller holds mu or owns r alone.
func (r *Registration) writeStatus(ctx context.Context) error {
	raw, _ := json.Marshal(ServiceStatus{State: r.state, Epoch: r.epoch, ObservedSpecRevision: r.specAt}) // always encodes
	rev, err := r.kv.Update(ctx, meshwire.ServiceKey(r.endpoint, r.instance, meshwire.ServiceStatusLeaf), raw, r.status)
	if err != nil {
		return fmt.Errorf("write the status of %s %s: %w", r.endpoint, r.instance, err)
	}
	r.status = rev
	return nil
}

// keepWrite bounds one rewrite of the records.
const keepWrite = 10 * time.Second

// keep writes the records again whenever a revision it did not write lands on one of them, until
// ctx ends. A foreign row is one stored after the registration's own last write: the events of its
// own writes carry revisions at most that.
func (r *Registration) keep(ctx context.Context, w jetstream.KeyWatcher) {
	defer close(r.kept)
	defer func() { _ = w.Stop() }() // the keeper is done either way
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				continue
			}
			r.mu.Lock()
			r.answer(ctx, e)
			r.mu.Unlock()
		}
	}
}

// answer takes in one revision the watch delivered, r.mu held: nothing after Deregister or for its
// own writes; a record or deletion another writer of the instance made (its next incarnation,
// MarkExited) ends the keeping; anything else is a foreign row, and both records are written
// again.
func (r *Registration) answer(ctx context.Context, e jetstream.KeyValueEntry) {
	if r.gone || e.Revision() <= max(r.specAt, r.status) {
		return
	}
	attrs := []any{"endpoint", string(r.endpoint), "instance", string(r.instance), "key", e.Key(), "revision", e.Revision()}
	if r.superseded(e) {
		r.gone = true
		r.log.Info("registration taken over", attrs...)
		return
	}
	wctx, cancel := context.WithTimeout(ctx, keepWrite)
	defer cancel()
	if err := r.rewrite(wctx); err != nil {
		if ctx.Err() == nil {
			r.log.Error("write a displaced registration again", append(attrs, "err", err)...)
		}
		return
	}
	r.log.Warn("registration written again over a row it did not write", attrs...)
}

// keepAttempts bounds the writes of one rewrite: each loses only to a row stored meanwhile.
const keepAttempts = 5

// rewrite writes both records again until the registry holds exactly the revisions it wrote. A
// row stored between the spec's write and the status's has a revision under the last one written,
// so its own event would be taken for one of the registration's writes: the read after the writes
// is what finds it. The caller holds mu or owns r alone.
func (r *Registration) rewrite(ctx context.Context) error {
	var err error
	for range keepAttempts {
		if err = r.write(ctx); err == nil {
			held, rerr := readSubtree(ctx, r.kv, meshwire.ServiceKey(r.endpoint, r.instance, ">"))
			if rerr != nil {
				return rerr
			}
			if held[meshwire.ServiceSpecLeaf] == r.specAt && held[meshwire.ServiceStatusLeaf] == r.status {
				return nil
			}
			err = errors.New("a row was stored over the records while they were written")
		}
		if ctx.Err() != nil {
			return errors.Join(err, ctx.Err())
		}
	}
	return err
}

// writeOwnStatus is writeStatus that also writes over a row stored at the status key that no
// writer of the registry made (a captured reply, SPEC's inert capture): such a row displaces the
// revision the status was last written at. A whole status another writer made (the instance's
// next incarnation) is left as it is, and the write's conflict returned. The caller holds mu.
func (r *Registration) writeOwnStatus(ctx context.Context) error {
	err := r.writeStatus(ctx)
	if !jsapi.Conflict(err) {
		return err
	}
	var cur jetstream.KeyValueEntry
	key := meshwire.ServiceKey(r.endpoint, r.instance, meshwire.ServiceStatusLeaf)
	if rerr := watchAll(ctx, r.kv, key, func(e jetstream.KeyValueEntry) error { cur = e; return nil }); rerr != nil || cur == nil || r.superseded(cur) {
		return err
	}
	r.status = cur.Revision()
	return r.writeStatus(ctx)
}

// superseded reports whether e, a revision the registration did not write, is one a writer of the
// registry made: a deletion, or a whole record. A JetStream reply captured under the key is
// neither.
func (r *Registration) superseded(e jetstream.KeyValueEntry) bool {
	if e.Operation() != jetstream.KeyValuePut {
		return true
	}
	switch e.Key()[strings.LastIndexByte(e.Key(), '.')+1:] {
	case meshwire.ServiceSpecLeaf:
		var spec ServiceSpec
		return json.Unmarshal(e.Value(), &spec) == nil && spec.valid(r.endpoint) == nil
	case meshwire.ServiceStatusLeaf:
		var st ServiceStatus
		return json.Unmarshal(e.Value(), &st) == nil && st.valid()
	}
	return false
}

// SetStatus writes the instance's status at the revision it last wrote.
func (r *Registration) SetStatus(ctx context.Context, state string, epoch int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state, r.epoch = state, epoch
	return r.writeOwnStatus(ctx)
}

// Deregister marks the instance exited and deletes its spec at the revision it wrote, so a
// scatter no longer expects it; the next registration of the instance advances its epoch. The
// records are no longer kept.
func (r *Registration) Deregister(ctx context.Context, epoch int64) error {
	r.mu.Lock()
	r.gone = true
	r.state, r.epoch = StateExited, epoch
	err := r.writeOwnStatus(ctx)
	err = errors.Join(err, r.kv.Delete(ctx, meshwire.ServiceKey(r.endpoint, r.instance, meshwire.ServiceSpecLeaf), jetstream.LastRevision(r.specAt)))
	r.mu.Unlock()
	if r.stop != nil {
		r.stop()
		<-r.kept
	}
	return err
}

// LoadOrCreateInstance returns the instance id a server keeps in path across restarts (so each
// restart takes the same instance over, and its gate fences the incarnation before), creating it
// 0600 at the first start.
func LoadOrCreateInstance(path string) (wire.LifecycleUID, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		id := wire.NewLifecycleUID()
		return id, atomicfile.Write(path, []byte(string(id)+"\n"), 0o600)
	}
	if err != nil {
		return "", err
	}
	id, err := wire.ParseLifecycleUID(strings.TrimSpace(string(raw)))
	if err != nil {
		return "", fmt.Errorf("%s holds no instance id (%v): remove it to serve as a fresh instance", path, err)
	}
	return id, nil
}

// MarkExited deregisters an instance on behalf of a server that can no longer do it itself (one
// evicted, whose credentials the broker refuses): its status becomes exited at the epoch it
// reported and its spec is deleted, each by revision CAS. An instance already exited, or never
// registered, is left as it is.
func MarkExited(ctx context.Context, kv jetstream.KeyValue, endpoint wire.EndpointName, instance wire.LifecycleUID) error {
	// The instance's own subtree: a credential pinned to one instance reads no other.
	rows, err := registry(ctx, kv, meshwire.ServiceKey(endpoint, instance, ">"))
	if err != nil {
		return err
	}
	i := slices.IndexFunc(rows, func(r Registered) bool { return r.ID == instance })
	if i < 0 || rows[i].Status == nil || rows[i].Status.State == StateExited {
		return nil
	}
	held, err := readSubtree(ctx, kv, meshwire.ServiceKey(endpoint, instance, ">"))
	if err != nil {
		return err
	}
	r := &Registration{kv: kv, endpoint: endpoint, instance: instance, specAt: held[meshwire.ServiceSpecLeaf], status: held[meshwire.ServiceStatusLeaf]}
	if rows[i].Spec == nil { // the spec is gone already: only the status is left to mark
		return r.SetStatus(ctx, StateExited, rows[i].Status.Epoch)
	}
	return r.Deregister(ctx, rows[i].Status.Epoch)
}

// readSubtree returns the revision of each leaf under filter (the last token after the
// instance), deleted rows included: the revision a CAS write must name.
func readSubtree(ctx context.Context, kv jetstream.KeyValue, filter string) (map[string]uint64, error) {
	out := map[string]uint64{}
	err := watchAll(ctx, kv, filter, func(e jetstream.KeyValueEntry) error {
		out[e.Key()[strings.LastIndexByte(e.Key(), '.')+1:]] = e.Revision()
		return nil
	})
	return out, err
}

// watchAll feeds each current row under filter to fn, then stops.
func watchAll(ctx context.Context, kv jetstream.KeyValue, filter string, fn func(jetstream.KeyValueEntry) error) error {
	w, err := kv.Watch(ctx, filter)
	if err != nil {
		return fmt.Errorf("read %s: %w", filter, err)
	}
	defer func() { _ = w.Stop() }() // the watch is done either way
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("read %s: %w", filter, ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("read %s: the watch ended", filter)
			}
			if e == nil { // every current row has been delivered
				return nil
			}
			if err := fn(e); err != nil {
				return err
			}
		}
	}
}

// Registered is one serving instance as the service registry records it: its spec (nil once
// deregistered) at its revision, and its status (nil before the first).
type Registered struct {
	Endpoint     wire.EndpointName
	ID           wire.LifecycleUID
	Spec         *ServiceSpec
	SpecRevision uint64
	Status       *ServiceStatus
}

// Registry reads the records of every instance of endpoint, or of every endpoint when it is
// empty, sorted by endpoint and instance. A key that is not an instance's spec or status, or a
// record that does not decode, names nothing and is skipped.
func Registry(ctx context.Context, kv jetstream.KeyValue, endpoint wire.EndpointName) ([]Registered, error) {
	filter := meshwire.ServiceRegistryKeys()
	if endpoint != "" {
		filter = meshwire.ServiceEndpointKeys(endpoint)
	}
	return registry(ctx, kv, filter)
}

// registry reads the records under filter: Registry's, or one instance's subtree.
func registry(ctx context.Context, kv jetstream.KeyValue, filter string) ([]Registered, error) {
	prefix := strings.TrimSuffix(meshwire.ServiceRegistryKeys(), ">")
	found := map[string]*Registered{}
	err := watchAll(ctx, kv, filter, func(e jetstream.KeyValueEntry) error {
		t := strings.Split(strings.TrimPrefix(e.Key(), prefix), ".")
		if len(t) != 3 {
			return nil
		}
		name, err := wire.ParseEndpointToken(t[0])
		if err != nil {
			return nil
		}
		uid, err := wire.ParseLifecycleUID(t[1])
		if err != nil {
			return nil
		}
		r := found[t[0]+"."+t[1]]
		if r == nil {
			r = &Registered{Endpoint: name, ID: uid}
			found[t[0]+"."+t[1]] = r
		}
		if e.Operation() != jetstream.KeyValuePut {
			return nil
		}
		// A record is taken only whole: a JetStream reply captured under the key decodes into
		// the record's type too, with nothing set.
		switch t[2] {
		case meshwire.ServiceSpecLeaf:
			var spec ServiceSpec
			if json.Unmarshal(e.Value(), &spec) == nil && spec.valid(name) == nil {
				r.Spec, r.SpecRevision = &spec, e.Revision()
			}
		case meshwire.ServiceStatusLeaf:
			var st ServiceStatus
			if json.Unmarshal(e.Value(), &st) == nil && st.valid() {
				r.Status = &st
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []Registered
	for _, r := range found {
		if r.Spec != nil || r.Status != nil {
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b Registered) int {
		return cmp.Or(strings.Compare(string(a.Endpoint), string(b.Endpoint)), strings.Compare(string(a.ID), string(b.ID)))
	})
	return out, nil
}

// Instances freezes the expected set of endpoint: every instance whose spec is present and whose
// status is present, not exited, and observes the current spec revision. An empty registry is
// failed-precondition, an unreadable one too.
func Instances(ctx context.Context, kv jetstream.KeyValue, endpoint wire.EndpointName) ([]Instance, error) {
	rows, err := Registry(ctx, kv, endpoint)
	if err != nil {
		return nil, wire.NewEndpointError(wire.CodeFailedPrecondition, wire.OutcomeNotExecuted, "the %s registry is unreadable: %v", endpoint, err)
	}
	var out []Instance
	for _, r := range rows {
		if r.Spec == nil || r.Status == nil || r.Status.State == StateExited || r.Status.ObservedSpecRevision != r.SpecRevision {
			continue
		}
		out = append(out, Instance{ID: r.ID, RegistrationRevision: r.SpecRevision, Epoch: r.Status.Epoch})
	}
	if len(out) == 0 {
		return nil, wire.NewEndpointError(wire.CodeFailedPrecondition, wire.OutcomeNotExecuted, "no instance of %s is registered", endpoint)
	}
	return out, nil
}
