package endpoint

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/atomicfile"
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

// ServiceStatus is an instance's svc status record.
type ServiceStatus struct {
	State                string `json:"state"`
	Epoch                int64  `json:"epoch"`
	ObservedSpecRevision uint64 `json:"observedSpecRevision"`
}

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

// Registration is one instance's place in the registry, as its server holds it.
type Registration struct {
	kv       jetstream.KeyValue
	endpoint wire.EndpointName
	instance wire.LifecycleUID
	spec     uint64 // the spec key's revision
	status   uint64 // the status key's revision
}

// Register writes the instance's spec, then its status at epoch (state ready, observing the
// spec's revision), each by revision CAS against what the registry held: a lost race is an
// error wrapping jetstream.ErrKeyExists.
func Register(ctx context.Context, kv jetstream.KeyValue, instance wire.LifecycleUID, epoch int64, spec ServiceSpec) (*Registration, error) {
	endpoint, err := wire.ParseEndpointName(spec.Endpoint)
	if err != nil {
		return nil, err
	}
	if len(spec.ClusterDigests) == 0 || spec.Protocol.V != 1 {
		return nil, errors.New("a service spec names at least one cluster digest and protocol v1")
	}
	held, err := readSubtree(ctx, kv, wire.ServiceKey(endpoint, instance, ">"))
	if err != nil {
		return nil, err
	}
	r := &Registration{kv: kv, endpoint: endpoint, instance: instance}
	raw, _ := json.Marshal(spec) // strings and numbers always encode
	if r.spec, err = kv.Update(ctx, wire.ServiceKey(endpoint, instance, wire.ServiceSpecLeaf), raw, held[wire.ServiceSpecLeaf]); err != nil {
		return nil, fmt.Errorf("register %s %s: %w", endpoint, instance, err)
	}
	r.status = held[wire.ServiceStatusLeaf]
	if err := r.SetStatus(ctx, StateReady, epoch); err != nil {
		return nil, err
	}
	return r, nil
}

// SetStatus writes the instance's status at the revision it last wrote.
func (r *Registration) SetStatus(ctx context.Context, state string, epoch int64) error {
	raw, _ := json.Marshal(ServiceStatus{State: state, Epoch: epoch, ObservedSpecRevision: r.spec}) // always encodes
	rev, err := r.kv.Update(ctx, wire.ServiceKey(r.endpoint, r.instance, wire.ServiceStatusLeaf), raw, r.status)
	if err != nil {
		return fmt.Errorf("write the status of %s %s: %w", r.endpoint, r.instance, err)
	}
	r.status = rev
	return nil
}

// Deregister marks the instance exited and deletes its spec at the revision it wrote, so a
// scatter no longer expects it; the next registration of the instance advances its epoch.
func (r *Registration) Deregister(ctx context.Context, epoch int64) error {
	err := r.SetStatus(ctx, StateExited, epoch)
	return errors.Join(err, r.kv.Delete(ctx, wire.ServiceKey(r.endpoint, r.instance, wire.ServiceSpecLeaf), jetstream.LastRevision(r.spec)))
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
	rows, err := registry(ctx, kv, wire.ServiceKey(endpoint, instance, ">"))
	if err != nil {
		return err
	}
	i := slices.IndexFunc(rows, func(r Registered) bool { return r.ID == instance })
	if i < 0 || rows[i].Status == nil || rows[i].Status.State == StateExited {
		return nil
	}
	held, err := readSubtree(ctx, kv, wire.ServiceKey(endpoint, instance, ">"))
	if err != nil {
		return err
	}
	r := &Registration{kv: kv, endpoint: endpoint, instance: instance, spec: held[wire.ServiceSpecLeaf], status: held[wire.ServiceStatusLeaf]}
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
	filter := wire.ServiceRegistryKeys()
	if endpoint != "" {
		filter = wire.ServiceEndpointKeys(endpoint)
	}
	return registry(ctx, kv, filter)
}

// registry reads the records under filter: Registry's, or one instance's subtree.
func registry(ctx context.Context, kv jetstream.KeyValue, filter string) ([]Registered, error) {
	prefix := strings.TrimSuffix(wire.ServiceRegistryKeys(), ">")
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
		switch t[2] {
		case wire.ServiceSpecLeaf:
			var spec ServiceSpec
			if json.Unmarshal(e.Value(), &spec) == nil {
				r.Spec, r.SpecRevision = &spec, e.Revision()
			}
		case wire.ServiceStatusLeaf:
			var st ServiceStatus
			if json.Unmarshal(e.Value(), &st) == nil {
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
