package runhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/lang"
	"github.com/gocotal/cotal/wire"
)

// Admission (SPEC §14.8): a run is admitted once, before it is driven, under the authority of
// the caller that started it; the record is written create-only by a one-minute run-admitter
// credential, which the driver never holds. The run's mediator reads the channels of the whole
// space; what confines a run to its caller's channels is the admission's ceiling, read back from
// the leader before every channel effect. A revocation is a separate create-only marker: after
// it no channel effect runs, the host stops the run, and no host takes it back.

// Admit is what a run is admitted under: its caller, its channel ceiling and the provenance of
// that authority.
type Admit struct {
	Caller     meshwire.Caller
	Ceiling    meshwire.Ceiling
	Provenance meshwire.Provenance
}

// OperatorAdmit is the admission of a run the operator's own instrument, caller, starts: every
// channel, vouched for by the caller, for reason.
func OperatorAdmit(caller wire.Lifecycle, reason string) Admit {
	return Admit{
		Caller:     meshwire.Caller{Owner: caller.Principal.Owner(), Actor: caller.Principal.Actor(), UID: string(caller.UID)},
		Ceiling:    meshwire.CeilingAll(),
		Provenance: meshwire.Provenance{Kind: meshwire.ProvenanceOperator, By: caller.Principal.String(), Reason: reason},
	}
}

// ErrRevoked reports a run whose revocation marker is recorded.
var ErrRevoked = errors.New("runhost: the run was revoked")

// revocationPoll is how often a hosted run re-reads its revocation marker: the longest a
// revoked run keeps its host.
const revocationPoll = 2 * time.Second

// admitter connects run runID's admitter on serve's endpoint and calls fn with it.
func admitter(ctx context.Context, issuer Issuer, dial func(context.Context, *authority.Credential) (*nats.Conn, error),
	owner, runID string, serve *authority.ServeRows, fn func(jetstream.JetStream) error) error {
	cred, err := issuer.RunAdmitter(owner, runID, serve)
	if err != nil {
		return err
	}
	nc, err := dial(ctx, cred)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	return fn(js)
}

// createOnce writes data under key of the admission store, create-only.
func createOnce(ctx context.Context, js jetstream.JetStream, space wire.Space, key string, data []byte) error {
	_, err := js.Publish(ctx, meshwire.AdmissionBucket(space).Subject(key), data, jetstream.WithExpectLastSequencePerSubject(0))
	return err
}

// admit records run runID's admission on serve's endpoint instance.
func admit(ctx context.Context, issuer Issuer, dial func(context.Context, *authority.Credential) (*nats.Conn, error),
	space wire.Space, owner, runID string, serve *authority.ServeRows, a Admit) error {
	rec := meshwire.Admission{Version: 1, Space: string(space), Endpoint: string(serve.Endpoint), RunID: runID,
		InstanceID: string(serve.Instance), Caller: a.Caller, Ceiling: a.Ceiling, Provenance: a.Provenance, AdmittedAt: now()}
	data, err := json.Marshal(rec)
	if err == nil {
		_, err = meshwire.ParseAdmission(data) // what is written is what a host reads back
	}
	if err != nil {
		return fmt.Errorf("run %s's admission: %w", runID, err)
	}
	if data, err = wire.Canonicalize(data); err != nil {
		return err
	}
	return admitter(ctx, issuer, dial, owner, runID, serve, func(js jetstream.JetStream) error {
		if err := createOnce(ctx, js, space, meshwire.AdmissionKey(serve.Endpoint, runID), data); err != nil {
			return fmt.Errorf("admit run %s: %w", runID, err)
		}
		return nil
	})
}

// Revoke records run runID's revocation marker, by by for reason: from then on no channel
// effect of the run runs, the host that drives it stops it, and no host takes it back. A run
// revoked already stays as it was first revoked.
func (o Operator) Revoke(ctx context.Context, runID, by, reason string) error {
	rev, err := meshwire.NewRevocation(runID, by, reason, now())
	if err != nil {
		return err
	}
	data, err := json.Marshal(rev)
	if err == nil {
		data, err = wire.Canonicalize(data)
	}
	if err != nil {
		return err
	}
	serve := &authority.ServeRows{Endpoint: o.Endpoint, Instance: wire.NewLifecycleUID()}
	return admitter(ctx, o.Issuer, o.Dial, wire.DevOwner, runID, serve, func(js jetstream.JetStream) error {
		err := createOnce(ctx, js, o.Space, meshwire.RevocationKey(o.Endpoint, runID), data)
		if apiErr, ok := errors.AsType[*jetstream.APIError](err); ok && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			return nil // revoked already: the first marker stands
		}
		if err != nil {
			return fmt.Errorf("revoke run %s: %w", runID, err)
		}
		return nil
	})
}

