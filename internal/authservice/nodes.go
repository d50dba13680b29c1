package authservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/failover"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/remotemgr"
)

// On a cluster every authority node runs the space's auth service, and each one records itself in
// the space's user-auth store under node.<name>, again every NodeBeat: the broker URL its clients
// reach, its exchange's public face, and whether its callout is answering. The mesh document every
// face serves lists every node's face and broker, so a client that loses one node goes on through
// the others, and `cotal status` reports each node's auth service.

// NodeBeat is how often an auth service records itself; a record older than NodeStale is of a
// node whose auth service has stopped answering, and one older than NodeForgotten of a node taken
// out of the cluster: it is neither listed to clients nor reported.
const (
	NodeBeat      = 5 * time.Second
	NodeStale     = 3 * NodeBeat
	NodeForgotten = 24 * time.Hour
)

// nodeKeyPrefix prefixes the node records' keys.
const nodeKeyPrefix = "node."

// maxNodes bounds the records a document lists: a cluster has a handful of authority nodes.
const maxNodes = 32

// NodeRecord is one authority node's auth service as the others and the clients see it. The field
// names are a stable interface (`cotal status --json`).
type NodeRecord struct {
	// Node is the node's server name in the cluster.
	Node string `json:"node"`
	// Server is the broker URL clients of this node connect to.
	Server string `json:"server"`
	// ExchangeURL is its exchange's public face; ManagerAuthorityURL its remote-manager route.
	ExchangeURL         string `json:"exchangeUrl"`
	ManagerAuthorityURL string `json:"managerAuthorityUrl"`
	// Callout reports whether its callout was subscribed on a live connection at SeenAt.
	Callout bool      `json:"callout"`
	SeenAt  time.Time `json:"seenAt"`
}

// Fresh reports whether the record was written within NodeStale of now.
func (r NodeRecord) Fresh(now time.Time) bool { return now.Sub(r.SeenAt) < NodeStale }

func (r NodeRecord) validate() error {
	if r.Node == "" || strings.ContainsAny(r.Node, ".*> ") || r.ExchangeURL == "" || r.Server == "" {
		return errors.New("a node record names its node, broker and exchange")
	}
	return nil
}

// ReadNodes returns the node records in kv, the freshest first, without those forgotten. A record
// that is not one (written by something else than an auth service) is passed over: one broken
// key must not take every node's document down.
func ReadNodes(ctx context.Context, kv jetstream.KeyValue) ([]NodeRecord, error) {
	keys, err := jsapi.ListKeys(ctx, kv, nodeKeyPrefix+"*")
	if err != nil {
		return nil, err
	}
	var out []NodeRecord
	for _, key := range keys {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var r NodeRecord
		if json.Unmarshal(e.Value(), &r) != nil || r.validate() != nil || nodeKeyPrefix+r.Node != key {
			continue
		}
		if time.Since(r.SeenAt) < NodeForgotten {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b NodeRecord) int { return b.SeenAt.Compare(a.SeenAt) })
	return out[:min(len(out), maxNodes)], nil
}

// ErrNodeRunning is a node ForgetNode refuses: its auth service recorded itself within
// NodeStale.
var ErrNodeRunning = errors.New("the node's auth service is running")

// ForgetNode removes the record of node, an authority node taken out of the cluster for good, so
// the mesh document and `cotal status` stop listing it before NodeForgotten has passed. A node
// that recorded itself within NodeStale of now is running, and refused (ErrNodeRunning), as is
// one that records itself again while it is being forgotten. A name with no record is an error
// naming it; a key under the name that holds no node record of it is removed as well.
func ForgetNode(ctx context.Context, kv jetstream.KeyValue, node string, now time.Time) error {
	key := nodeKeyPrefix + node
	if node == "" || strings.ContainsAny(node, ".*> ") {
		return fmt.Errorf("%q is not a node's server name", node)
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("no auth service of node %s is recorded", node)
	}
	if err != nil {
		return fmt.Errorf("read the record of node %s: %w", node, err)
	}
	var r NodeRecord
	if err := json.Unmarshal(e.Value(), &r); err == nil && r.Node == node && r.Fresh(now) {
		return fmt.Errorf("%w: node %s recorded itself %s ago; stop it before forgetting it", ErrNodeRunning, node, now.Sub(r.SeenAt).Round(time.Second))
	}
	// By its revision: a node that recorded itself since it was read is running after all.
	err = kv.Purge(ctx, key, jetstream.LastRevision(e.Revision()))
	if errors.Is(err, jetstream.ErrKeyExists) || jsapi.Conflict(err) {
		return fmt.Errorf("%w: node %s recorded itself again while it was being forgotten", ErrNodeRunning, node)
	}
	if err != nil {
		return fmt.Errorf("forget node %s: %w", node, err)
	}
	return nil
}

