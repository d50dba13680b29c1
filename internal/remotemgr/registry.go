package remotemgr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/wire"
)

// Registration is the host's record of a prepared remote manager: who registered it and the keys
// it holds, so that revoking its holder's supervise scope can have the broker refuse every one of
// them, including the two identities that have no ledger row.
type Registration struct {
	V            int        `json:"v"`
	Owner        string     `json:"owner"`
	Actor        string     `json:"actor"`
	InstanceID   string     `json:"instanceId"`
	LifecycleUID string     `json:"lifecycleUid"`
	Identities   Identities `json:"identities"`
	PreparedAt   int64      `json:"preparedAt"`
	// Agents are the managed agents the host enrolled for the instance and has not retired:
	// evicting the manager retires them too.
	Agents []Target `json:"agents,omitempty"`
	// Retired are the last agents retired from Agents (at most 64), so a retirement's retry is
	// answered as done.
	Retired []Target `json:"retired,omitempty"`
	// Keys are the other keys the host signed for the instance (sessions' serving halves):
	// evicting the manager has the broker refuse them too.
	Keys []string `json:"keys,omitempty"`
	// KeyExpiry is when the last credential signed for each of Keys expires (Unix seconds): a
	// key is forgotten once its credential has expired, as nothing can connect with it any more,
	// so the list holds only the keys alive at once. A key without an entry is kept.
	KeyExpiry map[string]int64 `json:"keyExpiry,omitempty"`
}

// ParseRegistration reads raw as the registration of instance: a registration of this protocol
// version that names the instance.
func ParseRegistration(instance string, raw []byte) (*Registration, error) {
	var r Registration
	if err := json.Unmarshal(raw, &r); err != nil || r.V != protocolVersion || r.InstanceID != instance {
		return nil, fmt.Errorf("no registration of instance %s", instance)
	}
	return &r, nil
}

// registrationPrefix starts the key of every registration in the user-auth store.
const registrationPrefix = "manager."

// registrationKey returns "manager.<instance>", the key of instance's registration; an instance
// that is no lifecycle UID has none.
func registrationKey(instance string) (string, error) {
	if _, err := wire.ParseLifecycleUID(instance); err != nil {
		return "", err
	}
	return registrationPrefix + instance, nil
}

// Registry keeps one Registration per instance in the space's user-auth store
// (meshwire.UserAuthBucket), under manager.<instanceId>. Every authority node of a cluster writes
// it: each change is a compare-and-set on the key's revision, made again on a fresh read when
// another writer got there first.
type Registry struct {
	kv jetstream.KeyValue
}

// OpenRegistry returns the registry kept in kv. It returns an error for a nil kv.
func OpenRegistry(kv jetstream.KeyValue) (*Registry, error) {
	if kv == nil {
		return nil, errors.New("open the registry of remote managers: no user-auth store")
	}
	return &Registry{kv: kv}, nil
}

// Get returns the registration of instance, or nil when there is none. A value that does not
// hold a registration of that instance is an error naming its key.
func (g *Registry) Get(ctx context.Context, instance string) (*Registration, error) {
	r, _, err := g.get(ctx, instance)
	return r, err
}

// get returns the registration of instance and the revision it was read at; nil and 0 when
// there is none (a deleted key is none).
func (g *Registry) get(ctx context.Context, instance string) (*Registration, uint64, error) {
	key, err := registrationKey(instance)
	if err != nil {
		return nil, 0, err
	}
	e, err := g.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", key, err)
	}
	r, err := ParseRegistration(instance, e.Value())
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", key, err)
	}
	return r, e.Revision(), nil
}

// put writes r over revision rev of its key (0: the key holds no registration). A write another
// writer got to first is a conflict (jsapi.Conflict).
func (g *Registry) put(ctx context.Context, r Registration, rev uint64) error {
	key, err := registrationKey(r.InstanceID)
	if err != nil {
		return err
	}
	r.V = protocolVersion
	raw, _ := json.Marshal(r) // strings and numbers always encode
	if rev == 0 {
		_, err = g.kv.Create(ctx, key, raw)
	} else {
		_, err = g.kv.Update(ctx, key, raw, rev)
	}
	return err
}