// admission reads the run's admission and its revocation marker, leader-served. A missing,
// unreadable or mismatched admission is a refusal: garbled trusted state never authorizes.
func (m *meshHandler) admission(ctx context.Context) (meshwire.Admission, error) {
	h, r := m.h, m.r
	e, err := kvget.Get(ctx, r.mediator, meshwire.AdmissionBucket(h.cfg.Space), meshwire.AdmissionKey(h.cfg.Serve.Endpoint, r.id))
	switch {
	case errors.Is(err, kvget.ErrNotFound):
		return meshwire.Admission{}, fmt.Errorf("run %s has no admission record: it runs no channel effect", r.id)
	case err != nil:
		return meshwire.Admission{}, err
	case e.Deleted:
		return meshwire.Admission{}, fmt.Errorf("run %s's admission carries a deletion marker, which is never an absence", r.id)
	}
	a, err := meshwire.ParseAdmission(e.Value)
	if err != nil {
		return meshwire.Admission{}, fmt.Errorf("run %s's admission is unreadable: %w", r.id, err)
	}
	if a.Space != string(h.cfg.Space) || a.Endpoint != string(h.cfg.Serve.Endpoint) || a.RunID != r.id {
		return meshwire.Admission{}, fmt.Errorf("run %s's admission names other coordinates (%s/%s/%s)", r.id, a.Space, a.Endpoint, a.RunID)
	}
	if err := revocation(ctx, r.mediator, h.cfg.Space, h.cfg.Serve.Endpoint, r.id); err != nil {
		return meshwire.Admission{}, err
	}
	return a, nil
}

// revocation reads run runID's revocation marker, leader-served: nil when there is none, an
// ErrRevoked naming who revoked it and why when there is (an unreadable marker revokes too),
// another error when it could not be read.
func revocation(ctx context.Context, nc *nats.Conn, space wire.Space, endpoint wire.EndpointName, runID string) error {
	e, err := kvget.Get(ctx, nc, meshwire.AdmissionBucket(space), meshwire.RevocationKey(endpoint, runID))
	if errors.Is(err, kvget.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	rev, err := meshwire.ParseRevocation(e.Value, runID)
	if err != nil {
		return fmt.Errorf("%w: its marker is unreadable (%v)", ErrRevoked, err)
	}
	return fmt.Errorf("%w by %s: %s", ErrRevoked, rev.By, rev.Reason)
}

// mayRead checks, before a channel effect, that the run is admitted to read what filter says:
// a channel from anyone, or from one sender when sender is set. A refusal is a failure the
// program may catch (L4000, permission denied); a revocation ends the run.
func (m *meshHandler) mayRead(ctx context.Context, req *lang.Request, sender *wire.Principal, channel string) error {
	a, err := m.admission(ctx)
	if errors.Is(err, ErrRevoked) {
		m.revoke(err)
		return context.Cause(ctx)
	}
	if err == nil {
		ok := false
		if sender != nil {
			ok, err = a.MayReadFrom(m.h.cfg.Space, *sender, channel)
		} else {
			ok, err = a.MayRead(m.h.cfg.Space, channel)
		}
		if err == nil && !ok {
			err = fmt.Errorf("the run is not admitted to read channel %q: its caller may not", channel)
		}
	}
	if err != nil {
		return &lang.EffectError{Code: "L4000", Kind: "handler-fault", Message: fmt.Sprintf("%s: permission denied: %v", req.Kind, err)}
	}
	return nil
}

// watchRevocation re-reads the run's revocation marker until ctx ends, and calls stop once the
// run is revoked.
func (r *hosted) watchRevocation(ctx context.Context, h *Host, stop context.CancelCauseFunc) {
	t := time.NewTicker(revocationPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := revocation(ctx, r.mediator, h.cfg.Space, h.cfg.Serve.Endpoint, r.id)
		switch {
		case errors.Is(err, ErrRevoked):
			stop(err)
			return
		case err != nil && ctx.Err() == nil:
			h.cfg.Log.Warn("run: could not read its revocation marker", "run", r.id, "err", err)
		}
	}
}
