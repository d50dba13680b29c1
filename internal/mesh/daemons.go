package mesh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/warden"
	"github.com/gocotal/cotal/wire"
)

// Daemons are the in-process daemons of an authenticated mesh: per space, the delivery daemon
// and the session sweep; and the supervisor, with its manager lease.
type Daemons struct {
	ctx         context.Context
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	supervisors []*servedSupervisor // guarded by mu
	// life is the lifetime of the daemons' credentials, renewed before two thirds of it.
	life  time.Duration
	log   *slog.Logger
	mu    sync.Mutex
	conns []*ledger.Held // guarded by mu
	// wardensReady has one channel per space, closed once its warden is first watching;
	// guarded by mu.
	wardensReady []chan struct{}
	// deliveries are the delivery daemons, by space; guarded by mu.
	deliveries map[wire.Space]*Delivery
	// people, once a user-auth mesh's auth service runs, are whom the managers also spawn for.
	people atomic.Pointer[hostedPeople]
	// parts are the delivery daemons and the managers, each stopped on its own by StopPart and
	// started again by StartPart, which puts a fresh part in its place; guarded by mu.
	parts map[Part]*part
	// partOps makes StopPart and StartPart one at a time.
	partOps sync.Mutex
	// ledgers are the spaces' ledgers StartDaemons was given: the delivery daemons' spaces.
	ledgers []*ledger.Ledger
	// noDelivery reports that the delivery daemons run beside the mesh, not in it.
	noDelivery bool
	// supervising is how the mesh started its managers, for StartPart; nil when this process
	// runs none.
	supervising *supervising
	// wardens reports, by space, whether the warden's current incarnation is watching; guarded
	// by mu.
	wardens map[wire.Space]bool
	// managed holds the spaces whose manager this process serves or stands by for; guarded by mu.
	managed map[wire.Space]bool
}

// Part is a part of the daemons `cotal down PART` stops on its own.
type Part string

// The parts StopPart stops.
const (
	PartDelivery Part = "delivery"
	PartManager  Part = "manager"
)

// supervising is how a mesh runs its managers: from which directory, with which options, and
// whether each stands by for its instance (on a cluster) or serves at once.
type supervising struct {
	dir     Dir
	opts    SupervisorOptions
	cluster bool
}

// part is what runs of one Part: its goroutines, under a context of its own.
type part struct {
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopped bool // guarded by Daemons.mu
}

// The actors the in-process daemons run as.
const (
	deliveryActor = "cotal_delivery"
	ManagerActor  = "cotal_manager"

	// standbyActor reads the manager lease a standby supervisor waits on.
	standbyActor = "cotal_standby"
)

// StartDaemons starts, for every space whose ledger is given, a delivery daemon and the
// integrity warden, each on its own least-privilege credential issued through that ledger for
// life (authority.DaemonLifetime when zero) and renewed before two thirds of it, and the session
// sweep on the ledger itself. noDelivery leaves the delivery daemons out (`cotal deliver` runs
// them beside the mesh). Stop ends them and revokes their credentials; the ledgers stay their
// caller's.
func StartDaemons(ledgers []*ledger.Ledger, life time.Duration, noDelivery bool, log *slog.Logger) (*Daemons, error) {
	ds := newDaemons(life, log)
	ds.ledgers, ds.noDelivery = ledgers, noDelivery
	ctx := ds.ctx
	for _, l := range ledgers {
		if !noDelivery {
			if err := ds.startDelivery(ctx, l, log); err != nil {
				ds.Stop()
				return nil, err
			}
		}
		if err := ds.startWarden(ctx, l, log); err != nil {
			ds.Stop()
			return nil, err
		}
		ds.wg.Go(func() { sweepSessions(ctx, l, log) })
		ds.wg.Go(func() { prune(ctx, l, log) })
	}
	return ds, nil
}

// sessionSweepEvery is how often the mesh expires sessions and retries unfinished revocations.
const sessionSweepEvery = 30 * time.Second

// sweepSessions runs the session sweep of one space until ctx ends: expired sessions are
// terminated and their halves refused by the broker; a malformed row is logged, never fatal.
func sweepSessions(ctx context.Context, l *ledger.Ledger, log *slog.Logger) {
	every(ctx, sessionSweepEvery, func() {
		if err := l.Sweep(ctx, time.Now()); err != nil && ctx.Err() == nil && log != nil {
			log.Warn("sweep sessions", "space", l.Space(), "err", err)
		}
	})
}

