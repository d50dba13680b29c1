package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/wire"
)

// benchLifetime bounds every credential the bench issues, so that a run against a mesh that
// outlives it leaves no credential that works for long.
const benchLifetime = time.Hour

// fleet holds what a case issued and connected, and undoes it at close: clients closed,
// connections closed, provisioned agents retired.
type fleet struct {
	env *Env
	log *slog.Logger
	tag string

	mu      sync.Mutex
	stop    []func()
	clients []*cotal.Client
	conns   []*nats.Conn
	retire  []func(context.Context) error
}

func (r *runner) fleet() *fleet { return &fleet{env: r.env, log: r.log, tag: r.tag} }

// name is the run's name for a principal the fleet issues.
func (f *fleet) name(format string, args ...any) string { return f.tag + fmt.Sprintf(format, args...) }

// agent issues an agent credential for local.<req.Name> with its durables and read ACL
// provisioned; close retires it.
func (f *fleet) agent(ctx context.Context, req ledger.Request) (*authority.Credential, error) {
	req.Space, req.Profile, req.Expires = f.env.Space, authority.ProfileAgent, benchLifetime
	cred, retire, err := f.env.Ledger.StartAgent(ctx, req)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.retire = append(f.retire, retire)
	f.mu.Unlock()
	return cred, nil
}

// issue issues a credential of a profile other than agent through the ledger.
func (f *fleet) issue(ctx context.Context, profile authority.Profile, name string) (*authority.Credential, error) {
	return f.env.Ledger.Issue(ctx, ledger.Request{Space: f.env.Space, Profile: profile, Name: name, Expires: benchLifetime})
}

// client connects cred through the SDK.
func (f *fleet) client(ctx context.Context, cred *authority.Credential, opts ...cotal.Option) (*cotal.Client, error) {
	c, err := cotal.Connect(ctx, f.env.URL, append([]cotal.Option{cotal.WithCredsData(cred.Creds)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", cred.Principal, err)
	}
	f.mu.Lock()
	f.clients = append(f.clients, c)
	f.mu.Unlock()
	return c, nil
}

// conn connects cred as a plain nats.go connection, with a JetStream context on it.
func (f *fleet) conn(ctx context.Context, cred *authority.Credential, opts ...nats.Option) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := dial.As(ctx, f.env.URL, cred, opts...)
	if err != nil {
		return nil, nil, err
	}
	f.mu.Lock()
	f.conns = append(f.conns, nc)
	f.mu.Unlock()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, nil, err
	}
	return nc, js, nil
}

// setClass configures channel's delivery class.
func (f *fleet) setClass(ctx context.Context, channel string, class wire.DeliveryClass) error {
	cred, err := f.issue(ctx, authority.ProfileChannelWriter, f.name("channels"))
	if err != nil {
		return err
	}
	nc, js, err := f.conn(ctx, cred)
	if err != nil {
		return err
	}
	defer nc.Close()
	body, _ := json.Marshal(wire.ChannelConfig{DeliveryClass: class}) // always encodes
	if _, err := js.Publish(ctx, f.env.Space.ChannelsBucket().Subject(channel), body); err != nil {
		return fmt.Errorf("configure channel %s: %w", channel, err)
	}
	return nil
}

// onClose runs fn first thing at close.
func (f *fleet) onClose(fn func()) {
	f.mu.Lock()
	f.stop = append(f.stop, fn)
	f.mu.Unlock()
}

// close closes every client and connection, then retires the provisioned agents.
func (f *fleet) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fn := range f.stop {
		fn()
	}
	var wg sync.WaitGroup
	for _, c := range f.clients {
		wg.Go(func() { _ = c.Close(ctx) }) // the case is over; a failed goodbye changes no figure
	}
	wg.Wait()
	for _, nc := range f.conns {
		nc.Close()
	}
	for _, r := range f.retire {
		if err := r(ctx); err != nil { // the agent's credential expires within benchLifetime anyway
			f.log.Warn("retire a bench agent", "err", err)
		}
	}
	f.stop, f.clients, f.conns, f.retire = nil, nil, nil, nil
}
