// Package warden guards one space against what its credentials' grants cannot stop by subject
// alone. NATS checks the subject a client publishes to, never the reply or deliver subject it
// names: JetStream then publishes its acknowledgement, its API response or a consumer's stored
// messages to that subject from its own internal client, and whatever stream or bucket of the
// space captures it stores it. An acknowledgement or API response lands under the subject named;
// a consumer delivery keeps its message's own subject, so it lands in the capturing stream under a
// subject that stream does not take. The warden runs beside the delivery daemon on its own
// credential (authority.ProfileWarden) and
//
//   - audits every JetStream API call of the space's account: a consumer created beyond its
//     creator's quota, or delivering to a subject its creator may not publish to, is deleted and
//     the creator's credential revoked (consumers.go);
//   - reads every message the space's message streams store and deletes, by sequence, each one
//     stored under a subject its stream does not take, and each channel post, direct message or
//     task the receive guard refuses, naming the principal that caused it where the message
//     shows it (streams.go);
//   - watches every bucket of the space, keeps each key's last valid row, and puts it back (while
//     it is still alive) over a row that has the shape only a JetStream reply has, or removes
//     such a row when the key had none; and undoes a write that rolled up a whole bucket by
//     putting back every row it wiped (buckets.go);
//   - revokes every credential of a principal a finding proves guilty: the sender of the message
//     a stored publish acknowledgement names, or the writer of a key that rolled its bucket up
//     (culprit.go).
//
// What it finds is logged one line a second per store and kind of cause (loglimit.go).
//
// Rows, inbox entries, hand-offs and journal records are judged only by shapes no writer of any
// version stores; readers hold them to their own types. Messages are judged by the receive
// guard every reader applies, so what is deleted is what no reader would surface.
package warden

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/gocotal/cotal/wire"
)

// RevokeFunc revokes the credential whose user public key is userKey, at the broker and in the
// ledger, recording reason. It returns the principal the credential was issued to.
type RevokeFunc func(ctx context.Context, userKey, reason string) (principal string, err error)

// Config configures a Warden. Space is required.
type Config struct {
	// Space is the space the warden guards.
	Space wire.Space
	// Log receives what the warden finds and repairs; discarded when nil.
	Log *slog.Logger
	// Revoke, when set, revokes an offender's credential; when nil offenders are only logged.
	Revoke RevokeFunc
	// RevokeSender, when set, revokes every credential of a principal proven to have aimed a
	// JetStream reply at a store; when nil such senders are only logged.
	RevokeSender func(ctx context.Context, p wire.Principal, reason string) (int, error)
	// ConsumerQuota is how many consumers one credential may hold on the space's streams at once;
	// DefaultConsumerQuota when zero.
	ConsumerQuota int
	// UnservedBytes, UnservedMessages and UnservedAge bound the mail waiting for each recipient or
	// role no consumer takes, and UnservedTotalBytes all of it (unserved.go); the Default values
	// when zero.
	UnservedBytes      int64
	UnservedMessages   int
	UnservedAge        time.Duration
	UnservedTotalBytes int64
}

// Warden guards one space. It is created by New and runs until Run's context ends. It is safe
// for concurrent use.
type Warden struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg Config
	log *slog.Logger

	pending atomic.Int32 // loops not yet watching
	readyCh chan struct{}

	rows     rows
	expiries sync.WaitGroup // restored rows' scheduled expiries (buckets.go expireAt)
	streamHandles
	logs     logLimiter
	deleted  deletedSubjects
	unserved unservedMail

	revokedMu sync.Mutex
	revokedAt map[wire.Principal]time.Time // guarded by revokedMu: senders punish revoked lately

	noticedMu sync.Mutex
	noticedAt map[wire.Principal]time.Time // guarded by noticedMu: senders notify told lately
}

// parts is how many loops Run starts; each reports once when it is watching.
const parts = 3

// New returns a warden on nc, a connection holding a warden credential of cfg.Space. It returns
// an error for a missing space or a connection whose JetStream context cannot be made.
func New(nc *nats.Conn, cfg Config) (*Warden, error) {
	if _, err := wire.ParseSpace(string(cfg.Space)); err != nil {
		return nil, err
	}
	if nc == nil {
		return nil, errors.New("warden: a connection is required")
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	if cfg.ConsumerQuota <= 0 {
		cfg.ConsumerQuota = DefaultConsumerQuota
	}
	if cfg.UnservedBytes <= 0 {
		cfg.UnservedBytes = DefaultUnservedBytes
	}
	if cfg.UnservedMessages <= 0 {
		cfg.UnservedMessages = DefaultUnservedMessages
	}
	if cfg.UnservedAge <= 0 {
		cfg.UnservedAge = DefaultUnservedAge
	}
	if cfg.UnservedTotalBytes <= 0 {
		cfg.UnservedTotalBytes = DefaultUnservedTotalBytes
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Warden{
		nc: nc, js: js, cfg: cfg, log: log.With("space", string(cfg.Space)), readyCh: make(chan struct{}),
		streamHandles: streamHandles{streams: map[string]jetstream.Stream{}}, revokedAt: map[wire.Principal]time.Time{},
		noticedAt: map[wire.Principal]time.Time{},
	}
	w.pending.Store(parts)
	return w, nil
}

// Run guards the space until ctx ends or a loop fails; it returns nil when ctx ended.
func (w *Warden) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return w.auditConsumers(gctx) })
	g.Go(func() error { return w.guardStreams(gctx) })
	g.Go(func() error { return w.guardBuckets(gctx) })
	g.Go(func() error { return w.watchConnection(gctx) })
	g.Go(func() error { w.sweepUnserved(gctx); return nil })
	err := g.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// connectionCheck is how often Run checks that its connection is still open.
const connectionCheck = time.Second

// watchConnection returns ErrConnectionClosed once the connection closes, nil when ctx ends.
func (w *Warden) watchConnection(ctx context.Context) error {
	t := time.NewTicker(connectionCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if w.nc.IsClosed() {
				return ErrConnectionClosed
			}
		}
	}
}

// Ready is closed once every loop of Run is watching: what is stored from then on is judged.
func (w *Warden) Ready() <-chan struct{} { return w.readyCh }

// watching is called by each loop exactly once, when it is in place.
func (w *Warden) watching() {
	if w.pending.Add(-1) == 0 {
		close(w.readyCh)
	}
}