// every runs fn every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// newDaemons returns an empty set of daemons whose credentials live life.
func newDaemons(life time.Duration, log *slog.Logger) *Daemons {
	if life <= 0 {
		life = authority.DaemonLifetime
	}
	ctx, cancel := context.WithCancel(context.Background())
	ds := &Daemons{ctx: ctx, cancel: cancel, life: life, log: log, parts: map[Part]*part{}, wardens: map[wire.Space]bool{}, managed: map[wire.Space]bool{}}
	for _, p := range []Part{PartDelivery, PartManager} {
		ds.parts[p] = newPart(ctx)
	}
	return ds
}

// newPart returns a running part under ctx.
func newPart(ctx context.Context) *part {
	pctx, cancel := context.WithCancel(ctx)
	return &part{ctx: pctx, cancel: cancel}
}

// part returns what runs of p now.
func (ds *Daemons) part(p Part) *part {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return ds.parts[p]
}

// pruneEvery is how often the mesh prunes what its ledger keeps past retention.
const pruneEvery = time.Hour

// prune prunes l every pruneEvery until ctx ends.
func prune(ctx context.Context, l *ledger.Ledger, log *slog.Logger) {
	every(ctx, pruneEvery, func() {
		p, err := l.Prune(ctx, time.Now(), ledger.Retention)
		if err != nil && ctx.Err() == nil && log != nil {
			log.Warn("prune the ledger", "space", l.Space(), "err", err)
		}
		if p != nil && log != nil && p.Sessions+p.Revocations > 0 {
			log.Info("pruned the ledger", "space", l.Space(), "sessions", p.Sessions, "revocations", p.Revocations)
		}
	})
}

// connect issues a credential of profile for local.<actor> through l, connected and kept
// renewed until the connection is dropped or the daemons stop.
func (ds *Daemons) connect(ctx context.Context, l *ledger.Ledger, profile authority.Profile, actor string) (*ledger.Held, error) {
	h, err := l.Hold(ctx, ledger.Request{Profile: profile, Name: actor, Expires: ds.life}, ds.log)
	if err != nil {
		return nil, err
	}
	ds.mu.Lock()
	ds.conns = append(ds.conns, h)
	ds.mu.Unlock()
	return h, nil
}

func (ds *Daemons) startDelivery(ctx context.Context, l *ledger.Ledger, log *slog.Logger) error {
	d, err := NewDelivery(ctx, l, deliveryActor, ds.life, log)
	if err != nil {
		return err
	}
	ds.mu.Lock()
	ds.conns = append(ds.conns, d.held...) // released by Stop
	if ds.deliveries == nil {
		ds.deliveries = map[wire.Space]*Delivery{}
	}
	ds.deliveries[l.Space()] = d
	ds.mu.Unlock()
	dp := ds.part(PartDelivery)
	dp.wg.Go(func() {
		if err := d.Run(dp.ctx); err != nil && dp.ctx.Err() == nil && log != nil {
			log.Error("delivery daemon stopped", "space", l.Space(), "err", err)
		}
	})
	return nil
}

// wardenBackoff bounds the wait before a stopped warden is started again.
const (
	wardenBackoffMin = time.Second
	wardenBackoffMax = 30 * time.Second
)

// startWarden starts the warden of l's space on its own credential, and keeps it running: a
// warden that stops (its connection closed, its credential expired or a watch failed) is started
// again on a freshly issued credential, with a backoff that starts over after a run that got
// ready.
func (ds *Daemons) startWarden(ctx context.Context, l *ledger.Ledger, log *slog.Logger) error {
	w, dc, err := ds.newWarden(ctx, l, log)
	if err != nil {
		return err
	}
	ready := make(chan struct{}) // closed when the first incarnation is watching
	var readyOnce sync.Once
	ds.mu.Lock()
	ds.wardensReady = append(ds.wardensReady, ready)
	ds.wardens[l.Space()] = false
	ds.mu.Unlock()
	ds.wg.Go(func() {
		backoff := wardenBackoffMin
		for {
			ran := make(chan struct{})
			got := make(chan bool, 1)
			ds.wg.Go(func() {
				select {
				case <-w.Ready():
					readyOnce.Do(func() { close(ready) })
					ds.setWarden(l.Space(), true)
					got <- true
				case <-ran:
					got <- false
				}
			})
			err := w.Run(ctx)
			ds.setWarden(l.Space(), false)
			close(ran)
			if <-got {
				backoff = wardenBackoffMin
			}
			if ctx.Err() != nil {
				return
			}
			if log != nil {
				log.Error("warden stopped; starting it again", "space", l.Space(), "err", err, "in", backoff)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, wardenBackoffMax)
			next, nextDC, err := ds.newWarden(ctx, l, log)
			if err != nil {
				continue // w runs again on its old connection; a closed one stops at once
			}
			ds.drop(dc)
			w, dc = next, nextDC
		}
	})
	return nil
}

