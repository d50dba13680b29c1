package mesh

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/broker"
	"github.com/gocotal/cotal/wire"
)

// A mesh on a NATS cluster: every node runs the embedded broker joined to the others by routes,
// serving the same operator, system account and space accounts, with JetStream clustered and
// nats-server's distributed account resolver. An authority node holds the keys (a directory made
// by `cotal up`): it provisions the spaces, issues credentials and runs the daemons. Any other
// node starts from a bundle an authority node writes (`cotal cluster bundle`): the public trust
// (operator, system and space account JWTs) and the route secret, never a signing key. A second
// authority node, which takes the daemons over when the first one's node dies, starts from a
// bundle with the keys (`cotal cluster bundle --authority`), and is an authority node from then on:
// the delivery daemon's lease and the supervisor's standby make one of them active at a time.

// ClusterOptions join Up's broker to a cluster.
type ClusterOptions struct {
	// Name is the cluster's name, the same on every node.
	Name string
	// Port is the route port.
	Port int
	// Routes are the seed routes, nats://HOST:PORT each.
	Routes []string
	// ServerName names this node; DefaultServerName when empty. It must differ on every node and
	// stay the same across the node's restarts (JetStream knows its peers by it).
	ServerName string
	// Bundle, when set, starts a node from an authority node's bundle: without keys, the broker
	// only, with no provisioning, issuance or daemons; with them (Bundle.Keys), a second authority
	// node whose directory takes in the keys and the route secret.
	Bundle *Bundle
}

// DefaultServerName names a node by its host name and client port, which differ between the nodes
// of a cluster and survive a restart.
func DefaultServerName(port int) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "node"
	}
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, host)
	return host + "-" + strconv.Itoa(port)
}

// BundleVersion is the version of the bundle format this build reads, with the one before: it
// writes a user-auth mesh's bundle at it and any other at the one before. Version 2 added each
// space's store account, version 3 a user-auth mesh's auth accounts and, in an authority bundle,
// its user-auth secrets.
const BundleVersion = 3

// Bundle is what a node needs to join a cluster: the cluster's name and route secret, and the
// public trust its broker serves. Its route secret admits a broker to the cluster: keep it as
// private as a credential. Keys, in the bundle of a second authority node only, are the signing
// keys of every space: whoever holds them can mint any identity.
type Bundle struct {
	Version       int          `json:"version"`
	Cluster       string       `json:"cluster"`
	RouteUser     string       `json:"routeUser"`
	RoutePassword string       `json:"routePassword"`
	OperatorJWT   string       `json:"operatorJwt"`
	SystemAccount string       `json:"systemAccountJwt"`
	Spaces        []wire.Space `json:"spaces"`
	Accounts      []string     `json:"accountJwts"`
	// StoreAccounts are the spaces' store accounts, in the order of Spaces: they hold the
	// spaces' streams and buckets.
	StoreAccounts []string `json:"storeAccountJwts"`
	// AuthAccounts are a user-auth mesh's auth accounts, in the order of Spaces: every node
	// hands a connect on the sentinel to the callout, which an authority node answers.
	AuthAccounts []string `json:"authAccountJwts,omitempty"`
	// Keys are the keyring's seeds, and Managers the instance of each space's manager, in an
	// authority bundle only: the second authority node's supervisor serves the same instance.
	Keys     *authority.Seeds                 `json:"keys,omitempty"`
	Managers map[wire.Space]wire.LifecycleUID `json:"managers,omitempty"`
	// UserAuth are a user-auth mesh's secrets by space, in an authority bundle only: every
	// authority node derives the same owners and issues bearers every other one verifies.
	UserAuth map[wire.Space]*authservice.Secrets `json:"userAuth,omitempty"`
}

// userAuth reports whether the bundle is of a mesh in user-auth mode.
func (b *Bundle) userAuth() bool { return len(b.AuthAccounts) > 0 }

// authorityNode reports whether the bundle starts a second authority node.
func (b *Bundle) authorityNode() bool { return b.Keys != nil }

// trust is the bundle's trust, as the broker serves it.
func (b *Bundle) trust() broker.Trust {
	accounts := append(slices.Clone(b.Accounts), b.StoreAccounts...)
	return broker.Trust{OperatorJWT: b.OperatorJWT, SystemAccount: b.SystemAccount, Accounts: append(accounts, b.AuthAccounts...)}
}

