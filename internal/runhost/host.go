package runhost

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/lang"
	"github.com/gocotal/cotal/wire"
)

// Issuer mints a run's credentials: for one takeover, the driver's (its journal and records) and
// the mediator's (its reads and effects); the admitter's, who writes its admission and its
// revocation; and a run operator's, who reads the records and replays one run's journal (every
// run's records with no run named). The ledger is one.
type Issuer interface {
	RunOperator(runID, takeoverID string) (*authority.Credential, error)
	RunDriver(owner, runID, takeoverID string, serve *authority.ServeRows, life time.Duration) (*authority.Credential, error)
	RunMediator(owner, runID, takeoverID string, serve *authority.ServeRows, life time.Duration) (*authority.Credential, error)
	RunAdmitter(owner, runID string, serve *authority.ServeRows) (*authority.Credential, error)
}

// Config configures a Host.
type Config struct {
	Space wire.Space
	// Owner owns the runs the host starts: the run caller's owner.
	Owner string
	// Serve is the manager instance the runs are hosted on: its endpoint, instance and epoch.
	Serve *authority.ServeRows
	// Issuer mints the runs' credentials; Dial connects one.
	Issuer Issuer
	Dial   func(ctx context.Context, cred *authority.Credential) (*nats.Conn, error)
	// Dir keeps each hosted run's program, so a restarted host takes its runs back.
	Dir string
	// CredentialLife is how long a run's credentials live; an hour when zero.
	CredentialLife time.Duration
	Log            *slog.Logger
}

// Host hosts workflow runs on one manager instance: it starts them, drives them in this
// process, takes them back after a restart, and answers their checkpoints.
type Host struct {
	cfg  Config
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu     sync.Mutex
	runs   map[string]*hosted
	seats  Seats // the manager's, once it serves them
	closed bool
}

// NewHost returns a host; Recover takes back the runs its directory names.
func NewHost(cfg Config) (*Host, error) {
	if cfg.Serve == nil || cfg.Issuer == nil || cfg.Dial == nil || cfg.Dir == "" || cfg.Owner == "" {
		return nil, errors.New("runhost: a host needs its manager instance, an issuer, a dialer, an owner and a directory")
	}
	if cfg.CredentialLife == 0 {
		cfg.CredentialLife = time.Hour
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Host{cfg: cfg, ctx: ctx, stop: stop, runs: map[string]*hosted{}}, nil
}

// Close stops driving every run (each stays where its journal says, for a resume) and waits.
func (h *Host) Close() {
	h.mu.Lock()
	h.closed = true // a launch racing the close drives nothing
	h.mu.Unlock()
	h.stop()
	h.wg.Wait()
}

// Start checks source, mints the run's id, admits the run under a, records it and starts
// driving it.
func (h *Host) Start(ctx context.Context, source string, a Admit) (string, error) {
	if r := lang.Check(source); !r.Accepted {
		return "", &lang.RefusedError{Report: r}
	}
	runID := newRunID()
	if err := admit(ctx, h.cfg.Issuer, h.cfg.Dial, h.cfg.Space, h.cfg.Owner, runID, h.cfg.Serve, a); err != nil {
		return "", err
	}
	if err := atomicfile.Write(h.programPath(runID), []byte(source), 0o600); err != nil {
		return "", err
	}
	return runID, h.launch(ctx, runID, source, true)
}

// Resume takes run runID back with source (its recorded program, or an edit a resume checks
// step by step): it replays the journal and drives the run from where it stopped.
func (h *Host) Resume(ctx context.Context, runID, source string) error {
	if err := meshwire.ValidateRunID(runID); err != nil {
		return err
	}
	h.mu.Lock()
	r := h.runs[runID]
	h.mu.Unlock()
	if r != nil && !r.finished() {
		return fmt.Errorf("run %s: %w", runID, ErrRunning)
	}
	next := nextProgramPath(h.cfg.Dir, runID)
	if source == "" {
		b, err := os.ReadFile(next)
		if errors.Is(err, os.ErrNotExist) {
			b, err = os.ReadFile(h.programPath(runID))
			next = ""
		}
		if errors.Is(err, os.ErrNotExist) {
			// A run this host did not start (another node served its instance before): its
			// program is on the mesh.
			var src string
			if src, err = h.Operator().Program(ctx, runID); err == nil {
				b = []byte(src)
			}
		}
		if err != nil {
			return err
		}
		source = string(b)
	} else {
		next = ""
	}
	if err := h.launch(ctx, runID, source, false); err != nil {
		if next != "" {
			_ = os.Remove(next) // a program handed for a resume that was refused is not kept
		}
		return err
	}
	if next != "" {
		return os.Rename(next, h.programPath(runID))
	}
	return atomicfile.Write(h.programPath(runID), []byte(source), 0o600)
}

// WriteProgram puts source where a host on dir takes run runID's program from at its next
// resume, in place of the one it recorded: a resume under an edited program.
func WriteProgram(dir, runID, source string) error {
	if err := meshwire.ValidateRunID(runID); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return atomicfile.Write(nextProgramPath(dir, runID), []byte(source), 0o600)
}

func nextProgramPath(dir, runID string) string { return filepath.Join(dir, runID+".next") }

// Recover takes back every run recorded on the host's endpoint that has not ended and that
// this host held: its manager instance's (another node may have served the instance before
// this one, and the program is then read from the mesh), or one whose program the host's
// directory keeps.
func (h *Host) Recover(ctx context.Context) error {
	rows, err := h.List(ctx) // one read of the run records: the ended runs are not taken
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range rows {
		if r.State == meshwire.RunCompleted || r.State == meshwire.RunFailed {
			continue
		}
		if _, err := os.Stat(h.programPath(r.RunID)); err != nil && r.Holder != string(h.cfg.Serve.Instance) {
			continue // another instance's run
		}
		if err := h.Resume(ctx, r.RunID, ""); err != nil && !errors.Is(err, ErrEnded) && !errors.Is(err, ErrRunning) && !errors.Is(err, ErrRevoked) {
			errs = append(errs, fmt.Errorf("take back run %s: %w", r.RunID, err))
		}
	}
	return errors.Join(errs...)
}

// The refusals of a resume and an answer.
var (
	// ErrRunning reports a run this host drives already.
	ErrRunning = errors.New("runhost: the run is being driven by this host already")
	// ErrEnded reports a run whose status records it completed or failed.
	ErrEnded = errors.New("runhost: the run has ended")
	// ErrNotWaiting reports an answer to a step the run is not waiting on.
	ErrNotWaiting = errors.New("runhost: the run is not waiting on that step")
	// ErrBadAnswer reports an answer whose value is not a value a run can take.
	ErrBadAnswer = errors.New("runhost: the answer's value is not a run value")
)

func (h *Host) programPath(runID string) string {
	return filepath.Join(h.cfg.Dir, runID+".cotal.js")
}

// launch takes the run's journal and drives it in the background.
func (h *Host) launch(ctx context.Context, runID, source string, fresh bool) error {
	r, err := h.attach(ctx, runID)
	if err != nil {
		return err
	}
	if err := r.take(ctx, h, source, fresh); err != nil {
		r.close()
		return err
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		r.close()
		return fmt.Errorf("run %s: the host is closing", runID)
	}
	h.runs[runID] = r
	h.wg.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.wg.Done()
		defer r.close()
		r.drive(h.ctx, h, source)
	}()
	return nil
}

