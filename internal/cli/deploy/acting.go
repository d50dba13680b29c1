package deploy

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/internal/userauth/oidc"
	"github.com/gocotal/cotal/wire"
)

// acting is who a deploy acts as and what it reaches the mesh through: the operator's control
// instrument (asOperator), or a person logged in to a user-auth mesh, through the views of their
// own (asPerson). Close releases what it opened.
type acting struct {
	// ctl calls the manager as the deploy's caller: launches, on the class rail.
	ctl *factory.Control
	// registry reads the channel registry.
	registry jetstream.KeyValue
	// writer opens the channel registry for writing, once there is something to write.
	writer func(ctx context.Context) (jetstream.KeyValue, func(), error)
	// find returns the row of the agent of that name that runs, or a not-found error.
	find func(ctx context.Context, name string) (*manager.Row, error)
	// despawn stops the agent of that name.
	despawn func(ctx context.Context, name string) error
	// readers returns who besides skip may read each channel (readers); nil when the actor
	// cannot know it.
	readers func(ctx context.Context, channels []string, skip map[string]bool) (map[string][]string, error)
	// owner is the owner a person's run launches its agents as, stamped into the launch spec;
	// empty for the operator's, whose agents are the host's.
	owner   string
	closers []func()
}

// Close releases what the actor opened.
func (a *acting) Close() {
	for _, c := range a.closers {
		c()
	}
}

// asOperator acts as the operator's control instrument of the mesh f targets (watch, for a
// deploy that may outlast a one-shot credential).
func asOperator(ctx context.Context, f *factory.Factory, sp wire.Space, watch bool) (*acting, error) {
	a := &acting{}
	open := f.Control
	if watch {
		open = f.WatchControl
	}
	ctl, err := open(ctx)
	if err != nil {
		return nil, err
	}
	a.ctl = ctl
	a.closers = append(a.closers, ctl.Close)
	kv, closeKV, err := registry(ctx, f, sp, authority.ProfileChannelWriter)
	if err != nil {
		a.Close()
		return nil, err
	}
	a.registry = kv
	a.closers = append(a.closers, closeKV)
	a.writer = func(context.Context) (jetstream.KeyValue, func(), error) { return kv, func() {}, nil }
	a.find = func(ctx context.Context, name string) (*manager.Row, error) {
		row, _, err := ctl.Manager.Find(ctx, ctl.Records, name)
		return row, err
	}
	a.despawn = func(ctx context.Context, name string) error {
		_, err := ctl.Manager.Despawn(ctx, ctl.Records, name, true)
		return err
	}
	a.readers = func(ctx context.Context, channels []string, skip map[string]bool) (map[string][]string, error) {
		return readers(ctx, f, sp, channels, skip)
	}
	return a, nil
}

// person is the login of a person on the user-auth mesh of the mesh directory a deploy runs in.
type person struct {
	f       *factory.Factory
	meshURL string
	// face is the exchange's loopback face: the deployer and channel-writer views are issued
	// there only, to the mesh's own host.
	face     *authservice.Ready
	sessions string
}

// personOf returns the login of the person logged in to meshURL, for a deploy in mesh directory
// d of space sp: it must run on the mesh's host, where the exchange's loopback face is.
func personOf(f *factory.Factory, meshURL string, d mesh.Dir, sp wire.Space) (*person, error) {
	if err := factory.CheckMeshURL(meshURL); err != nil {
		return nil, err
	}
	face, err := authservice.ReadReady(d.UserAuthDir(sp))
	if err != nil {
		return nil, fmt.Errorf("a deploy as yourself (--mesh) runs on the mesh's host, in its directory, where the exchange issues the views it needs: %w", err)
	}
	path, err := oidc.DefaultSessionsPath()
	if err != nil {
		return nil, err
	}
	return &person{f: f, meshURL: meshURL, face: face, sessions: path}, nil
}

// view connects the person through view, checking it names space sp.
func (p *person) view(ctx context.Context, view userauth.View, sp wire.Space, needs string) (*authservice.ViewConn, error) {
	v, err := authservice.DialView(ctx, userauth.NewHTTPClient(), p.sessions, p.meshURL, factory.MeshActor, view, p.face)
	switch {
	case errors.Is(err, userauth.ErrDenied):
		return nil, &exit.AuthError{Err: fmt.Errorf("the %s view: %w (%s; `cotal actor list` on the mesh's host shows your scopes)", view, err, needs)}
	case err != nil:
		return nil, err
	case v.Space != sp:
		v.Conn.Close()
		return nil, fmt.Errorf("%s serves space %s, not %s", p.meshURL, v.Space, sp)
	}
	return v, nil
}