// ReadBundle reads and checks a bundle file: its version, a route secret, one account and one
// store account per space, and accounts the operator signed (the rendering of the broker's
// config checks the signatures).
func ReadBundle(path string) (*Bundle, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster bundle: %w", err)
	}
	var b Bundle
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("cluster bundle %s: %w", path, err)
	}
	switch {
	case b.Version != BundleVersion && b.Version != BundleVersion-1:
		return nil, fmt.Errorf("cluster bundle %s: version %d, this cotal reads versions %d and %d", path, b.Version, BundleVersion-1, BundleVersion)
	case b.Cluster == "" || b.RouteUser == "" || b.RoutePassword == "":
		return nil, fmt.Errorf("cluster bundle %s: the cluster name and route secret are required", path)
	case len(b.Spaces) == 0 || len(b.Spaces) != len(b.Accounts) || len(b.Spaces) != len(b.StoreAccounts):
		return nil, fmt.Errorf("cluster bundle %s: one account JWT and one store account JWT per space are required", path)
	case b.Version < BundleVersion && (b.userAuth() || len(b.UserAuth) > 0):
		return nil, fmt.Errorf("cluster bundle %s: version %d carries no user-auth mesh", path, b.Version)
	case b.userAuth() && len(b.AuthAccounts) != len(b.Spaces):
		return nil, fmt.Errorf("cluster bundle %s: a user-auth mesh's bundle holds one auth account JWT per space", path)
	case b.Keys != nil && b.userAuth() && len(b.UserAuth) != len(b.Spaces):
		return nil, fmt.Errorf("cluster bundle %s: an authority bundle of a user-auth mesh holds the user-auth secrets of every space", path)
	case b.Keys == nil && len(b.UserAuth) > 0:
		return nil, fmt.Errorf("cluster bundle %s: user-auth secrets without keys: an authority bundle holds both", path)
	}
	for _, s := range b.Spaces {
		if _, err := wire.ParseSpace(string(s)); err != nil {
			return nil, fmt.Errorf("cluster bundle %s: %w", path, err)
		}
	}
	if _, err := broker.RenderAuth(broker.Config{StoreDir: "/check"}, b.trust()); err != nil {
		return nil, fmt.Errorf("cluster bundle %s: %w", path, err)
	}
	if b.Keys != nil {
		if err := b.checkKeys(); err != nil {
			return nil, fmt.Errorf("cluster bundle %s: %w", path, err)
		}
	}
	return &b, nil
}

// checkKeys checks an authority bundle's keys are the ones its trust names: the operator that
// signed it, its system account and each space's account.
func (b *Bundle) checkKeys() error {
	op, sys, accounts, err := b.Keys.PublicKeys()
	if err != nil {
		return err
	}
	oc, err := jwt.DecodeOperatorClaims(b.OperatorJWT)
	if err != nil {
		return err
	}
	if oc.Subject != op || oc.SystemAccount != sys {
		return errors.New("its keys are not the operator and system account its trust names")
	}
	for i, sp := range b.Spaces {
		if _, ok := b.Managers[sp]; !ok {
			return fmt.Errorf("its manager instance of space %s is missing", sp)
		}
		callout, err := b.Keys.CalloutAccount(sp)
		if err != nil {
			return err
		}
		switch {
		case !b.userAuth() && (callout != "" || len(b.UserAuth) > 0):
			return fmt.Errorf("it carries user-auth keys of space %s, but no auth account: it is of a mesh not in user-auth mode", sp)
		case b.userAuth() && (callout == "" || b.UserAuth[sp] == nil):
			return fmt.Errorf("its callout keys or user-auth secrets of space %s are missing", sp)
		case b.userAuth():
			auth, err := jwt.DecodeAccountClaims(b.AuthAccounts[i])
			if err != nil {
				return err
			}
			if auth.Subject != callout {
				return fmt.Errorf("its callout keys of space %s are not the auth account its trust names", sp)
			}
		}
		ac, err := jwt.DecodeAccountClaims(b.Accounts[i])
		if err != nil {
			return err
		}
		if accounts[sp] != ac.Subject {
			return fmt.Errorf("its keys of space %s are not the account its trust names", sp)
		}
	}
	return nil
}

// ErrKeyless refuses what needs the keys in the directory of a node started from a bundle: making
// new keys there would start a second, foreign authority.
var ErrKeyless = errors.New("this mesh directory is a cluster node started from a bundle and holds no keys: run this on an authority node")

// keylessPath marks a directory whose node starts from a bundle.
func (d Dir) keylessPath() string { return filepath.Join(d.Path, "keyless") }

// keyless reports whether d is a node without keys.
func (d Dir) keyless() bool {
	_, err := os.Stat(d.keylessPath())
	return err == nil
}