// StopPart stops one part of the daemons and leaves the rest serving: the managers, serving or
// standing by (their agents are stopped and retired, their runs left to their journals), or the
// delivery daemons (their credentials revoked). A part already stopped is left as it is; a stop
// called while another runs returns once that one has finished.
func (ds *Daemons) StopPart(p Part) error {
	ds.partOps.Lock()
	defer ds.partOps.Unlock()
	return ds.stopPart(p)
}

// stopPart is StopPart, its caller holding partOps.
func (ds *Daemons) stopPart(p Part) error {
	pt := ds.part(p)
	if pt == nil {
		return errNoPart(p)
	}
	ds.mu.Lock()
	stopped := pt.stopped
	pt.stopped = true
	ds.mu.Unlock()
	if stopped {
		return nil
	}
	pt.cancel()
	pt.wg.Wait()
	switch p {
	case PartManager:
		ds.mu.Lock()
		sups := ds.supervisors
		ds.supervisors = nil
		ds.mu.Unlock()
		var wg sync.WaitGroup
		for _, sup := range sups {
			wg.Go(func() { sup.stop(ds) })
		}
		wg.Wait()
	case PartDelivery:
		ds.mu.Lock()
		var held []*ledger.Held
		for _, d := range ds.deliveries {
			held = append(held, d.held...)
			d.held = nil // let go once, however often the part is stopped
		}
		ds.mu.Unlock()
		for _, h := range held {
			ds.drop(h)
		}
	}
	return nil
}

// errNoPart names the parts there are.
func errNoPart(p Part) error {
	return fmt.Errorf("no part %q: the parts are %q and %q", p, PartDelivery, PartManager)
}

// StartPart starts again a part StopPart stopped, as the mesh first started it: the delivery
// daemon of every space, or the manager of every space this process manages (standing by for
// its instance on a cluster). A part that runs is left as it is; one that fails to start in some
// space is stopped again in all. A part this process never ran (started with NoDelivery or
// NoManager) is refused: it runs beside the mesh, if anywhere.
func (ds *Daemons) StartPart(p Part) error {
	ds.partOps.Lock()
	defer ds.partOps.Unlock()
	ds.mu.Lock()
	pt, ok := ds.parts[p]
	stopped := ok && pt.stopped
	var managed []wire.Space
	for sp := range ds.managed {
		managed = append(managed, sp)
	}
	ds.mu.Unlock()
	switch {
	case !ok:
		return errNoPart(p)
	case ds.ctx.Err() != nil:
		return errors.New("the mesh is stopping")
	case p == PartDelivery && ds.noDelivery:
		return errors.New("this mesh runs no delivery daemon: it was started with --no-delivery (run `cotal deliver` beside it)")
	case p == PartManager && (ds.supervising == nil || len(managed) == 0):
		return errors.New("this mesh runs no manager: it was started with --no-manager (run `cotal supervise` beside it)")
	case !stopped:
		return nil
	}
	fresh := newPart(ds.ctx)
	ds.mu.Lock()
	ds.parts[p] = fresh
	ds.mu.Unlock()
	for _, l := range ds.ledgers {
		var err error
		switch sv := ds.supervising; {
		case p == PartDelivery:
			err = ds.startDelivery(fresh.ctx, l, ds.log)
		case !slices.Contains(managed, l.Space()):
		case sv.cluster:
			ds.standBySupervisor(sv.dir, l, sv.opts, ds.log)
		default:
			err = ds.startSupervisor(fresh.ctx, sv.dir, l, sv.opts, ds.log)
		}
		if err != nil {
			// Stopped again whole, it is reported stopped, and a later start tries it all anew.
			return errors.Join(fmt.Errorf("start the %s of space %s: %w", p, l.Space(), err), ds.stopPart(p))
		}
	}
	return nil
}

