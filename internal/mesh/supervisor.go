package mesh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/wire"
)

// launchDir holds the launch material of the agents spawned into space sp.
func (d Dir) launchDir(sp wire.Space) string { return filepath.Join(d.Path, "launch", string(sp)) }

// managerDir holds the instance ids of the mesh's managers.
func (d Dir) managerDir() string { return filepath.Join(d.Path, "managers") }

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
		return &manager.Launch{Principal: cred.Principal, UID: cred.LifecycleUID, Creds: cred.Creds, Retire: retire}, nil
	}
}

// ErrSupervisorRunning is returned when a supervisor of the same name already serves the space
// from this mesh directory.
var ErrSupervisorRunning = errors.New("a supervisor of that name already runs")

// managerInstance is a manager's instance id, kept in the mesh directory so a restarted
// supervisor serves the same instance at the next epoch (fencing the one before it), and locked
// while it serves so a second process of the same name fails fast rather than fence a live one.
type managerInstance struct {
	id   wire.LifecycleUID
	lock *os.File
}

// claimManagerInstance locks and returns the instance id of the manager name serving space sp,
// creating it on first use. A lock another process holds is ErrSupervisorRunning; a file that
// holds no valid id is an error naming it, never overwritten.
func (d Dir) claimManagerInstance(sp wire.Space, name string) (*managerInstance, error) {
	if err := atomicfile.MkdirPrivate(d.managerDir()); err != nil {
		return nil, err
	}
	base := filepath.Join(d.managerDir(), string(sp)+"."+name)
	lock, err := os.OpenFile(base+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("supervisor %s of space %s: %w (stop it first, or give this one another --name)", name, sp, ErrSupervisorRunning)
		}
		return nil, fmt.Errorf("lock %s.lock: %w", base, err)
	}
	id, err := endpoint.LoadOrCreateInstance(base + ".instance")
	if err != nil {
		lock.Close()
		return nil, err
	}
	return &managerInstance{id: id, lock: lock}, nil
}

// release unlocks the instance for the next supervisor of its name.
func (m *managerInstance) release() { m.lock.Close() }

// SupervisorOptions name a supervisor and bound what it serves.
type SupervisorOptions struct {
	// Name is the manager's actor: ManagerActor for the mesh's own.
	Name string
	// MaxSessions is its ceiling of attach sessions; manager.DefaultMaxSessions when zero.
	MaxSessions int
}

// startSupervisor runs a supervisor for l's space: it serves the manager endpoint on a
// credential issued through the instance's serve gate (so the epoch fences any incarnation
// before it), establishes attach sessions through l, holds the manager lease and answers the
// manager liveness plane.
func (ds *Daemons) startSupervisor(ctx context.Context, d Dir, l *ledger.Ledger, so SupervisorOptions, log *slog.Logger) error {
	name := so.Name
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
	inst, err := d.claimManagerInstance(l.Space(), name)
	if err != nil {
		return err
	}
	h, epoch, err := l.HoldManager(ctx, name, inst.id, manager.Commands(), ds.life, log)
	if err != nil {
		inst.release()
		return fmt.Errorf("issue the manager's serving credential: %w", err)
	}
	fail := func(err error) error {
		ds.release(h)
		inst.release()
		return err
	}
	lease, err := manager.HoldLease(ctx, h.Conn, l.Space(), h.Credential().Principal, inst.id, log)
	if err != nil {
		return fail(err)
	}
	svc, err := sup.Serve(ctx, manager.ServiceConfig{
		Conn: h.Conn, Space: l.Space(), Instance: inst.id, Epoch: epoch, Owner: wire.DevOwner, Log: log,
		Sessions: l, MaxSessions: so.MaxSessions,
		CallerGrant: func(ctx context.Context, caller wire.Lifecycle) (*cotal.Grant, error) {
			token, err := l.ActiveCredential(ctx, caller.UID, authority.ProfileAgent)
			if err != nil {
				return nil, err
			}
			return cotal.ParseJWT(token)
		},
		HostLaunch: func(ctx context.Context, caller wire.Lifecycle) bool {
			ok, err := l.Instrument(ctx, caller)
			if err != nil && log != nil {
				log.Warn("decide host launch authority", "caller", caller, "err", err)
			}
			return ok
		},
	})
	if err != nil {
		return fail(fmt.Errorf("serve the manager endpoint: %w", err))
	}
	ds.mu.Lock()
	lctx, stopLease := context.WithCancel(ctx)
	ds.supervisors = append(ds.supervisors, &servedSupervisor{sup: sup, svc: svc, held: h, instance: inst, stopLease: stopLease})
	ds.mu.Unlock()
	ds.wg.Go(func() { lease.Renew(lctx) })
	return nil
}

// servedSupervisor is a supervisor the daemons run, with what it serves on.
type servedSupervisor struct {
	sup       *manager.Supervisor
	svc       *manager.Service
	held      *ledger.Held
	instance  *managerInstance
	stopLease context.CancelFunc
}

// The deadlines of a supervisor's stop: the service's (its sessions' ledger closes), then the
// agents' own, so a slow service never leaves the agents running.
const (
	serviceStopWait = 15 * time.Second
	agentsStopWait  = 30 * time.Second
)

// stop ends the service (its sessions first), then the agents, and lets the credential and the
// instance go.
func (s *servedSupervisor) stop(ds *Daemons) {
	sctx, cancel := context.WithTimeout(context.Background(), serviceStopWait)
	if err := s.svc.Stop(sctx); err != nil && ds.log != nil {
		ds.log.Warn("stop serving the manager endpoint", "err", err)
	}
	cancel()
	actx, cancel := context.WithTimeout(context.Background(), agentsStopWait)
	defer cancel()
	_ = s.sup.Close(actx) // each agent's own failure is logged by the supervisor
	s.stopLease()
	ds.release(s.held)
	s.instance.release()
}

// Supervise runs a supervisor for l's space until ctx ends, then stops and retires the agents it
// spawned: `cotal supervise`, beside a mesh started without one or with one of another name. Its
// credential lives life (authority.DaemonLifetime when zero) and is renewed before two thirds of
// it.
func Supervise(ctx context.Context, d Dir, l *ledger.Ledger, so SupervisorOptions, life time.Duration, log *slog.Logger) error {
	ds := newDaemons(life, log)
	if err := ds.startSupervisor(ds.ctx, d, l, so, log); err != nil {
		ds.Stop()
		return err
	}
	<-ctx.Done()
	ds.Stop()
	return nil
}
