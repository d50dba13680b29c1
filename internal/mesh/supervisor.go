package mesh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/internal/hooksock"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/manifest"
	"github.com/gocotal/cotal/internal/persona"
	"github.com/gocotal/cotal/internal/runhost"
	"github.com/gocotal/cotal/wire"
)

// launchDir holds the launch material of the agents spawned into space sp.
func (d Dir) launchDir(sp wire.Space) string { return filepath.Join(d.Path, "launch", string(sp)) }

// WorkflowsDir keeps the programs of the workflow runs a space's manager hosts.
func (d Dir) WorkflowsDir(sp wire.Space) string {
	return filepath.Join(d.Path, "workflows", string(sp))
}

// AgentLogsDir keeps the output of the agents a space's manager runs, one <name>.log each.
func (d Dir) AgentLogsDir(sp wire.Space) string {
	return filepath.Join(d.Path, "logs", string(sp))
}

// managerDir holds the instance ids of the mesh's managers.
func (d Dir) managerDir() string { return filepath.Join(d.Path, "managers") }

// AgentIssuer returns the issuer the supervisor spawns agents with: a fresh lifecycle in l's
// space, its ledger row and durables, retired when the agent is done.
func AgentIssuer(l *ledger.Ledger) manager.Issuer {
	return func(ctx context.Context, spec manager.Spec) (*manager.Launch, error) {
		cred, retire, err := l.StartAgent(ctx, ledger.Request{
			Name: spec.Name, Role: spec.Role,
			Subscribe: spec.Subscribe, AllowSubscribe: spec.AllowSubscribe, AllowPublish: spec.AllowPublish,
			Capabilities: spec.Capabilities,
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

// managerInstancePath is where d keeps the instance id of the manager name serving space sp.
func (d Dir) managerInstancePath(sp wire.Space, name string) string {
	return filepath.Join(d.managerDir(), string(sp)+"."+name+".instance")
}

// managerInstanceID returns the instance id of the manager name serving space sp, creating it
// on first use.
func (d Dir) managerInstanceID(sp wire.Space, name string) (wire.LifecycleUID, error) {
	if err := atomicfile.MkdirPrivate(d.managerDir()); err != nil {
		return "", err
	}
	return endpoint.LoadOrCreateInstance(d.managerInstancePath(sp, name))
}

// adoptManagerInstance makes id the instance of the manager name serving space sp from d, as a
// second authority node of a cluster serves the first one's: refused if d serves another one.
func (d Dir) adoptManagerInstance(sp wire.Space, name string, id wire.LifecycleUID) error {
	if _, err := wire.ParseLifecycleUID(string(id)); err != nil {
		return fmt.Errorf("manager instance of space %s: %w", sp, err)
	}
	if err := atomicfile.MkdirPrivate(d.managerDir()); err != nil {
		return err
	}
	path := d.managerInstancePath(sp, name)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return atomicfile.Write(path, []byte(string(id)+"\n"), 0o600)
	}
	have, err := endpoint.LoadOrCreateInstance(path)
	if err != nil {
		return err
	}
	if have != id {
		return fmt.Errorf("this mesh directory serves manager instance %s of space %s, not the bundle's %s", have, sp, id)
	}
	return nil
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
	id, err := d.managerInstanceID(sp, name)
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
	// Ready, when set, is called with the manager's instance once it serves.
	Ready func(instance wire.LifecycleUID)
}

// awaitWake asks an agent's own `cotal mcp`, over its hook socket, for what should wake it while
// it is idle (manager.Config.AwaitWake).
func awaitWake(sp wire.Space) func(context.Context, wire.Principal) (string, error) {
	return func(ctx context.Context, p wire.Principal) (string, error) {
		path, err := hooksock.Socket(sp, p)
		if err != nil {
			return "", err
		}
		reply, err := hooksock.Ask(ctx, path, hooksock.Request{Event: manager.HookIdleWait})
		if err != nil {
			return "", err
		}
		return reply.Context, nil
	}
}

// tellSeat tells an agent's own `cotal mcp`, over its hook socket, of a hook event its manager
// has for it (manager.Config.TellSeat).
func tellSeat(sp wire.Space) func(context.Context, wire.Principal, string, []byte) error {
	return func(ctx context.Context, p wire.Principal, event string, payload []byte) error {
		path, err := hooksock.Socket(sp, p)
		if err != nil {
			return err
		}
		_, err = hooksock.Ask(ctx, path, hooksock.Request{Event: event, Payload: payload})
		return err
	}
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
		Issue: ds.issuer(l), Space: l.Space(), URL: l.URL(), MaterialDir: d.launchDir(l.Space()),
		MCPCommand: []string{exe, "mcp", "--dir", d.Path, "--space", string(l.Space())}, AwaitWake: awaitWake(l.Space()),
		TellSeat: tellSeat(l.Space()), LogDir: d.AgentLogsDir(l.Space()), Log: log,
	})
	if err != nil {
		return err
	}
	inst, err := d.claimManagerInstance(l.Space(), name)
	if err != nil {
		return err
	}
	h, epoch, err := l.HoldServing(ctx, wire.ManagerEndpoint, name, inst.id, manager.Commands(), ds.life, log)
	if err != nil {
		inst.release()
		return fmt.Errorf("issue the manager's serving credential: %w", err)
	}
	lease, err := manager.HoldLease(ctx, h.Conn, l.Space(), h.Credential().Principal, inst.id, log)
	if err != nil {
		ds.release(h)
		inst.release()
		return err
	}
	workflows, err := runhost.NewHost(runhost.Config{
		Space: l.Space(), Owner: wire.DevOwner, Issuer: l, Dir: d.WorkflowsDir(l.Space()), Log: log,
		Serve: &authority.ServeRows{Endpoint: wire.ManagerEndpoint, Instance: inst.id, Epoch: epoch},
		Dial: func(ctx context.Context, cred *authority.Credential) (*nats.Conn, error) {
			return dial.As(ctx, l.URL(), cred, nats.Name(cred.Principal.String()))
		},
	})
	if err != nil {
		lease.Close()
		ds.release(h)
		inst.release()
		return err
	}
	fail := func(err error) error {
		workflows.Close()
		lease.Close()
		ds.release(h)
		inst.release()
		return err
	}
	svc, err := sup.Serve(ctx, manager.ServiceConfig{
		Conn: h.Conn, Space: l.Space(), Instance: inst.id, Epoch: epoch, Owner: wire.DevOwner, Log: log, Workflows: workflows,
		Sessions: l, MaxSessions: so.MaxSessions, Personas: persona.Dir(d.Path),
		Runs: manifest.RunDir(d.Path), CredsDir: d.CredsDir(l.Space()), Workspace: filepath.Dir(d.Path),
		CallerGrant: ds.callerGrant(l),
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
	workflows.SetSeats(runSeats{svc})
	ds.mu.Lock()
	ds.supervisors = append(ds.supervisors, &servedSupervisor{space: l.Space(), sup: sup, svc: svc, held: h, instance: inst, lease: lease, workflows: workflows})
	ds.mu.Unlock()
	// The runs this manager hosted before it stopped are taken back from their journals.
	mp := ds.part(PartManager)
	mp.wg.Go(func() {
		if err := workflows.Recover(mp.ctx); err != nil && mp.ctx.Err() == nil && log != nil {
			log.Warn("take back the workflow runs", "err", err)
		}
	})
	if so.Ready != nil {
		so.Ready(inst.id)
	}
	return nil
}

// supervisorStandby is how often a standby supervisor looks at the lease of its instance.
const supervisorStandby = 2 * time.Second

// standBySupervisor runs the supervisor of l's space once this node's delivery daemon of the space
// serves and no other authority node of the cluster serves the manager's instance (the instance
// is shared: adoptManagerInstance). The delivery lease is a compare-and-set row only one daemon
// of the cluster holds, so two nodes started at once never both take the instance; while the
// instance's lease row lives (renewed within meshwire.ManagerLeaseTTL) another node's supervisor
// serves it and this one stands by, reading the row on a supervisor credential of its own (the
// profile that reads the manager bucket), which serves nothing. Once the row
// lapses (that node died or stopped) it serves the instance at the next epoch, which fences the
// one before.
func (ds *Daemons) standBySupervisor(d Dir, l *ledger.Ledger, so SupervisorOptions, log *slog.Logger) {
	mp := ds.part(PartManager)
	ctx := mp.ctx
	mp.wg.Go(func() {
		var watch *ledger.Held
		defer func() {
			if watch != nil {
				ds.drop(watch)
			}
		}()
		for {
			err := func() error {
				id, err := d.managerInstanceID(l.Space(), so.Name)
				if err != nil {
					return err
				}
				if watch == nil {
					if watch, err = ds.connect(ctx, l, authority.ProfileSupervisor, standbyActor); err != nil {
						return err
					}
				}
				if !ds.delivering(l.Space()) || manager.Served(ctx, watch.Conn, l.Space(), id) {
					return nil
				}
				if err := ds.startSupervisor(ctx, d, l, so, log); err != nil {
					return err
				}
				if log != nil {
					log.Info("serving the manager", "space", l.Space(), "instance", id)
				}
				return errServing
			}()
			if errors.Is(err, errServing) || ctx.Err() != nil {
				return
			}
			if err != nil && log != nil {
				log.Warn("standby supervisor", "space", l.Space(), "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(supervisorStandby):
			}
		}
	})
}

// errServing ends a standby that now serves.
var errServing = errors.New("serving")

// servedSupervisor is a supervisor the daemons run, with what it serves on.
type servedSupervisor struct {
	space    wire.Space
	sup      *manager.Supervisor
	svc      *manager.Service
	held     *ledger.Held
	instance *managerInstance
	lease    *manager.Lease
	// workflows hosts the space's workflow runs; stopped before the service, so every run stays
	// where its journal says for the next incarnation.
	workflows *runhost.Host
}

// stop ends the service (its sessions first), then the agents, and lets the credential and the
// instance go.
func (s *servedSupervisor) stop(ds *Daemons) {
	s.workflows.Close()
	sctx, cancel := context.WithTimeout(context.Background(), manager.ServiceStopWait)
	if err := s.svc.Stop(sctx); err != nil && ds.log != nil {
		ds.log.Warn("stop serving the manager endpoint", "err", err)
	}
	cancel()
	actx, cancel := context.WithTimeout(context.Background(), manager.AgentsStopWait)
	defer cancel()
	_ = s.sup.Close(actx) // each agent's own failure is logged by the supervisor
	s.lease.Close()
	ds.release(s.held)
	s.instance.release()
}

// Supervise runs a supervisor for l's space until ctx ends, then stops and retires the agents it
// spawned: `cotal supervise`, beside a mesh started without one or with one of another name. Its
// credential lives life (authority.DaemonLifetime when zero) and is renewed before two thirds of
// it.
func Supervise(ctx context.Context, d Dir, l *ledger.Ledger, so SupervisorOptions, life time.Duration, log *slog.Logger) error {
	ds := newDaemons(life, log)
	if err := ds.startSupervisor(ds.part(PartManager).ctx, d, l, so, log); err != nil {
		ds.Stop()
		return err
	}
	<-ctx.Done()
	ds.Stop()
	return nil
}

// runSeats are the manager's seats as its run host takes them: the agents a run spawns, and
// their turns.
type runSeats struct{ svc *manager.Service }

func (s runSeats) Spawn(ctx context.Context, sp runhost.SeatSpec) (wire.Principal, error) {
	st, err := s.svc.SpawnSeat(ctx, sp)
	if err != nil {
		return wire.Principal{}, err
	}
	return wire.ParsePrincipal(st.Principal)
}

func (s runSeats) Conclaves(name string, channels []string) error {
	err := s.svc.TellConclaves(name, channels)
	if errors.Is(err, manager.ErrSeatGone) {
		return fmt.Errorf("%w: %v", runhost.ErrSeatGone, err)
	}
	return err
}

func (s runSeats) EndTurn(name, goalID string) { s.svc.EndTurn(name, goalID) }

func (s runSeats) Turn(ctx context.Context, name, goalID, payload string, deadline time.Time) (runhost.SeatYield, error) {
	y, err := s.svc.Turn(ctx, name, goalID, payload, deadline)
	switch {
	case errors.Is(err, manager.ErrSeatGone):
		return runhost.SeatYield{}, fmt.Errorf("%w: %v", runhost.ErrSeatGone, err)
	case errors.Is(err, manager.ErrSeatDown):
		return runhost.SeatYield{}, fmt.Errorf("%w: %v", runhost.ErrSeatDown, err)
	case errors.Is(err, manager.ErrTurnDeadline):
		return runhost.SeatYield{}, fmt.Errorf("%w: %v", runhost.ErrTurnDeadline, err)
	case err != nil:
		return runhost.SeatYield{}, err
	}
	return runhost.SeatYield{Status: y.Status, To: y.To, Note: y.Note, At: y.At}, nil
}

// fitEpoch is the serve epoch the size check assumes: the epoch is spelled in the serving
// credential's reply and event rows, and a manager instance restarted this often is far off.
const fitEpoch = 999_999

// managerServeFits checks that the manager's serving credential fits the JWT size gate in space
// sp. Every row names the space and the credential names each served command's rails, so a long
// space name would stop `up` only once the mesh is provisioned; it is refused here, before
// anything is written, with the longest name that fits.
func managerServeFits(sp wire.Space) error {
	// The principal's tokens are constants, and any lifetime will do: exp is a fixed-width claim.
	p, _ := wire.NewPrincipal(wire.DevOwner, ManagerActor)
	req := func(sp wire.Space) (wire.Space, authority.MintRequest) {
		return sp, authority.MintRequest{Profile: authority.ProfileSupervisor, Expires: time.Hour,
			Grant: authority.Grant{Principal: p, Serve: &authority.ServeRows{
				Endpoint: wire.ManagerEndpoint, Instance: wire.NewLifecycleUID(), Epoch: fitEpoch, Commands: manager.Commands()}}}
	}
	err := authority.Fits(req(sp))
	var tooLarge *authority.JWTTooLargeError
	if !errors.As(err, &tooLarge) {
		return err
	}
	longest := len(sp) - 1
	for ; longest > 0; longest-- {
		if authority.Fits(req(wire.Space(strings.Repeat("s", longest)))) == nil {
			break
		}
	}
	return fmt.Errorf("space %s: its name (%d characters) is too long: the manager's serving credential names the rails of each of its %d commands in the space, and would be %d bytes, over the SPEC's 16 KiB JWT size gate; use a name of at most %d characters",
		sp, len(sp), tooLarge.Commands, tooLarge.Size, longest)
}