// nodeBook keeps this node's record written and the cluster's records read, for the mesh
// document.
type nodeBook struct {
	kv   jetstream.KeyValue
	self NodeRecord
	// answering reports the callout's state at each beat.
	answering func() bool
	stop      context.CancelFunc
	done      chan struct{} // closed when run returns

	mu    sync.Mutex
	nodes []NodeRecord // guarded by mu: the last records read, this node's first
}

// beat writes this node's record and reads every node's.
func (b *nodeBook) beat(ctx context.Context) error {
	rec := b.self
	rec.Callout, rec.SeenAt = b.answering(), time.Now().UTC()
	raw, _ := json.Marshal(rec) // strings, a bool and a time always encode
	if _, err := b.kv.Put(ctx, nodeKeyPrefix+rec.Node, raw); err != nil {
		return fmt.Errorf("record this node's auth service: %w", err)
	}
	nodes, err := ReadNodes(ctx, b.kv)
	if err != nil {
		return err
	}
	nodes = slices.DeleteFunc(nodes, func(r NodeRecord) bool { return r.Node == rec.Node })
	b.mu.Lock()
	b.nodes = append([]NodeRecord{rec}, nodes...)
	b.mu.Unlock()
	return nil
}

// start beats every NodeBeat until close; a beat that fails is reported to warn and tried at the
// next.
func (b *nodeBook) start(ctx context.Context, warn func(error)) {
	ctx, b.stop = context.WithCancel(context.WithoutCancel(ctx))
	b.done = make(chan struct{})
	go func() {
		defer close(b.done)
		t := time.NewTicker(NodeBeat)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			bctx, cancel := context.WithTimeout(ctx, NodeBeat)
			if err := b.beat(bctx); err != nil && ctx.Err() == nil {
				warn(err)
			}
			cancel()
		}
	}()
}

// close stops the beats and removes this node's record: a node stopped on purpose is no longer
// offered to clients or reported. A node that dies leaves its record to go stale.
func (b *nodeBook) close(ctx context.Context) error {
	if b.stop == nil {
		return nil
	}
	b.stop()
	<-b.done
	return b.kv.Delete(ctx, nodeKeyPrefix+b.self.Node)
}

// document completes doc with every node's face and broker: this node's first, then the others,
// the freshest first. When this node's face is not on loopback, another node's loopback address
// is left out: on a client's machine it would name whatever listens there.
func (b *nodeBook) document(doc MeshDocument) MeshDocument {
	b.mu.Lock()
	nodes := slices.Clone(b.nodes)
	b.mu.Unlock()
	if len(nodes) == 0 {
		nodes = []NodeRecord{b.self}
	}
	remote := !isLoopbackURL(b.self.ExchangeURL)
	var exchanges, routes, servers []string
	for i, n := range nodes {
		if i > 0 && remote && (isLoopbackURL(n.ExchangeURL) || isLoopbackURL(n.Server)) {
			continue
		}
		exchanges, routes, servers = append(exchanges, n.ExchangeURL), append(routes, n.ManagerAuthorityURL), append(servers, n.Server)
	}
	doc.ExchangeURLs = failover.New(exchanges...).URLs()
	doc.ManagerAuthorityURLs = failover.New(routes...).URLs()
	doc.Servers = failover.New(servers...).URLs()
	return doc
}

// isLoopbackURL reports whether u names a loopback host.
func isLoopbackURL(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return false
	}
	ip := net.ParseIP(p.Hostname())
	return p.Hostname() == "localhost" || ip != nil && ip.IsLoopback()
}

// managerAuthorityURL is the remote-manager route of the exchange at exchangeURL.
func managerAuthorityURL(exchangeURL string) string { return exchangeURL + remotemgr.Path }
