package mesh

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/wire"
)

// SupervisorSocket returns the control socket of the mesh's supervisor.
func (d Dir) SupervisorSocket() string { return filepath.Join(d.Path, "manager.sock") }

// launchDir holds spawned agents' launch material.
func (d Dir) launchDir() string { return filepath.Join(d.Path, "launch") }

// AgentIssuer returns the issuer the supervisor spawns agents with: a fresh lifecycle in space sp,
// its ledger row and durables, retired when the agent is done.
func (a *Authority) AgentIssuer(url string, sp wire.Space) manager.Issuer {
	return func(ctx context.Context, spec manager.Spec) (*manager.Launch, error) {
		cred, retire, err := a.StartAgent(ctx, url, MintRequest{
			Space: sp, Profile: authority.ProfileAgent, Name: spec.Name, Role: spec.Role,
			Subscribe: spec.Subscribe, AllowSubscribe: spec.AllowSubscribe, AllowPublish: spec.AllowPublish,
		})
		if err != nil {
			return nil, err
		}
		return &manager.Launch{Principal: cred.Principal, Creds: cred.Creds, Retire: retire}, nil
	}
}

// startSupervisor runs the mesh's supervisor for space sp: it holds the manager lease and answers
// the manager liveness plane on a supervisor credential, and serves its control socket in d.
func (a *Authority) startSupervisor(ctx context.Context, ds *Daemons, d Dir, url string, sp wire.Space, log *slog.Logger) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	sup, err := manager.New(manager.Config{
		Issue: a.AgentIssuer(url, sp), Space: sp, URL: url, MaterialDir: d.launchDir(),
		MCPCommand: []string{exe, "mcp", "--dir", d.Path}, Log: log,
	})
	if err != nil {
		return err
	}
	// The socket first: a second supervisor fails here, before it writes a lease of its own.
	ln, err := manager.Listen(d.SupervisorSocket())
	if err != nil {
		return err
	}
	nc, cred, err := a.connect(ctx, ds, url, sp, authority.ProfileSupervisor, managerActor)
	if err != nil {
		ln.Close()
		return err
	}
	lease, err := manager.HoldLease(ctx, nc, sp, cred.Principal, log)
	if err != nil {
		ln.Close()
		return err
	}
	ds.supervisor = sup
	ds.wg.Add(2)
	go func() {
		defer ds.wg.Done()
		sup.Serve(ctx, ln)
	}()
	go func() {
		defer ds.wg.Done()
		lease.Renew(ctx)
	}()
	return nil
}

// Supervise runs a supervisor for space sp of the running mesh st until ctx ends, then stops
// and retires the agents it spawned: `cotal supervise`, beside a mesh started without one.
func Supervise(ctx context.Context, d Dir, st *State, sp wire.Space, log *slog.Logger) error {
	a, err := OpenAuthority(d)
	if err != nil {
		return err
	}
	dctx, cancel := context.WithCancel(context.Background())
	ds := &Daemons{ctx: dctx, cancel: cancel}
	if err := a.startSupervisor(dctx, ds, d, st.URL, sp, log); err != nil {
		ds.Stop()
		return err
	}
	<-ctx.Done()
	ds.Stop()
	return nil
}
