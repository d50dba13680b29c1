package mesh

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/wire"
)

// ErrNoMesh is returned by Running when no mesh is running for the directory.
var ErrNoMesh = errors.New("no mesh is running here (`cotal up` starts one; --dir or COTAL_DIR point elsewhere)")

// Running finds the mesh directory (as FindDir) and its running mesh.
func Running(explicit string) (Dir, *State, error) {
	d, err := FindDir(explicit, ".")
	if err != nil {
		return Dir{}, nil, err
	}
	st, err := d.ReadState()
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

// oneShotAgent is the lifetime of an agent credential the CLI issues for one command.
const oneShotAgent = time.Minute

// Client connects an SDK client to the running mesh as a freshly minted credential of profile
// for local.<name>: the CLI mints the short-lived credentials it needs itself. On an open mesh it
// connects without credentials.
func Client(ctx context.Context, d Dir, st *State, sp wire.Space, profile authority.Profile, name string, opts ...cotal.Option) (*cotal.Client, error) {
	if st.Open {
		return cotal.Connect(ctx, st.URL, append([]cotal.Option{cotal.WithSpace(string(sp))}, opts...)...)
	}
	a, err := OpenAuthority(d)
	if err != nil {
		return nil, err
	}
	req := MintRequest{Space: sp, Profile: profile, Name: name}
	if profile == authority.ProfileAgent {
		req.Expires = oneShotAgent // a one-shot agent (to probe liveness, say) lives a minute, as does its row
	}
	cred, err := a.Issue(ctx, st.URL, req)
	if err != nil {
		return nil, err
	}
	return cotal.Connect(ctx, st.URL, append([]cotal.Option{cotal.WithCredsData(cred.Creds)}, opts...)...)
}

// Retire tears down an agent lifecycle under a deprovisioner credential pinned to it by name: its
// dm_ and dlv_ durables and its ACL row (after which the delivery daemon drops what is still
// addressed to it). Missing pieces are not an error. The lifecycle's UID is never reused, so its
// credential binds nothing afterwards.
func (a *Authority) Retire(ctx context.Context, url string, sp wire.Space, l wire.Lifecycle) error {
	sk, err := a.keyring.Space(sp)
	if err != nil {
		return err
	}
	p, err := wire.NewPrincipal(wire.DevOwner, "cotal_deprovisioner")
	if err != nil {
		return err
	}
	cred, err := sk.Mint(authority.MintRequest{Profile: authority.ProfileDeprovisioner, Grant: authority.Grant{Principal: p, Target: l}})
	if err != nil {
		return err
	}
	nc, err := Connect(ctx, url, cred)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range []struct{ stream, name string }{{sp.DMStream(), wire.DMDurable(l)}, {sp.DLVStream(), wire.DLVDurable(l)}} {
		if err := js.DeleteConsumer(ctx, c.stream, c.name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			errs = append(errs, fmt.Errorf("delete %s: %w", c.name, err))
		}
	}
	kv, err := js.KeyValue(ctx, string(sp.ACLBucket()))
	if err == nil {
		err = kv.Purge(ctx, wire.ACLKey(l))
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("purge the ACL row of %s: %w", l, err))
	}
	return errors.Join(errs...)
}
