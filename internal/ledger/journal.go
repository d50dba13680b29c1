package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/journal"
	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// ReadJournal replays one run's journal under a run-operator credential minted for that run
// alone: a minute's lifetime, a fresh takeover id naming its replay durable, its own connection,
// closed after. The credential can read nothing else and write nothing.
func (l *Ledger) ReadJournal(ctx context.Context, runID string) (*journal.Replayed, error) {
	takeover := newTakeoverID()
	cred, err := l.RunOperator(runID, takeover)
	if err != nil {
		return nil, err
	}
	var out *journal.Replayed
	err = l.withOneShot(ctx, cred, func(_ *nats.Conn, js jetstream.JetStream) error {
		out, err = journal.Replay(ctx, js, l.sp, runID, takeover)
		return err
	})
	return out, err
}

// RunStatus reads the status record of run runID hosted by the manager endpoint, from the leader,
// under a run-operator credential of its own (a minute's lifetime, its own connection, closed
// after): nil when the run has no status record, or a deleted one.
func (l *Ledger) RunStatus(ctx context.Context, runID string) (*meshwire.RunStatus, error) {
	cred, err := l.RunOperator(runID, newTakeoverID())
	if err != nil {
		return nil, err
	}
	var e *kvget.Entry
	err = l.withOneShot(ctx, cred, func(nc *nats.Conn, _ jetstream.JetStream) error {
		e, err = kvget.Get(ctx, nc, meshwire.RecordsBucket(l.sp), meshwire.RecordKey(meshwire.RecordRun, wire.ManagerEndpoint, runID, meshwire.RecordStatusLeaf))
		return err
	})
	switch {
	case errors.Is(err, kvget.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case e.Deleted:
		return nil, nil
	}
	st, err := meshwire.ParseRunStatus(e.Value)
	if err != nil {
		return nil, fmt.Errorf("the status record of run %s: %w", runID, err)
	}
	return &st, nil
}

// RunOperator mints a run-operator credential: the point reads of the records, and the replay of
// run runID under takeoverID (no replay when runID is empty).
func (l *Ledger) RunOperator(runID, takeoverID string) (*authority.Credential, error) {
	if runID != "" {
		if err := meshwire.ValidateRunID(runID); err != nil {
			return nil, err
		}
	}
	p, err := wire.NewPrincipal(wire.DevOwner, runOperatorActor)
	if err != nil {
		return nil, err
	}
	return l.keys.Mint(authority.MintRequest{Profile: authority.ProfileRunOperator,
		Grant: authority.Grant{Principal: p, Run: authority.RunReplay{RunID: runID, TakeoverID: takeoverID}}})
}

// newTakeoverID returns 16 random hex characters: one replay's takeover id.
func newTakeoverID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// RunDriver mints the driver credential of one run and takeover (SPEC §14.6): the append on
// exactly that run's journal subject, the takeover's own replay durable, and the commit path of
// the run's records on the endpoint instance serve names. It is the run caller's principal (the
// owner's, derived from the run id), so every host that resumes the run drives it as the same
// principal.
func (l *Ledger) RunDriver(owner, runID, takeoverID string, serve *authority.ServeRows, life time.Duration) (*authority.Credential, error) {
	return l.runCredential(authority.ProfileRunDriver, owner, runID, takeoverID, serve, life)
}

// RunMediator mints the mediator credential of one run attempt (SPEC §14.8), the trusted host
// side of the run: the leader-served reads of the records and the admission store, the
// checkpoint plane of its endpoint, and the run caller's own calls. It is the run caller's
// principal, as the driver's is.
func (l *Ledger) RunMediator(owner, runID, takeoverID string, serve *authority.ServeRows, life time.Duration) (*authority.Credential, error) {
	return l.runCredential(authority.ProfileRunMediator, owner, runID, takeoverID, serve, life)
}

// RunAdmitter mints the admitter credential of one run (SPEC §14.8): the create-only writes of
// its admission record and its revocation marker on the endpoint serve names, for a minute.
func (l *Ledger) RunAdmitter(owner, runID string, serve *authority.ServeRows) (*authority.Credential, error) {
	return l.runCredential(authority.ProfileRunAdmitter, owner, runID, "", serve, 0)
}

func (l *Ledger) runCredential(profile authority.Profile, owner, runID, takeoverID string, serve *authority.ServeRows, life time.Duration) (*authority.Credential, error) {
	caller, err := meshwire.RunCaller(owner, runID)
	if err != nil {
		return nil, err
	}
	return l.keys.Mint(authority.MintRequest{Profile: profile, Expires: life,
		Grant: authority.Grant{Principal: caller.Principal, LifecycleUID: caller.UID, Serve: serve,
			Run: authority.RunReplay{RunID: runID, TakeoverID: takeoverID}}})
}