// markKeyless marks d as a node without keys, for good: refused if d holds keys already.
func (d Dir) markKeyless() error {
	if _, err := os.Stat(d.AuthDir()); err == nil {
		return fmt.Errorf("%s holds keys: an authority node starts with --cluster-name, not from a bundle", d.Path)
	}
	if err := atomicfile.MkdirPrivate(d.Path); err != nil {
		return err
	}
	return atomicfile.Write(d.keylessPath(), []byte("started from a cluster bundle: this directory holds no keys\n"), 0o600)
}

// clusterOf reports whether d is a node of a cluster, and the cluster's name when d knows it: a
// node's JetStream store holds the cluster's state, so it must not start alone.
func (d Dir) clusterOf() (string, bool) {
	if d.keyless() {
		return "", true
	}
	raw, err := os.ReadFile(d.clusterSecretPath())
	if err != nil {
		return "", false
	}
	var s clusterSecret
	_ = json.Unmarshal(raw, &s) // a secret it cannot read still marks a cluster node
	return s.Cluster, true
}

// clusterSecret is an authority node's route secret, made once per mesh directory.
type clusterSecret struct {
	Cluster  string `json:"cluster"`
	User     string `json:"user"`
	Password string `json:"password"`
}

// clusterSecretPath is where d keeps its cluster's route secret.
func (d Dir) clusterSecretPath() string { return filepath.Join(d.AuthDir(), "cluster.json") }

