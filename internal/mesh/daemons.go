package mesh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/authority"
	"github.com/gocotal/cotal/delivery"
	"github.com/gocotal/cotal/liveness"
	"github.com/gocotal/cotal/manager"
	"github.com/gocotal/cotal/wire"
)

// Daemons are the in-process daemons of an authenticated mesh: per space, the delivery daemon,
// the interim manager-plane liveness responder (until the manager exists) and the session sweep.
type Daemons struct {
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	conns      []*nats.Conn
	supervisor *manager.Supervisor
}

// DaemonHolder is the actor the in-process delivery daemon and manager responder run as.
const (
	deliveryActor = "cotal_delivery"
	managerActor  = "cotal_manager"
)

// StartDaemons starts, for every space, a delivery daemon and the manager liveness responder,
// each on its own least-privilege credential. Stop ends them.
func (a *Authority) StartDaemons(url string, spaces []wire.Space, log *slog.Logger) (*Daemons, error) {
	ctx, cancel := context.WithCancel(context.Background())
	ds := &Daemons{ctx: ctx, cancel: cancel}
	for _, sp := range spaces {
		if err := a.startDelivery(ctx, ds, url, sp, log); err != nil {
			ds.Stop()
			return nil, err
		}
		if err := a.startManagerResponder(ctx, ds, url, sp, log); err != nil {
			ds.Stop()
			return nil, err
		}
		ds.wg.Add(1)
		go func() {
			defer ds.wg.Done()
			a.sweepSessions(ctx, url, sp, log)
		}()
	}
	return ds, nil
}

// sessionSweepEvery is how often the mesh expires sessions and retries unfinished revocations.
const sessionSweepEvery = 30 * time.Second

// sweepSessions runs the session sweep of one space until ctx ends: expired sessions are
// terminated and their halves refused by the broker; a malformed row is logged, never fatal.
func (a *Authority) sweepSessions(ctx context.Context, url string, sp wire.Space, log *slog.Logger) {
	t := time.NewTicker(sessionSweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := a.Ledger(ctx, url, sp, func(s *authority.AuthStore, _ *authority.SpaceKeys) ([]string, error) {
			res, err := s.SweepSessions(ctx, time.Now())
			if err != nil {
				return nil, err
			}
			return res.RevokedKeys, errors.Join(res.Failed...)
		})
		if err != nil && ctx.Err() == nil && log != nil {
			log.Warn("sweep sessions", "space", sp, "err", err)
		}
	}
}

// connect issues a credential of profile for local.<actor> through the ledger and connects it.
func (a *Authority) connect(ctx context.Context, ds *Daemons, url string, sp wire.Space, profile authority.Profile, actor string) (*nats.Conn, *authority.Credential, error) {
	cred, err := a.Issue(ctx, url, MintRequest{Space: sp, Profile: profile, Name: actor})
	if err != nil {
		return nil, nil, err
	}
	nc, err := Connect(ctx, url, cred)
	if err != nil {
		return nil, nil, err
	}
	ds.conns = append(ds.conns, nc)
	return nc, cred, nil
}

func (a *Authority) startDelivery(ctx context.Context, ds *Daemons, url string, sp wire.Space, log *slog.Logger) error {
	nc, cred, err := a.connect(ctx, ds, url, sp, authority.ProfileDelivery, deliveryActor)
	if err != nil {
		return err
	}
	d, err := delivery.New(nc, delivery.Config{Space: sp, Holder: cred.Principal.String(), Log: log})
	if err != nil {
		return err
	}
	ds.wg.Add(1)
	go func() {
		defer ds.wg.Done()
		if err := d.Run(ctx); err != nil && log != nil {
			log.Error("delivery daemon stopped", "space", sp, "err", err)
		}
	}()
	return nil
}

// managerLeaseRenew renews the manager lease well within its 10 s TTL.
const managerLeaseRenew = 3 * time.Second

// startManagerResponder holds a manager lease in the manager bucket and answers manager-plane
// probes from it: bound while its own lease row is there.
func (a *Authority) startManagerResponder(ctx context.Context, ds *Daemons, url string, sp wire.Space, log *slog.Logger) error {
	nc, cred, err := a.connect(ctx, ds, url, sp, authority.ProfileSupervisor, managerActor)
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	instance := wire.NewLifecycleUID()
	bucket, key := sp.ManagerBucket(), wire.ManagerLeaseKey(instance)
	write := func(ctx context.Context) error {
		row, _ := json.Marshal(wire.DeliveryLease{Holder: cred.Principal.String(), Incarnation: string(instance), Since: wire.MillisOf(time.Now()), Ready: true}) // strings and numbers always encode
		_, err := js.Publish(ctx, bucket.Subject(key), row)
		return err
	}
	if err := write(ctx); err != nil {
		return fmt.Errorf("write the manager lease: %w", err)
	}
	grade := func(ctx context.Context) (wire.ResponderState, string) {
		req, _ := json.Marshal(map[string]string{"last_by_subj": bucket.Subject(key)}) // strings always encode
		msg, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+bucket.Stream(), req)
		if err != nil {
			return wire.ResponderUnknown, string(instance)
		}
		var rep struct {
			Message *struct{} `json:"message"`
		}
		if json.Unmarshal(msg.Data, &rep) != nil || rep.Message == nil {
			return wire.ResponderUnbound, string(instance)
		}
		return wire.ResponderBound, string(instance)
	}
	if _, err := liveness.Serve(nc, sp, wire.PlaneManager, grade, log); err != nil {
		return err
	}
	ds.wg.Add(1)
	go func() {
		defer ds.wg.Done()
		t := time.NewTicker(managerLeaseRenew)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := write(ctx); err != nil && !errors.Is(err, context.Canceled) && log != nil {
					log.Warn("renew the manager lease", "space", sp, "err", err)
				}
			}
		}
	}()
	return nil
}

// Stop ends the daemons and waits for them. Spawned agents are stopped and retired first, while
// the broker still runs.
func (ds *Daemons) Stop() {
	if ds.supervisor != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = ds.supervisor.Close(ctx) // each agent's own failure is logged by the supervisor
		cancel()
	}
	ds.cancel()
	ds.wg.Wait()
	for _, nc := range ds.conns {
		nc.Close()
	}
}