// attach mints the run's credentials for a fresh takeover and connects them.
func (h *Host) attach(ctx context.Context, runID string) (*hosted, error) {
	takeover := newTakeoverID()
	r := &hosted{id: runID, takeover: takeover, answers: map[string]chan meshwire.Answer{}, done: make(chan struct{})}
	dc, err := h.cfg.Issuer.RunDriver(h.cfg.Owner, runID, takeover, h.cfg.Serve, h.cfg.CredentialLife)
	if err != nil {
		return nil, err
	}
	mc, err := h.cfg.Issuer.RunMediator(h.cfg.Owner, runID, takeover, h.cfg.Serve, h.cfg.CredentialLife)
	if err != nil {
		return nil, err
	}
	if r.driver, err = h.cfg.Dial(ctx, dc); err != nil {
		return nil, err
	}
	if r.mediator, err = h.cfg.Dial(ctx, mc); err != nil {
		r.driver.Close()
		return nil, err
	}
	if r.js, err = jetstream.New(r.driver); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// newTakeoverID returns 16 random hex characters: one takeover's id, naming its replay durable.
func newTakeoverID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// newRunID mints a run id: run- and 32 random hex characters.
func newRunID() string { return "run-" + newTakeoverID() + newTakeoverID() }

// Status is a hosted run's state as this host knows it: why it ended, when it failed or was
// held; the checkpoints it waits on. Its journal is the mesh's (View).
type Status struct {
	RunID string            `json:"runId"`
	State meshwire.RunState `json:"state"`
	Error string            `json:"error,omitempty"`
	Open  []OpenCheckpoint  `json:"open,omitempty"`
}

// OpenCheckpoint is a checkpoint a run waits on: its step, as the journal prints it, and its
// question.
type OpenCheckpoint struct {
	Step   string `json:"step"`
	Prompt string `json:"prompt"`
}

// Status returns run runID's status; false when this host does not hold it.
func (h *Host) Status(runID string) (Status, bool) {
	h.mu.Lock()
	r := h.runs[runID]
	h.mu.Unlock()
	if r == nil {
		return Status{}, false
	}
	return r.status(), true
}

// Wait waits until run runID ends or ctx does, and returns its status.
func (h *Host) Wait(ctx context.Context, runID string) (Status, error) {
	h.mu.Lock()
	r := h.runs[runID]
	h.mu.Unlock()
	if r == nil {
		return Status{}, fmt.Errorf("run %s is not hosted here", runID)
	}
	select {
	case <-r.done:
		return r.status(), nil
	case <-ctx.Done():
		return Status{}, ctx.Err()
	}
}

// recordsBucket is the records store the run records and answers live in.
func (h *Host) recordsBucket() wire.Bucket { return meshwire.RecordsBucket(h.cfg.Space) }

// readAnswer returns the first answer recorded for a checkpoint token, or nil.
func (h *Host) readAnswer(ctx context.Context, nc *nats.Conn, token string) (*meshwire.Answer, error) {
	b := h.recordsBucket()
	m, err := kvget.ReadFirst(ctx, nc, b.Stream(), b.Subject(meshwire.RecordKey(meshwire.RecordAnswer, h.cfg.Serve.Endpoint, token, "*")))
	if errors.Is(err, kvget.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	a, err := meshwire.ParseAnswer(m.Data)
	if err != nil {
		return nil, fmt.Errorf("the answer to checkpoint %s: %w", token, err)
	}
	return &a, nil
}