// loadOrCreateClusterSecret returns d's route secret for cluster name, making it on first use.
// A directory belongs to one cluster: another name is refused.
func (d Dir) loadOrCreateClusterSecret(name string) (*clusterSecret, error) {
	if d.keyless() {
		return nil, ErrKeyless
	}
	raw, err := os.ReadFile(d.clusterSecretPath())
	if err == nil {
		var s clusterSecret
		if err := json.Unmarshal(raw, &s); err != nil || s.User == "" || s.Password == "" {
			return nil, fmt.Errorf("%s: not a route secret cotal wrote", d.clusterSecretPath())
		}
		if name != "" && s.Cluster != name {
			return nil, fmt.Errorf("this mesh directory belongs to cluster %q, not %q", s.Cluster, name)
		}
		return &s, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if name == "" {
		return nil, errors.New("this mesh directory is in no cluster: start it with --cluster-name first")
	}
	s := &clusterSecret{Cluster: name, User: "route", Password: rand.Text()}
	if err := atomicfile.MkdirPrivate(d.AuthDir()); err != nil {
		return nil, err
	}
	raw, _ = json.MarshalIndent(s, "", "  ") // strings always encode
	if err := atomicfile.Write(d.clusterSecretPath(), raw, 0o600); err != nil {
		return nil, err
	}
	return s, nil
}

// WriteBundle writes the bundle of d's cluster serving spaces (DefaultSpace when empty): its route
// secret (made now if d has none, for cluster name) and the public trust from d's keys, and with
// keys set d's keys too, for a second authority node. The file is private to this user.
func (d Dir) WriteBundle(path, cluster string, spaces []wire.Space, keys bool) error {
	if len(spaces) == 0 {
		spaces = []wire.Space{DefaultSpace}
	}
	secret, err := d.loadOrCreateClusterSecret(cluster)
	if err != nil {
		return err
	}
	kr, err := d.OpenKeyring()
	if err != nil {
		return err
	}
	t, err := trust(kr, nil, false)
	if err != nil {
		return err
	}
	b := Bundle{Version: BundleVersion - 1, Cluster: secret.Cluster, RouteUser: secret.User, RoutePassword: secret.Password,
		OperatorJWT: t.OperatorJWT, SystemAccount: t.SystemAccount, Spaces: spaces}
	for _, sp := range spaces {
		sk, err := kr.Space(sp)
		if err != nil {
			return err
		}
		acct, store, err := kr.SpaceAccountJWTs(sk)
		if err != nil {
			return err
		}
		b.Accounts, b.StoreAccounts = append(b.Accounts, acct), append(b.StoreAccounts, store)
		if !kr.HasCallout(sp) {
			continue
		}
		// The space has served in user-auth mode: every node trusts its auth account.
		ck, err := kr.Callout(sp)
		if err != nil {
			return err
		}
		auth, err := kr.AuthAccountJWT(ck, sk)
		if err != nil {
			return err
		}
		b.AuthAccounts = append(b.AuthAccounts, auth)
	}
	if len(b.AuthAccounts) != 0 && len(b.AuthAccounts) != len(spaces) {
		return errors.New("some of the spaces served in user-auth mode and some did not: write a bundle per mode")
	}
	if b.userAuth() {
		b.Version = BundleVersion // a bundle without user-auth stays readable by the builds before
	}
	if keys {
		if b.Keys, err = kr.Export(spaces); err != nil {
			return err
		}
		b.Managers = map[wire.Space]wire.LifecycleUID{}
		for _, sp := range spaces {
			if b.Managers[sp], err = d.managerInstanceID(sp, ManagerActor); err != nil {
				return err
			}
			if !b.userAuth() {
				continue
			}
			if b.UserAuth == nil {
				b.UserAuth = map[wire.Space]*authservice.Secrets{}
			}
			if b.UserAuth[sp], err = authservice.ExportSecrets(d.UserAuthDir(sp), sp); err != nil {
				return err
			}
		}
	}
	raw, _ := json.MarshalIndent(b, "", "  ") // strings always encode
	return atomicfile.Write(path, append(raw, '\n'), 0o600)
}

// adoptAuthorityBundle makes d a second authority node of b's cluster: b's keys in d's keyring,
// b's route secret as d's. A directory that holds other keys, or the secret of another cluster,
// is refused; one that already took b in is left as it is.
func (d Dir) adoptAuthorityBundle(b *Bundle) error {
	if d.keyless() {
		return ErrKeyless
	}
	// The user-auth secrets are checked against what d holds before anything is written.
	for _, sp := range b.Spaces {
		if s := b.UserAuth[sp]; s != nil {
			if err := authservice.CheckSecrets(d.UserAuthDir(sp), sp, s); err != nil {
				return err
			}
		}
	}
	if err := authority.ImportSeeds(d.AuthDir(), b.Keys); err != nil {
		return err
	}
	for _, sp := range b.Spaces {
		if err := d.adoptManagerInstance(sp, ManagerActor, b.Managers[sp]); err != nil {
			return err
		}
		if s := b.UserAuth[sp]; s != nil {
			if err := authservice.ImportSecrets(d.UserAuthDir(sp), sp, s); err != nil {
				return err
			}
		}
	}
	s := clusterSecret{Cluster: b.Cluster, User: b.RouteUser, Password: b.RoutePassword}
	if _, err := os.Stat(d.clusterSecretPath()); err == nil {
		have, err := d.loadOrCreateClusterSecret("")
		if err != nil {
			return err
		}
		if *have != s {
			return fmt.Errorf("this mesh directory already holds the route secret of cluster %q, not the bundle's", have.Cluster)
		}
		return nil
	}
	raw, _ := json.MarshalIndent(s, "", "  ") // strings always encode
	return atomicfile.Write(d.clusterSecretPath(), raw, 0o600)
}

// brokerCluster is the broker's cluster configuration for o on d: the route secret from the
// bundle on a node without keys, or from d.
func (d Dir) brokerCluster(o *ClusterOptions) (*broker.ClusterConfig, error) {
	cc := &broker.ClusterConfig{Name: o.Name, Port: o.Port, Routes: o.Routes}
	if b := o.Bundle; b != nil {
		if o.Name != "" && o.Name != b.Cluster {
			return nil, fmt.Errorf("--cluster-name %q: the bundle is of cluster %q", o.Name, b.Cluster)
		}
		cc.Name, cc.User, cc.Password = b.Cluster, b.RouteUser, b.RoutePassword
		return cc, nil
	}
	s, err := d.loadOrCreateClusterSecret(o.Name)
	if err != nil {
		return nil, err
	}
	cc.Name, cc.User, cc.Password = s.Cluster, s.User, s.Password
	return cc, nil
}

// QuorumWait bounds how long an authority node waits for the cluster's JetStream to elect a
// leader (a majority of its nodes up) before it provisions.
const QuorumWait = 2 * time.Minute

// clusterReplicas is how many copies a stream keeps on a cluster of at least as many nodes.
const clusterReplicas = 3

// awaitQuorum waits until the broker's JetStream meta group has a leader and, on a cluster meant
// for three nodes or more (seeds routes or known peers), until this node routes to two others,
// so that streams are made with three replicas; a smaller cluster keeps one.
func (m *Mesh) awaitQuorum(ctx context.Context, seeds int) error {
	ctx, cancel := context.WithTimeout(ctx, QuorumWait)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		st := m.server.Cluster()
		nodes := max(seeds, st.Size)
		if st.MetaLeader != "" && (nodes < clusterReplicas || st.Routes >= clusterReplicas-1) {
			if nodes >= clusterReplicas {
				m.replicas = clusterReplicas
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the cluster's JetStream is not ready within %s (leader %q, %d routes up of %d nodes): start a majority of its nodes, and for three replicas three of them",
				QuorumWait, st.MetaLeader, st.Routes, nodes)
		case <-tick.C:
		}
	}
}
