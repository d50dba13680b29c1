package mesh

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/wire"
)

// SupervisorSocket returns the control socket of the supervisor of space sp.
func (d Dir) SupervisorSocket(sp wire.Space) string {
	return filepath.Join(d.Path, "manager."+string(sp)+".sock")
}

// launchDir holds the launch material of the agents spawned into space sp.
func (d Dir) launchDir(sp wire.Space) string { return filepath.Join(d.Path, "launch", string(sp)) }

// AgentIssuer returns the issuer the supervisor spawns agents with: a fresh lifecycle in l's
// space, its ledger row and durables, retired when the agent is done.
func AgentIssuer(l *ledger.Ledger) manager.Issuer {
	return func(ctx context.Context, spec manager.Spec) (*manager.Launch, error) {
		cred, retire, err := l.StartAgent(ctx, ledger.Request{
			Name: spec.Name, Role: spec.Role,
			Subscribe: spec.Subscribe, AllowSubscribe: spec.AllowSubscribe, AllowPublish: spec.AllowPublish,
		})
		if err != nil {
			return nil, err
		}
		return &manager.Launch{Principal: cred.Principal, Creds: cred.Creds, Retire: retire}, nil
	}
}

// startSupervisor runs the mesh's supervisor for l's space: it holds the manager lease and
// answers the manager liveness plane on a supervisor credential, and serves its control socket
// in d.
func (ds *Daemons) startSupervisor(ctx context.Context, d Dir, l *ledger.Ledger, log *slog.Logger) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	sup, err := manager.New(manager.Config{
		Issue: AgentIssuer(l), Space: l.Space(), URL: l.URL(), MaterialDir: d.launchDir(l.Space()),
		MCPCommand: []string{exe, "mcp", "--dir", d.Path, "--space", string(l.Space())}, Log: log,
	})
	if err != nil {
		return err
	}
	// The socket first: a second supervisor fails here, before it writes a lease of its own.
	ln, err := manager.Listen(d.SupervisorSocket(l.Space()))
	if err != nil {
		return err
	}
	dc, err := ds.connect(ctx, l, authority.ProfileSupervisor, managerActor)
	if err != nil {
		ln.Close()
		return err
	}
	lease, err := manager.HoldLease(ctx, dc.Conn, l.Space(), dc.Credential().Principal, log)
	if err != nil {
		ln.Close()
		return err
	}
	ds.mu.Lock()
	ds.supervisors = append(ds.supervisors, sup)
	ds.mu.Unlock()
	ds.wg.Go(func() { sup.Serve(ctx, ln) })
	ds.wg.Go(func() { lease.Renew(ctx) })
	return nil
}

// Supervise runs a supervisor for l's space until ctx ends, then stops and retires the agents
// it spawned: `cotal supervise`, beside a mesh started without one. Its credential lives life
// (authority.DaemonLifetime when zero) and is renewed before two thirds of it.
func Supervise(ctx context.Context, d Dir, l *ledger.Ledger, life time.Duration, log *slog.Logger) error {
	ds := newDaemons(life, log)
	if err := ds.startSupervisor(ds.ctx, d, l, log); err != nil {
		ds.Stop()
		return err
	}
	<-ctx.Done()
	ds.Stop()
	return nil
}
