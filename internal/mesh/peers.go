package mesh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/wire"
)

// Peers are the client URLs of a cluster's nodes as an authority node last saw them, kept in its
// directory: while the node itself is down, the commands run there (`cotal send`, `agent`,
// `status`, `creds revoke`...) reach the cluster through the others.
type Peers struct {
	Cluster string       `json:"cluster"`
	URLs    []string     `json:"urls"`
	Spaces  []wire.Space `json:"spaces"`
	TLS     bool         `json:"tls,omitempty"`
}

// peersPath is where an authority node keeps its cluster's peers.
func (d Dir) peersPath() string { return filepath.Join(d.Path, "peers.json") }

// recordPeers writes the client URLs of every node of the cluster, as a connection to this node
// learns them from the cluster (its own first), to d's peers file.
func (m *Mesh) recordPeers(ctx context.Context) error {
	sys, err := m.keyring.MintSystemUser("cotal-peers", nil, nil, time.Minute)
	if err != nil {
		return err
	}
	nc, err := dial.As(ctx, m.state.URL, sys)
	if err != nil {
		return err
	}
	defer nc.Close()
	p := Peers{Cluster: m.state.Cluster, URLs: []string{m.state.URL}, Spaces: m.state.Spaces, TLS: m.state.TLS}
	for _, u := range nc.DiscoveredServers() {
		if m.state.TLS {
			u = "tls://" + strings.TrimPrefix(u, "nats://")
		}
		if !slices.Contains(p.URLs, u) {
			p.URLs = append(p.URLs, u)
		}
	}
	raw, _ := json.MarshalIndent(p, "", "  ") // strings and bools always encode
	return atomicfile.Write(m.dir.peersPath(), append(raw, '\n'), 0o600)
}

// readPeers reads d's peers file: ErrNotRunning when d is not an authority node of a cluster or
// has none.
func (d Dir) readPeers() (*Peers, error) {
	if _, ok := d.clusterOf(); !ok || d.keyless() {
		return nil, ErrNotRunning
	}
	raw, err := os.ReadFile(d.peersPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotRunning
	}
	if err != nil {
		return nil, err
	}
	var p Peers
	if err := json.Unmarshal(raw, &p); err != nil || len(p.URLs) == 0 || len(p.Spaces) == 0 {
		return nil, fmt.Errorf("%s: not a peers file cotal wrote (remove it; the node writes it again once up)", d.peersPath())
	}
	for _, u := range p.URLs {
		if _, err := url.Parse(u); err != nil {
			return nil, fmt.Errorf("%s: %w", d.peersPath(), err)
		}
	}
	return &p, nil
}

// ThroughPeers returns the state of d's cluster as reached through the other nodes while d's own
// node is down: the URLs of d's peers file, with NodeDown set. It is ErrNotRunning when d is not
// an authority node of a cluster, or has no peers recorded.
func (d Dir) ThroughPeers() (*State, error) {
	p, err := d.readPeers()
	if err != nil {
		return nil, err
	}
	return &State{URL: strings.Join(p.URLs, ","), Spaces: p.Spaces, Cluster: p.Cluster, TLS: p.TLS, NodeDown: true}, nil
}

// Servers returns what a client of st's mesh connects to: on an authority node of a cluster,
// every node's client URL (st's own first), comma-separated as the SDK takes them; otherwise
// st's URL.
func (d Dir) Servers(st *State) string {
	if st.Cluster == "" || st.NodeDown {
		return st.URL
	}
	p, err := d.readPeers()
	if err != nil {
		return st.URL
	}
	return strings.Join(p.URLs, ",")
}
