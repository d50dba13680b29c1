package remotemgr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/userauth"

	"github.com/gocotal/cotal/internal/atomicfile"
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
}

// Registry keeps one Registration per instance, as files in a private directory of the host's
// state.
type Registry struct {
	dir string
	mu  sync.Mutex // serialises this process's read-modify-writes of one registration
}

// OpenRegistry returns the registry in dir, created 0700 if absent.
func OpenRegistry(dir string) (*Registry, error) {
	if err := atomicfile.MkdirPrivate(dir); err != nil {
		return nil, err
	}
	return &Registry{dir: dir}, nil
}

func (g *Registry) path(instance string) string { return filepath.Join(g.dir, instance+".json") }

// Get returns the registration of instance, or nil when there is none. A file that does not hold
// a registration of that instance is an error naming it.
func (g *Registry) Get(instance string) (*Registration, error) {
	if _, err := wire.ParseLifecycleUID(instance); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(g.path(instance))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r Registration
	if err := json.Unmarshal(raw, &r); err != nil || r.V != protocolVersion || r.InstanceID != instance {
		return nil, fmt.Errorf("%s holds no registration of instance %s", g.path(instance), instance)
	}
	return &r, nil
}

// put writes r, replacing the instance's registration.
func (g *Registry) put(r Registration) error {
	r.V = protocolVersion
	raw, _ := json.MarshalIndent(r, "", "  ") // strings and numbers always encode
	return atomicfile.Write(g.path(r.InstanceID), append(raw, '\n'), 0o600)
}

// update applies fn to instance's registration and writes it back.
func (g *Registry) update(instance string, fn func(*Registration)) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, err := g.Get(instance)
	if err != nil {
		return err
	}
	if r == nil {
		return fmt.Errorf("instance %s has no registration", instance)
	}
	fn(r)
	return g.put(*r)
}

// ErrForeignInstance is an instance another owner registered.
var ErrForeignInstance = errors.New("the instance belongs to another owner")

// Claim records r as its instance's registration, keeping the agents an earlier incarnation of the
// instance left to retire, and returns the registration it replaced (nil for the first). An
// instance another owner registered is ErrForeignInstance.
func (g *Registry) Claim(r Registration) (*Registration, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	have, err := g.Get(r.InstanceID)
	if err != nil {
		return nil, err
	}
	if have != nil {
		if have.Owner != r.Owner {
			return nil, fmt.Errorf("instance %s: %w (%s)", r.InstanceID, ErrForeignInstance, have.Owner)
		}
		r.Agents, r.Keys = have.Agents, have.Keys
	}
	return have, g.put(r)
}

// AddAgent records a managed agent enrolled for instance.
func (g *Registry) AddAgent(instance string, t Target) error {
	return g.update(instance, func(r *Registration) { r.Agents = append(r.Agents, t) })
}

// AddKey records a key the host signed a credential for on instance's behalf.
func (g *Registry) AddKey(instance, key string) error {
	return g.update(instance, func(r *Registration) {
		if !slices.Contains(r.Keys, key) {
			r.Keys = append(r.Keys, key)
		}
	})
}

// RemoveAgent forgets a managed agent of instance once it is retired.
func (g *Registry) RemoveAgent(instance string, t Target) error {
	return g.update(instance, func(r *Registration) {
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
func (g *Registry) Of(owner, actor string) ([]Registration, error) {
	entries, err := os.ReadDir(g.dir)
	if err != nil {
		return nil, err
	}
	var out []Registration
	var errs []error
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() {
			continue
		}
		r, err := g.Get(id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if r != nil && r.Owner == owner && (actor == "" || r.Actor == actor) {
			out = append(out, *r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].InstanceID < out[j].InstanceID })
	return out, errors.Join(errs...)
}

// EvictOwner ends every remote manager owner's actor registered (every actor's when actor is
// empty): the serving credentials of each instance are revoked, the broker refuses the keys of
// all five identities and closes their connections, the agents each spawned are retired (their
// managed rows in people deleted), and the instance is marked exited in the service registry. It
// returns the instances it evicted.
func EvictOwner(ctx context.Context, l *ledger.Ledger, reg *Registry, people *userauth.People, owner, actor, reason string) ([]wire.LifecycleUID, error) {
	regs, err := reg.Of(owner, actor)
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
