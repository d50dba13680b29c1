package runhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/journal"
	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/lang"
	"github.com/gocotal/cotal/wire"
)

// Operator reads and forks the runs recorded on one endpoint, as the mesh's operator: a
// run-operator credential per read, a driver credential per fork, minted by its issuer.
type Operator struct {
	Space    wire.Space
	Endpoint wire.EndpointName
	Issuer   Issuer
	Dial     func(ctx context.Context, cred *authority.Credential) (*nats.Conn, error)
}

// Operator returns the host's operator, on its endpoint.
func (h *Host) Operator() Operator {
	return Operator{Space: h.cfg.Space, Endpoint: h.cfg.Serve.Endpoint, Issuer: h.cfg.Issuer, Dial: h.cfg.Dial}
}

// with connects a run operator for runID and calls fn with it.
func (o Operator) with(ctx context.Context, runID, takeover string, fn func(nc *nats.Conn) error) error {
	cred, err := o.Issuer.RunOperator(runID, takeover)
	if err != nil {
		return err
	}
	nc, err := o.Dial(ctx, cred)
	if err != nil {
		return err
	}
	defer nc.Close()
	return fn(nc)
}

// Exists reports whether run runID is recorded on the operator's endpoint: ErrNoRun when not.
func (o Operator) Exists(ctx context.Context, runID string) error {
	if err := meshwire.ValidateRunID(runID); err != nil {
		return err
	}
	return o.with(ctx, runID, newTakeoverID(), func(nc *nats.Conn) error {
		data, _, err := readRunRecord(ctx, nc, o.Space, o.Endpoint, runID, meshwire.RecordSpecLeaf)
		if err == nil && data == nil {
			err = fmt.Errorf("run %s: %w on endpoint %s", runID, ErrNoRun, o.Endpoint)
		}
		return err
	})
}

// Program reads the program run runID is driven under, from its record on the mesh.
func (o Operator) Program(ctx context.Context, runID string) (string, error) {
	var source string
	err := o.with(ctx, runID, newTakeoverID(), func(nc *nats.Conn) error {
		data, _, err := readRunRecord(ctx, nc, o.Space, o.Endpoint, runID, meshwire.RecordProgramLeaf)
		if err == nil && data == nil {
			err = fmt.Errorf("run %s: %w on endpoint %s (its program is kept nowhere)", runID, ErrNoRun, o.Endpoint)
		}
		if err != nil {
			return err
		}
		p, err := meshwire.ParseRunProgram(data, runID)
		if err != nil {
			return fmt.Errorf("run %s's program record: %w", runID, err)
		}
		source = p.Source
		return nil
	})
	return source, err
}

// Recorded reads run runID as a migration or a fork walks it: its pins, from its spec record,
// and every write of its journal.
func (o Operator) Recorded(ctx context.Context, runID string) (lang.Recorded, error) {
	if err := meshwire.ValidateRunID(runID); err != nil {
		return lang.Recorded{}, err
	}
	rec := lang.Recorded{RunID: runID}
	takeover := newTakeoverID()
	err := o.with(ctx, runID, takeover, func(nc *nats.Conn) error {
		data, _, err := readRunRecord(ctx, nc, o.Space, o.Endpoint, runID, meshwire.RecordSpecLeaf)
		if err != nil {
			return err
		}
		if data == nil {
			return fmt.Errorf("run %s: %w on endpoint %s", runID, ErrNoRun, o.Endpoint)
		}
		spec, err := meshwire.ParseRunSpec(data)
		if err != nil {
			return fmt.Errorf("run %s's spec record: %w", runID, err)
		}
		rec.Pins = spec.Pins
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		rep, err := journal.Replay(ctx, js, o.Space, runID, takeover)
		if err != nil {
			return err
		}
		for _, r := range rep.Records {
			if r.Kind != meshwire.JournalStep {
				continue
			}
			var entry lang.Entry
			if err := json.Unmarshal(r.Entry, &entry); err != nil {
				return fmt.Errorf("%w: run %s, record %d: %v", journal.ErrBroken, runID, r.N, err)
			}
			rec.Entries = append(rec.Entries, entry)
		}
		return nil
	})
	return rec, err
}

// Fork starts a new run from parent's journal, cut before step (spec §11.3): the child's
// journal is the parent's prefix, written under the parent's pins, seed included, and its spec
// record names its lineage. The child is recorded, not driven: a host takes it with Resume, on
// the program source, which the caller puts where that host reads it (WriteProgram).
func (o Operator) Fork(ctx context.Context, source string, parent lang.Recorded, step string) (string, error) {
	childID := newRunID()
	entries, err := lang.Fork(ctx, source, parent, step, childID)
	if err != nil {
		return "", err
	}
	takeover := newTakeoverID()
	serve := &authority.ServeRows{Endpoint: o.Endpoint, Instance: wire.NewLifecycleUID()}
	cred, err := o.Issuer.RunDriver(wire.DevOwner, childID, takeover, serve, 0)
	if err != nil {
		return "", err
	}
	nc, err := o.Dial(ctx, cred)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	t, err := Take(ctx, js, o.Space, childID, takeover, Holder{Name: "fork"}, now)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if err := t.Append(ctx, e); err != nil {
			return "", err
		}
	}
	spec, err := json.Marshal(meshwire.RunSpec{V: 1, Run: childID, Pins: parent.Pins, CreatedAt: now(), ForkedFrom: &meshwire.RunFork{Run: parent.RunID, Step: step}})
	if err != nil {
		return "", err
	}
	// The child is admitted as the parent was, never wider: the same caller and ceiling, vouched
	// for by the operator, who forked it.
	a, err := o.Admission(ctx, parent.RunID)
	if err != nil {
		return "", fmt.Errorf("fork run %s: %w", parent.RunID, err)
	}
	provenance := meshwire.Provenance{Kind: meshwire.ProvenanceOperator, By: "the operator's instrument", Reason: fmt.Sprintf("a fork of run %s at %s", parent.RunID, step)}
	if err := admit(ctx, o.Issuer, o.Dial, o.Space, wire.DevOwner, childID, serve, Admit{Caller: a.Caller, Ceiling: a.Ceiling, Provenance: provenance}); err != nil {
		return "", err
	}
	subject := meshwire.RecordsBucket(o.Space).Subject(meshwire.RecordKey(meshwire.RecordRun, o.Endpoint, childID, meshwire.RecordSpecLeaf))
	if _, err := js.Publish(ctx, subject, spec, jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
		return "", fmt.Errorf("record the fork %s: %w", childID, err)
	}
	return childID, nil
}

// Admission reads run runID's admission record, leader-served.
func (o Operator) Admission(ctx context.Context, runID string) (meshwire.Admission, error) {
	var a meshwire.Admission
	err := o.with(ctx, runID, newTakeoverID(), func(nc *nats.Conn) error {
		e, err := kvget.Get(ctx, nc, meshwire.AdmissionBucket(o.Space), meshwire.AdmissionKey(o.Endpoint, runID))
		if errors.Is(err, kvget.ErrNotFound) {
			return fmt.Errorf("run %s has no admission record", runID)
		}
		if err != nil {
			return err
		}
		a, err = meshwire.ParseAdmission(e.Value)
		return err
	})
	return a, err
}