// asPerson acts as the person logged in to meshURL (`cotal login --mesh`), on the user-auth
// mesh of directory d: their deployer view reads what the deploy plans against and launches, a
// channel-writer view seeds new channels, and their manager-caller view stops what must be
// restarted. Their agents are theirs: the launch spec is stamped with their owner.
func asPerson(ctx context.Context, f *factory.Factory, meshURL string, d mesh.Dir, sp wire.Space) (*acting, error) {
	p, err := personOf(f, meshURL, d, sp)
	if err != nil {
		return nil, err
	}
	v, err := p.view(ctx, userauth.ViewDeployer, sp, "a deploy needs the spawn scope")
	if err != nil {
		return nil, err
	}
	a := &acting{owner: v.Me.Principal.Owner(), closers: []func(){v.Conn.Close}}
	a.ctl = &factory.Control{Conn: v.Conn, Space: sp, Me: v.Me, Manager: manager.NewClient(v.Conn, sp, v.Me, factory.MeshActor)}
	js, err := jetstream.New(v.Conn)
	if err != nil {
		a.Close()
		return nil, err
	}
	if a.registry, err = js.KeyValue(ctx, string(sp.ChannelsBucket())); err != nil {
		a.Close()
		return nil, fmt.Errorf("open the channel registry: %w", err)
	}
	roster, err := js.KeyValue(ctx, string(sp.PresenceBucket()))
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("open the roster: %w", err)
	}
	a.find = func(ctx context.Context, name string) (*manager.Row, error) {
		return presentAgent(ctx, roster, a.owner, name)
	}
	a.writer = func(ctx context.Context) (jetstream.KeyValue, func(), error) {
		w, err := p.view(ctx, userauth.ViewChannelWriter, sp, "creating a channel needs the admin scope")
		if err != nil {
			return nil, nil, err
		}
		wjs, err := jetstream.New(w.Conn)
		if err == nil {
			var kv jetstream.KeyValue
			if kv, err = wjs.KeyValue(ctx, string(sp.ChannelsBucket())); err == nil {
				return kv, w.Conn.Close, nil
			}
		}
		w.Conn.Close()
		return nil, nil, fmt.Errorf("open the channel registry: %w", err)
	}
	a.despawn = func(ctx context.Context, name string) error { return p.despawn(ctx, name) }
	return a, nil
}

// despawn stops the person's agent of that name through their manager-caller view of the one
// manager they may address.
func (p *person) despawn(ctx context.Context, name string) error {
	ctl, err := p.f.MeshControl(ctx, p.meshURL, "")
	if err != nil {
		return err
	}
	defer ctl.Close()
	_, err = ctl.Manager.Despawn(ctx, nil, name, true)
	return err
}

// presentAgent returns the row of owner's agent name as the roster shows it: its id and
// lifecycle, running while it is present; not found when the roster has no such agent present.
func presentAgent(ctx context.Context, roster jetstream.KeyValue, owner, name string) (*manager.Row, error) {
	p, err := wire.NewPrincipal(owner, name)
	if err != nil {
		return nil, err
	}
	notFound := wire.NewEndpointError(wire.CodeNotFound, wire.OutcomeNotExecuted, "%s is not present", p)
	e, err := roster.Get(ctx, wire.PresenceKey(p))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, notFound
	case err != nil:
		return nil, fmt.Errorf("read the roster: %w", err)
	}
	pr, err := wire.DecodePresence(e.Key(), e.Value())
	if err != nil || pr.Status == wire.StatusOffline {
		return nil, notFound
	}
	return &manager.Row{Name: name, ID: p.String(), Status: string(manager.StateRunning), LifecycleUID: string(pr.LifecycleUID)}, nil
}

// asPersonCaller acts as the person logged in to meshURL through their manager-caller view of the
// one manager they may address: what takes their deploy down. It reads nothing else of the mesh:
// the channels stay the operator's to remove.
func asPersonCaller(ctx context.Context, f *factory.Factory, meshURL string, sp wire.Space) (*acting, error) {
	if err := factory.CheckMeshURL(meshURL); err != nil {
		return nil, err
	}
	ctl, err := f.MeshControl(ctx, meshURL, "")
	if err != nil {
		return nil, err
	}
	if ctl.Space != sp {
		ctl.Close()
		return nil, fmt.Errorf("%s serves space %s, not %s", meshURL, ctl.Space, sp)
	}
	a := &acting{ctl: ctl, owner: ctl.Me.Principal.Owner(), closers: []func(){ctl.Close}}
	a.find = func(ctx context.Context, name string) (*manager.Row, error) {
		row, _, err := ctl.Manager.Find(ctx, nil, name)
		return row, err
	}
	a.despawn = func(ctx context.Context, name string) error {
		_, err := ctl.Manager.Despawn(ctx, nil, name, true)
		return err
	}
	return a, nil
}
