package runhost

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/lang"
	"github.com/gocotal/cotal/wire"
)

// Issuer mints a run's two credentials for one takeover: the driver's (its journal and records)
// and the mediator's (its reads and effects). The ledger is one.
type Issuer interface {
	RunDriver(owner, runID, takeoverID string, serve *authority.ServeRows, life time.Duration) (*authority.Credential, error)
	RunMediator(owner, runID, takeoverID string, serve *authority.ServeRows, life time.Duration) (*authority.Credential, error)
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

	mu   sync.Mutex
	runs map[string]*hosted
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
	h.stop()
	h.wg.Wait()
}

// Start checks source, mints the run's id, records the run and starts driving it.
func (h *Host) Start(ctx context.Context, source string) (string, error) {
	if r := lang.Check(source); !r.Accepted {
		return "", &lang.RefusedError{Report: r}
	}
	runID := nuid.Next()
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
		return fmt.Errorf("run %s is running on this host", runID)
	}
	if source == "" {
		b, err := os.ReadFile(h.programPath(runID))
		if err != nil {
			return fmt.Errorf("run %s: no program: %w", runID, err)
		}
		source = string(b)
	} else if err := atomicfile.Write(h.programPath(runID), []byte(source), 0o600); err != nil {
		return err
	}
	return h.launch(ctx, runID, source, false)
}

// Recover takes back every run the host's directory holds a program for and that its status
// record does not show ended.
func (h *Host) Recover(ctx context.Context) error {
	names, err := filepath.Glob(filepath.Join(h.cfg.Dir, "*.cotal.js"))
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		runID := filepath.Base(name[:len(name)-len(".cotal.js")])
		if err := h.Resume(ctx, runID, ""); err != nil && !errors.Is(err, errEnded) {
			errs = append(errs, fmt.Errorf("take back run %s: %w", runID, err))
		}
	}
	return errors.Join(errs...)
}

var errEnded = errors.New("the run has ended")

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
	h.runs[runID] = r
	h.mu.Unlock()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer r.close()
		r.drive(h.ctx, h, source)
	}()
	return nil
}

// attach mints the run's credentials for a fresh takeover and connects them.
func (h *Host) attach(ctx context.Context, runID string) (*hosted, error) {
	tk := make([]byte, 8)
	_, _ = rand.Read(tk) // crypto/rand.Read never fails
	takeover := hex.EncodeToString(tk)
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

// Status is a hosted run's state as this host knows it.
type Status struct {
	RunID string            `json:"runId"`
	State meshwire.RunState `json:"state"`
	Error string            `json:"error,omitempty"`
	Value json.RawMessage   `json:"value,omitempty"`
	Steps []lang.Entry      `json:"steps,omitempty"`
	Open  []OpenCheckpoint  `json:"open,omitempty"`
}

// OpenCheckpoint is a checkpoint a run waits on: its step, as the journal prints it, and its
// question.
type OpenCheckpoint struct {
	Step   string `json:"step"`
	Prompt string `json:"prompt"`
}

// Status returns run runID's status, with its steps when steps is set; false when this host
// does not hold it.
func (h *Host) Status(runID string, steps bool) (Status, bool) {
	h.mu.Lock()
	r := h.runs[runID]
	h.mu.Unlock()
	if r == nil {
		return Status{}, false
	}
	return r.status(steps), true
}

// List returns the status of every run this host holds, newest id last.
func (h *Host) List() []Status {
	h.mu.Lock()
	ids := make([]string, 0, len(h.runs))
	for id := range h.runs {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	sort.Strings(ids)
	out := make([]Status, 0, len(ids))
	for _, id := range ids {
		if st, ok := h.Status(id, false); ok {
			out = append(out, st)
		}
	}
	return out
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
		return r.status(true), nil
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