// casAttempts bounds the compare-and-sets of one change that lose to another writer.
const casAttempts = 8

// cas runs one change: next reads the registration it is given (nil for none) and returns what
// to write, or an error that ends the change. It is read and tried again while another writer
// gets its write in first.
func (g *Registry) cas(ctx context.Context, instance string, next func(have *Registration) (Registration, error)) error {
	for attempt := 1; ; attempt++ {
		have, rev, err := g.get(ctx, instance)
		if err != nil {
			return err
		}
		r, err := next(have)
		if err != nil {
			return err
		}
		err = g.put(ctx, r, rev)
		if !jsapi.Conflict(err) {
			return err
		}
		if attempt == casAttempts {
			return fmt.Errorf("write the registration of %s: %d writers got there first: %w", instance, attempt, err)
		}
	}
}

// update applies fn to instance's registration and writes it back.
func (g *Registry) update(ctx context.Context, instance string, fn func(*Registration)) error {
	return g.cas(ctx, instance, func(have *Registration) (Registration, error) {
		if have == nil {
			return Registration{}, fmt.Errorf("instance %s has no registration", instance)
		}
		fn(have)
		return *have, nil
	})
}

// ErrForeignInstance is an instance another owner registered.
var ErrForeignInstance = errors.New("the instance belongs to another owner")

// Claim records r as its instance's registration, keeping the agents an earlier incarnation of the
// instance left to retire, and returns the registration it replaced (nil for the first). An
// instance another owner registered is ErrForeignInstance.
func (g *Registry) Claim(ctx context.Context, r Registration) (*Registration, error) {
	var replaced *Registration
	err := g.cas(ctx, r.InstanceID, func(have *Registration) (Registration, error) {
		replaced = have
		next := r
		if have != nil {
			if have.Owner != r.Owner {
				return Registration{}, fmt.Errorf("instance %s: %w (%s)", r.InstanceID, ErrForeignInstance, have.Owner)
			}
			next.Agents, next.Keys, next.KeyExpiry = have.Agents, have.Keys, have.KeyExpiry
		}
		return next, nil
	})
	if err != nil {
		return nil, err
	}
	return replaced, nil
}

// Import writes r, a registration read from an older registry (ParseRegistration), as it is. It
// writes only a key that holds no registration yet or holds this very one; another one under the
// key is an error naming it.
func (g *Registry) Import(ctx context.Context, r Registration) error {
	key, err := registrationKey(r.InstanceID)
	if err != nil {
		return err
	}
	if r.V != protocolVersion {
		return fmt.Errorf("import %s: version %d, want %d", key, r.V, protocolVersion)
	}
	raw, _ := json.Marshal(r) // strings and numbers always encode
	if err := jsapi.CreateOnce(ctx, g.kv, key, raw); err != nil {
		return fmt.Errorf("import the registration of %s: %w", r.InstanceID, err)
	}
	return nil
}

// AddAgent records a managed agent enrolled for instance.
func (g *Registry) AddAgent(ctx context.Context, instance string, t Target) error {
	return g.update(ctx, instance, func(r *Registration) { r.Agents = append(r.Agents, t) })
}

// AddKey records a key the host signs a credential for on instance's behalf, expiring at
// expires, and forgets the keys whose credentials have all expired.
func (g *Registry) AddKey(ctx context.Context, instance, key string, expires time.Time) error {
	return g.update(ctx, instance, func(r *Registration) {
		if !slices.Contains(r.Keys, key) {
			r.Keys = append(r.Keys, key)
		}
		if r.KeyExpiry == nil {
			r.KeyExpiry = map[string]int64{}
		}
		r.KeyExpiry[key] = max(r.KeyExpiry[key], expires.Unix())
		r.forgetExpiredKeys(time.Now())
	})
}

// keyExpiryGrace is how long after its credential expired a key is still kept: the broker's
// clock may run behind the host's.
const keyExpiryGrace = time.Minute

