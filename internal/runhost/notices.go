package runhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/lang"
)

// Notices (SPEC §14.3): notify writes a bounded decision record for each addressee onto the run,
// never a channel message; the addressee's next turn carries it, and marks it consumed.

// TurnNotice is a notice a turn carries: the step that wrote it and its fact.
type TurnNotice struct {
	Step string          `json:"step"`
	Fact json.RawMessage `json:"fact"`
}

// notify performs a notify step: one notice per addressee, create-only under ids derived from
// the step's request id, so a recovery writes none twice.
func (m *meshHandler) notify(ctx context.Context, req *lang.Request) (*lang.Outcome, error) {
	agents, _ := req.Args[0].(*lang.Array)
	if agents == nil {
		return nil, &lang.EffectError{Code: "L4000", Kind: "handler-fault", Message: "notify: no addressees"}
	}
	fact := lang.JSON(req.Args[1])
	for _, h := range agents.Elems {
		r, _ := h.(*lang.Record)
		var agent string
		if r != nil {
			a, _ := r.Get("agent")
			agent, _ = a.(string)
		}
		if agent == "" {
			return nil, &lang.EffectError{Code: "L4000", Kind: "handler-fault", Message: "notify: an addressee is not an agent handle"}
		}
		addresseeID, noticeID, err := meshwire.NoticeIDs(req.RequestID, agent)
		if err != nil {
			return nil, err
		}
		spec, err := json.Marshal(meshwire.NoticeSpec{V: 1, Run: req.RunID, Step: req.Key, Addressee: agent, Fact: fact, At: now()})
		if err != nil {
			return nil, err
		}
		if err := m.createRecord(ctx, meshwire.RecordKey(meshwire.RecordNotice, m.h.cfg.Serve.Endpoint, req.RunID, addresseeID, noticeID, meshwire.RecordSpecLeaf), spec); err != nil {
			return nil, fmt.Errorf("notify %s: %w", agent, err)
		}
	}
	return &lang.Outcome{}, nil
}

// createRecord writes a create-only record of the run on the driver's commit path; one written
// already (a recovery's second write) is taken as written.
func (m *meshHandler) createRecord(ctx context.Context, key string, data []byte) error {
	_, err := m.r.js.Publish(ctx, m.h.recordsBucket().Subject(key), data, jetstream.WithExpectLastSequencePerSubject(0))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		return nil
	}
	return err
}

// pendingNotices reads the notices run runID wrote for agent that no turn carried yet, with the
// key and revision of each.
func (m *meshHandler) pendingNotices(ctx context.Context, agent string) ([]TurnNotice, []noticeRef, error) {
	addresseeID, err := meshwire.DerivedID(map[string]any{"agent": agent})
	if err != nil {
		return nil, nil, err
	}
	b := m.h.recordsBucket()
	prefix := meshwire.RecordKey(meshwire.RecordNotice, m.h.cfg.Serve.Endpoint, m.r.id, addresseeID)
	var notices []TurnNotice
	var refs []noticeRef
	err = kvget.Scan(ctx, m.r.mediator, b.Stream(), b.Subject(prefix+".*."+meshwire.RecordSpecLeaf), func(s *kvget.Stored) error {
		n, err := meshwire.ParseNoticeSpec(s.Data)
		if err != nil {
			return nil // a foreign or broken row is no notice of this run
		}
		base := strings.TrimSuffix(strings.TrimPrefix(s.Subject, b.Subject("")), "."+meshwire.RecordSpecLeaf)
		_, err = kvget.Get(ctx, m.r.mediator, b, base+"."+meshwire.RecordStatusLeaf)
		if err == nil {
			return nil // consumed
		}
		if !errors.Is(err, kvget.ErrNotFound) {
			return err
		}
		notices = append(notices, TurnNotice{Step: n.Step, Fact: n.Fact})
		refs = append(refs, noticeRef{key: base, revision: s.Seq})
		return nil
	})
	return notices, refs, err
}

// noticeRef is a notice's key (without its leaf) and its spec's revision.
type noticeRef struct {
	key      string
	revision uint64
}

// consumed marks the notices a turn carried as consumed by agent.
func (m *meshHandler) consumed(ctx context.Context, agent string, refs []noticeRef) error {
	for _, ref := range refs {
		data, err := json.Marshal(meshwire.NoticeStatus{V: 1, ConsumedAt: now(), By: agent, ObservedSpecRevision: ref.revision})
		if err != nil {
			return err
		}
		if err := m.createRecord(ctx, ref.key+"."+meshwire.RecordStatusLeaf, data); err != nil {
			return err
		}
	}
	return nil
}