// Parts reports what runs of the daemons now, by space: each part serving, standing by or
// stopped, and the warden watching or not.
func (ds *Daemons) Parts() []PartState {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	var out []PartState
	for sp, d := range ds.deliveries {
		st := PartServing
		switch {
		case ds.parts[PartDelivery].stopped:
			st = PartStopped
		case !d.Active():
			st = PartStandingBy
		}
		out = append(out, PartState{Name: string(PartDelivery), Space: sp, State: st})
	}
	serving := map[wire.Space]bool{}
	for _, sup := range ds.supervisors {
		serving[sup.space] = true
	}
	for sp := range ds.managed {
		st := PartServing
		switch {
		case ds.parts[PartManager].stopped:
			st = PartStopped
		case !serving[sp]:
			st = PartStandingBy
		}
		out = append(out, PartState{Name: string(PartManager), Space: sp, State: st})
	}
	for sp, watching := range ds.wardens {
		st := PartServing
		if !watching {
			st = PartRestarting
		}
		out = append(out, PartState{Name: "warden", Space: sp, State: st})
	}
	slices.SortFunc(out, func(a, b PartState) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Space, b.Space)) })
	return out
}

// PartState is what one part of the daemons of one space is doing.
type PartState struct {
	Name  string     `json:"name"`
	Space wire.Space `json:"space"`
	State string     `json:"state"`
}

// The states of a part.
const (
	PartServing    = "serving"
	PartStandingBy = "standing-by"
	PartStopped    = "stopped"
	PartRestarting = "restarting"
)

// manages records that this process serves, or stands by for, sp's manager.
func (ds *Daemons) manages(sp wire.Space) {
	ds.mu.Lock()
	ds.managed[sp] = true
	ds.mu.Unlock()
}

// setWarden records whether sp's warden is watching.
func (ds *Daemons) setWarden(sp wire.Space, watching bool) {
	ds.mu.Lock()
	ds.wardens[sp] = watching
	ds.mu.Unlock()
}

// newWarden issues a warden credential through l, connects it and returns its warden and
// connection. The warden revokes through l.
func (ds *Daemons) newWarden(ctx context.Context, l *ledger.Ledger, log *slog.Logger) (*warden.Warden, *ledger.Held, error) {
	dc, err := ds.connect(ctx, l, authority.ProfileWarden, meshwire.WardenActor)
	if err != nil {
		return nil, nil, err
	}
	w, err := warden.New(dc.Conn, warden.Config{Space: l.Space(), Log: log, Revoke: l.RevokeUserKey, RevokeSender: l.RevokePrincipal})
	if err != nil {
		ds.drop(dc)
		return nil, nil, err
	}
	return w, dc, nil
}

// drop lets h go: its connection closed, its credential revoked, forgotten.
func (ds *Daemons) drop(h *ledger.Held) {
	ds.release(h)
	ds.mu.Lock()
	ds.conns = slices.DeleteFunc(ds.conns, func(c *ledger.Held) bool { return c == h })
	ds.mu.Unlock()
}

// release releases h, logging a credential it could not revoke.
func (ds *Daemons) release(h *ledger.Held) {
	if err := h.Release(); err != nil && ds.log != nil {
		cred := h.Credential()
		ds.log.Warn("revoke a stopped daemon's credential", "principal", cred.Principal, "profile", cred.Profile, "err", err)
	}
}

// delivering reports whether this mesh's delivery daemon of sp serves (holds the space's
// delivery lease), and true when the mesh runs none (`cotal deliver` runs it beside the mesh).
func (ds *Daemons) delivering(sp wire.Space) bool {
	ds.mu.Lock()
	d := ds.deliveries[sp]
	ds.mu.Unlock()
	return d == nil || d.Active()
}

// WardensReady waits until every space's warden is watching (any incarnation of it), or ctx
// ends.
func (ds *Daemons) WardensReady(ctx context.Context) error {
	ds.mu.Lock()
	ready := slices.Clone(ds.wardensReady)
	ds.mu.Unlock()
	for _, r := range ready {
		select {
		case <-r:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Stop ends the daemons and waits for them. Spawned agents are stopped and retired first, while
// the broker still runs.
func (ds *Daemons) Stop() {
	ds.partOps.Lock() // no part starts again past this point
	defer ds.partOps.Unlock()
	ds.stopPart(PartManager)
	ds.cancel()
	ds.part(PartDelivery).wg.Wait()
	ds.wg.Wait()
	ds.mu.Lock()
	conns := ds.conns
	ds.conns = nil
	ds.mu.Unlock()
	for _, h := range conns {
		ds.release(h)
	}
}
