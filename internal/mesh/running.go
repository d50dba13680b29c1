package mesh

import (
	"errors"
	"fmt"

	"github.com/gocotal/cotal/wire"
)

// ErrNoMesh is returned by Running when no mesh is running for the directory.
var ErrNoMesh = errors.New("no mesh is running here (`cotal up` starts one; --dir or COTAL_DIR point elsewhere)")

// Running finds the mesh directory (as FindDir) and its running mesh: on an authority node of a
// cluster that is down, the cluster as its other nodes serve it (ThroughPeers); for a mesh the
// registry reaches by its server and a credential file, that server, with State.Creds set and
// no directory.
func Running(explicit string) (Dir, *State, error) {
	d, err := FindDir(explicit, ".")
	if remote, ok := errors.AsType[*RemoteMeshError](err); ok {
		e := remote.Entry
		return Dir{}, &State{URL: e.Server, Spaces: []wire.Space{wire.Space(e.Space)}, Creds: e.Creds, Registered: remote.Name}, nil
	}
	if err != nil {
		return Dir{}, nil, err
	}
	st, err := d.ReadState()
	if errors.Is(err, ErrNotRunning) {
		// An authority node of a cluster that is down: the cluster, through the other nodes.
		st, err = d.ThroughPeers()
	}
	if errors.Is(err, ErrNotRunning) {
		return d, nil, ErrNoMesh
	}
	return d, st, err
}

// SpaceOf returns the space a command addresses: the one named, which the mesh must serve, or
// the mesh's first.
func (st *State) SpaceOf(name string) (wire.Space, error) {
	if name == "" {
		return st.Spaces[0], nil
	}
	sp, err := wire.ParseSpace(name)
	if err != nil {
		return "", err
	}
	for _, s := range st.Spaces {
		if s == sp {
			return sp, nil
		}
	}
	return "", fmt.Errorf("the mesh does not serve space %q (it serves %q)", sp, st.Spaces)
}