// forgetExpiredKeys drops the keys whose credentials expired before now (less the grace).
func (r *Registration) forgetExpiredKeys(now time.Time) {
	cutoff := now.Add(-keyExpiryGrace).Unix()
	r.Keys = slices.DeleteFunc(r.Keys, func(k string) bool {
		exp, ok := r.KeyExpiry[k]
		if ok && exp < cutoff {
			delete(r.KeyExpiry, k)
			return true
		}
		return false
	})
}

// RemoveAgent forgets a managed agent of instance once it is retired.
func (g *Registry) RemoveAgent(ctx context.Context, instance string, t Target) error {
	return g.update(ctx, instance, func(r *Registration) {
		n := len(r.Agents)
		r.Agents = slices.DeleteFunc(r.Agents, func(a Target) bool { return a == t })
		if len(r.Agents) < n && !slices.Contains(r.Retired, t) {
			r.Retired = append(r.Retired, t)
			r.Retired = r.Retired[max(0, len(r.Retired)-maxRetired):]
		}
	})
}

// maxRetired bounds the retired agents a registration remembers.
const maxRetired = 64

// Of returns the registrations of owner's actor (every actor when actor is empty), by instance.
// A registration that cannot be read is an error joined to the rest, which are returned all the
// same; a listing the store does not answer is an error alone.
func (g *Registry) Of(ctx context.Context, owner, actor string) ([]Registration, error) {
	keys, err := jsapi.ListKeys(ctx, g.kv, registrationPrefix+">")
	if err != nil {
		return nil, err
	}
	var out []Registration
	var errs []error
	for _, key := range keys { // sorted, so by instance
		r, err := g.Get(ctx, strings.TrimPrefix(key, registrationPrefix))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
			continue
		}
		if r != nil && r.Owner == owner && (actor == "" || r.Actor == actor) {
			out = append(out, *r)
		}
	}
	return out, errors.Join(errs...)
}

// EvictOwner ends every remote manager owner's actor registered (every actor's when actor is
// empty): the serving credentials of each instance are revoked, the broker refuses the keys of
// all five identities and closes their connections, the agents each spawned are retired (their
// managed rows in people deleted), and the instance is marked exited in the service registry. It
// returns the instances it evicted.
func EvictOwner(ctx context.Context, l *ledger.Ledger, reg *Registry, people *userauth.People, owner, actor, reason string) ([]wire.LifecycleUID, error) {
	regs, err := reg.Of(ctx, owner, actor)
	var done []wire.LifecycleUID
	for _, r := range regs {
		if eerr := l.RemoteManagers().Evict(ctx, wire.LifecycleUID(r.InstanceID), reason, append(r.Identities.keys(), r.Keys...)...); eerr != nil {
			err = errors.Join(err, fmt.Errorf("evict remote manager %s: %w", r.InstanceID, eerr))
			continue
		}
		for _, a := range r.Agents {
			if rerr := retireAgent(ctx, l, reg, people, r.InstanceID, a); rerr != nil {
				err = errors.Join(err, fmt.Errorf("remote manager %s: %w", r.InstanceID, rerr))
			}
		}
		// Its own deregistration needs the credentials just refused: without this, a scatter
		// would expect it, and find it silent, for ever.
		if derr := l.RemoteManagers().Deregister(ctx, wire.LifecycleUID(r.InstanceID)); derr != nil {
			err = errors.Join(err, fmt.Errorf("deregister remote manager %s: %w", r.InstanceID, derr))
		}
		done = append(done, wire.LifecycleUID(r.InstanceID))
	}
	return done, err
}

// managerGateKey returns the auth-store key of manager instance's serve gate,
// "epgate.manager.<instanceId>", the one key a remote manager's identities may write.
func managerGateKey(instance wire.LifecycleUID) string {
	return meshwire.EndpointGateKey(wire.ManagerEndpoint.Token(), instance)
}

// registrationGate returns the gate row a remote manager's executor registers its instance with:
// open at epoch 0, naming serve, the principal the host will issue the serve credential to.
func registrationGate(serve wire.Principal, opID string) []byte {
	raw, _ := json.Marshal(authstore.EndpointGateRow{ // strings and numbers always encode
		State: authstore.GateOpen, Generation: 1, Principal: serve.String(),
		Op: &authstore.EndpointGateOp{OpID: opID, Kind: authstore.OpActivation},
	})
	return raw
}
