// Package sessionrail speaks one side of a session's two rails (SPEC §13.6): data frames
// numbered in order, a bounded credit window per direction, credits that reopen it, and the
// advisory close. It grants nothing: the credentials a session's redemption released confine
// each side to its own pair of subjects; the rail enforces the window on both.
//
// A sender may have at most the grant's window of data frames unacknowledged; past it Send
// refuses (ErrWindowFull) rather than buffer. The receiver hands frames to its handler one at a
// time, in order, and advertises its watermark (the count it has taken) every ceil(window/2)
// frames, on every data frame it sends back, and again each idle tick while the peer is quiet,
// so a lost credit heals. A peer that sends past the window it was given, skips a number, or
// sends what is not a rail frame breaks the rail; so does a window that stays full with no
// credit for the stall timeout. A broken rail tears itself down and reports why.
package sessionrail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/coremsg"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// Role is which side of a session a rail speaks for: the caller sends on the in rail and
// receives on the out rail; the serving side the reverse.
type Role int

// The two roles.
const (
	Caller Role = iota
	Serving
)

// Why a rail broke, as Handlers.Broken is told.
const (
	ReasonGarbled   = "garbled-frame"
	ReasonGap       = "gap"
	ReasonOverrun   = "credit-overrun"
	ReasonFlood     = "flood"
	ReasonStall     = "stall"
	ReasonHandler   = "handler"
	ReasonPublish   = "publish"
	ReasonExhausted = "seq-exhausted"
)

// Defaults.
const (
	// DefaultMaxPayload is the largest frame Send publishes, the broker's default payload limit.
	DefaultMaxPayload = 1 << 20
	// DefaultIdleCredit is how often a quiet peer is re-sent the watermark.
	DefaultIdleCredit = time.Second
	// DefaultStall is how long a full window may wait for a credit before the rail breaks.
	DefaultStall = 30 * time.Second
)

// Send's refusals.
var (
	// ErrWindowFull is a full window: the peer has not acknowledged enough frames. Nothing was
	// sent; the frame may be sent again once a credit arrives.
	ErrWindowFull = errors.New("the session's flow window is full")
	// ErrClosed is a rail closed or broken: establish a new session.
	ErrClosed = errors.New("the session rail is closed")
	// ErrTooLarge is a frame past the payload limit.
	ErrTooLarge = errors.New("the session frame is larger than the payload limit")
)

// Config is one rail's session and knobs.
type Config struct {
	Space     wire.Space
	Endpoint  string
	SessionID string
	// Epoch is the serving epoch the rails are pinned to.
	Epoch int64
	// Window is the grant's window, 1 to meshwire.SessionWindowMax.
	Window int
	Role   Role
	// MaxPayload defaults to DefaultMaxPayload.
	MaxPayload int
	// IdleCredit defaults to DefaultIdleCredit; negative disables the re-sent credit.
	IdleCredit time.Duration
	// Stall defaults to DefaultStall; negative disables the stall watchdog.
	Stall time.Duration
	// Retain keeps the frames in flight so Retransmit can send them again: for a caller whose
	// first frames may go out before the serving side's interest reaches its broker.
	Retain bool
}

// Handlers are a rail's callbacks. Data is called from the rail's receiving goroutine; Close and
// Broken from a goroutine of their own, never from a caller's Send or Close, so a handler may
// call any method of the rail except Wait.
type Handlers struct {
	// Data takes one data value, in order, one at a time. The rail credits it once Data returns;
	// an error refuses it and breaks the rail (ReasonHandler).
	Data func(data json.RawMessage, seq int64) error
	// Close is the peer's advisory close, called once Data has taken every frame the peer sent
	// before it; the rail is torn down before it is called.
	Close func()
	// Broken reports why the rail broke; the rail is torn down before it is called.
	Broken func(reason string, err error)
	// Dropped reports a message delivered onto the rail by JetStream (a stored message's
	// subject, not the rail's): never a frame, and dropped unread.
	Dropped func(msg *nats.Msg)
}

// Stats are a rail's counters.
type Stats struct {
	Sent, AckedThrough, Delivered, InFlight int64
}

// Rail is one side of an open session. Open returns it; it is safe for concurrent use.
type Rail struct {
	publish     func(subject string, data []byte) error
	cfg         Config
	h           Handlers
	egress      string
	window      int64
	creditEvery int64

	mu           sync.Mutex
	seq          int64 // last data frame sent
	ackedThrough int64 // the peer's watermark on our frames
	fullSince    time.Time
	credited     chan struct{} // closed and replaced when ackedThrough advances or the rail ends
	inFlight     [][]byte      // with Retain: the encoded frames after ackedThrough
	received     int64         // highest frame accepted into the queue, in order
	delivered    int64         // frames the handler took; the watermark
	advertised   int64         // the highest watermark sent
	sinceCredit  int64
	heard        bool // a data frame arrived since the last tick
	lastHeard    time.Time
	closed       bool // by us or the peer
	peerClosed   bool // the peer's close arrived; closed once the handler has the frames before it
	broken       bool
	tornDown     bool
	report       func() // a break's or close's handler, called by unlock

	sub   *nats.Subscription
	queue chan queued
	done  chan struct{}
	wg    sync.WaitGroup
}

type queued struct {
	seq  int64
	data json.RawMessage
}

// Open subscribes the rail's ingress subject and starts its receiver and timer. The caller
// should flush the connection before it expects the peer to hear it.
func Open(nc *nats.Conn, cfg Config, h Handlers) (*Rail, error) {
	if cfg.Window < 1 || cfg.Window > meshwire.SessionWindowMax {
		return nil, wire.Invalidf("window", fmt.Sprint(cfg.Window), "must be 1 to %d", meshwire.SessionWindowMax)
	}
	egressDir, ingressDir := meshwire.SessionIn, meshwire.SessionOut
	if cfg.Role == Serving {
		egressDir, ingressDir = ingressDir, egressDir
	}
	egress, err := meshwire.SessionRail(cfg.Space, cfg.Endpoint, cfg.SessionID, cfg.Epoch, egressDir)
	if err != nil {
		return nil, err
	}
	ingress, err := meshwire.SessionRail(cfg.Space, cfg.Endpoint, cfg.SessionID, cfg.Epoch, ingressDir)
	if err != nil {
		return nil, err
	}
	if cfg.MaxPayload == 0 {
		cfg.MaxPayload = DefaultMaxPayload
	}
	if cfg.IdleCredit == 0 {
		cfg.IdleCredit = DefaultIdleCredit
	}
	if cfg.Stall == 0 {
		cfg.Stall = DefaultStall
	}
	r := start(cfg, h, egress, nc.Publish)
	r.mu.Lock()
	defer r.unlock()
	if r.sub, err = nc.Subscribe(ingress, r.receive); err != nil {
		r.closed = true
		r.teardownLocked()
		return nil, err
	}
	return r, nil
}

// start makes a rail that publishes through publish and starts its goroutines; Open subscribes
// it.
func start(cfg Config, h Handlers, egress string, publish func(subject string, data []byte) error) *Rail {
	r := &Rail{publish: publish, cfg: cfg, h: h, egress: egress, window: int64(cfg.Window), creditEvery: int64(cfg.Window+1) / 2,
		credited: make(chan struct{}), lastHeard: time.Now(), queue: make(chan queued, cfg.Window), done: make(chan struct{})}
	r.wg.Add(2)
	go r.deliver() // owned: ends at teardown
	go r.tick()    // owned: ends at teardown
	return r
}

// receive takes one message off the ingress rail. The connection calls it for one message at a
// time, in order.
func (r *Rail) receive(msg *nats.Msg) {
	if !coremsg.Published(msg) {
		if r.h.Dropped != nil {
			r.h.Dropped(msg)
		}
		return
	}
	r.take(msg.Data)
}

// take takes one frame.
func (r *Rail) take(raw []byte) {
	f, err := meshwire.DecodeRailFrame(raw)
	r.mu.Lock()
	defer r.unlock()
	if r.closed || r.broken || r.peerClosed {
		return
	}
	r.lastHeard = time.Now()
	switch {
	case err != nil:
		r.breakLocked(ReasonGarbled, err)
	case f.Kind == meshwire.RailCredit:
		r.applyAckLocked(f.Ack)
	case f.Kind == meshwire.RailClose:
		r.peerClosed = true
		r.closeWhenDrainedLocked()
	default:
		r.receiveDataLocked(f)
	}
}

// receiveDataLocked takes a data frame: its piggybacked watermark first, then the frame itself,
// in order or not at all.
func (r *Rail) receiveDataLocked(f *meshwire.RailFrame) {
	if f.HasAck {
		if r.applyAckLocked(f.Ack); r.broken {
			return // a frame that breaks the rail has no effect
		}
	}
	r.heard = true
	switch {
	case f.Seq <= r.received: // a duplicate, or a retransmission of one taken
	case f.Seq > r.received+1:
		r.breakLocked(ReasonGap, fmt.Errorf("expected frame %d, got %d", r.received+1, f.Seq))
	case f.Seq > r.advertised+r.window:
		// Past what this side ever acknowledged plus the window: the peer ignored its credit. As
		// advertised never passes delivered, this also bounds the frames waiting for the handler
		// to the window, the queue's capacity.
		r.breakLocked(ReasonFlood, fmt.Errorf("frame %d is past the window: %d acknowledged, window %d", f.Seq, r.advertised, r.window))
	default:
		r.received = f.Seq
		r.queue <- queued{seq: f.Seq, data: f.Data} // never blocks: fewer than window wait, its capacity
	}
}

// applyAckLocked takes the peer's watermark: monotonic, and never past what was sent.
func (r *Rail) applyAckLocked(ack int64) {
	if ack > r.seq {
		r.breakLocked(ReasonOverrun, fmt.Errorf("the peer acknowledged %d frames, %d were sent", ack, r.seq))
		return
	}
	if ack > r.ackedThrough {
		if r.cfg.Retain {
			r.inFlight = r.inFlight[min(ack-r.ackedThrough, int64(len(r.inFlight))):]
		}
		r.ackedThrough = ack
		r.fullSince = time.Time{}
		close(r.credited)
		r.credited = make(chan struct{})
	}
}

// deliver hands queued frames to the handler, one at a time, and credits what it took.
func (r *Rail) deliver() {
	defer r.wg.Done()
	for {
		select {
		case <-r.done:
			return
		case q := <-r.queue:
			r.mu.Lock()
			ended := r.closed || r.broken
			r.mu.Unlock()
			if ended { // a frame still queued when the rail ended is never handed over
				return
			}
			err := r.h.Data(q.data, q.seq)
			r.mu.Lock()
			switch {
			case r.closed || r.broken: // it ended while the handler ran: nothing is credited
			case err != nil:
				r.breakLocked(ReasonHandler, err)
			case r.peerClosed:
				r.delivered = q.seq
				r.closeWhenDrainedLocked()
			default:
				r.delivered = q.seq
				if r.sinceCredit++; r.sinceCredit >= r.creditEvery {
					r.sinceCredit = 0
					r.creditLocked()
				}
			}
			r.unlock()
		}
	}
}

// closeWhenDrainedLocked closes the rail on the peer's close once the handler has taken every
// frame the peer sent before it, so the close reaches the handler's owner after them.
func (r *Rail) closeWhenDrainedLocked() {
	if r.delivered < r.received {
		return // deliver closes it after the last
	}
	if r.h.Close != nil {
		r.reportLocked(r.h.Close)
	}
	r.closed = true
	r.teardownLocked()
}

// creditLocked sends the watermark.
func (r *Rail) creditLocked() {
	f := meshwire.RailFrame{Kind: meshwire.RailCredit, Ack: r.delivered}
	if err := r.publish(r.egress, f.Encode()); err != nil {
		r.breakLocked(ReasonPublish, err)
		return
	}
	r.advertised = max(r.advertised, r.delivered)
}

// tick runs the stall watchdog and the idle credit.
func (r *Rail) tick() {
	defer r.wg.Done()
	every := r.cfg.IdleCredit
	if every < 0 {
		every = DefaultIdleCredit
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-t.C:
			r.mu.Lock()
			switch {
			case r.closed || r.broken || r.peerClosed:
			case r.cfg.Stall > 0 && !r.fullSince.IsZero() && time.Since(r.fullSince) > r.cfg.Stall:
				r.breakLocked(ReasonStall, fmt.Errorf("the window of %d stayed full for %s with no credit: %d sent, %d acknowledged",
					r.window, time.Since(r.fullSince).Round(time.Second), r.seq, r.ackedThrough))
			case r.cfg.IdleCredit > 0 && !r.heard && r.delivered > 0:
				r.creditLocked()
			}
			r.heard = false
			r.unlock()
		}
	}
}

// Send sends one data value: ErrWindowFull when the window is full, ErrTooLarge past the
// payload limit, ErrClosed once the rail is closed or broken (a publish that fails breaks it).
// It returns the frame's sequence number.
func (r *Rail) Send(data json.RawMessage) (int64, error) {
	r.mu.Lock()
	defer r.unlock()
	return r.sendLocked(data)
}

func (r *Rail) sendLocked(data json.RawMessage) (int64, error) {
	switch {
	case r.closed || r.broken || r.peerClosed:
		return 0, ErrClosed
	case r.seq >= meshwire.MaxSafeInteger-1:
		r.breakLocked(ReasonExhausted, errors.New("the rail used up its sequence numbers"))
		return 0, ErrClosed
	case r.seq-r.ackedThrough >= r.window:
		if r.fullSince.IsZero() {
			r.fullSince = time.Now()
		}
		return 0, ErrWindowFull
	}
	f := meshwire.RailFrame{Kind: meshwire.RailData, Seq: r.seq + 1, Data: data, Ack: r.delivered, HasAck: r.delivered > 0}
	raw := f.Encode()
	if len(raw) > r.cfg.MaxPayload {
		return 0, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(raw), r.cfg.MaxPayload)
	}
	if err := r.publish(r.egress, raw); err != nil {
		r.breakLocked(ReasonPublish, err)
		return 0, fmt.Errorf("%w: %v", ErrClosed, err)
	}
	r.seq++
	r.advertised = max(r.advertised, r.delivered)
	if r.cfg.Retain {
		r.inFlight = append(r.inFlight, raw)
	}
	if r.seq-r.ackedThrough >= r.window && r.fullSince.IsZero() {
		r.fullSince = time.Now()
	}
	return r.seq, nil
}

// SendWait sends one data value, waiting while the window is full, until ctx ends or the rail
// closes or breaks (the stall watchdog breaks a window that never reopens).
func (r *Rail) SendWait(ctx context.Context, data json.RawMessage) (int64, error) {
	for {
		r.mu.Lock()
		seq, err := r.sendLocked(data)
		credited := r.credited
		r.unlock()
		if !errors.Is(err, ErrWindowFull) {
			return seq, err
		}
		select {
		case <-credited:
		case <-r.done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Retransmit sends again, in order, every frame the peer has not acknowledged; the peer takes
// each once. It needs Config.Retain and does nothing without it.
func (r *Rail) Retransmit() {
	r.mu.Lock()
	defer r.unlock()
	if r.closed || r.broken {
		return
	}
	for _, raw := range r.inFlight {
		if err := r.publish(r.egress, raw); err != nil {
			r.breakLocked(ReasonPublish, err)
			return
		}
	}
}

// Close sends the advisory close and tears the rail down. Closing again does nothing.
func (r *Rail) Close() {
	r.mu.Lock()
	defer r.unlock()
	if !r.closed && !r.broken {
		_ = r.publish(r.egress, (&meshwire.RailFrame{Kind: meshwire.RailClose}).Encode()) // advisory: the ledger ends the session
	}
	r.closed = true
	r.teardownLocked()
}

// Wait waits for the rail's goroutines, its handlers' calls among them, after it was closed or
// broke. A handler must not call it.
func (r *Rail) Wait() { r.wg.Wait() }

// Done returns a channel closed when the rail is torn down: closed by either side, or broken.
func (r *Rail) Done() <-chan struct{} { return r.done }

// LastHeard returns when the peer was last heard on the rail, any frame at all.
func (r *Rail) LastHeard() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastHeard
}

// Stats returns the rail's counters.
func (r *Rail) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Stats{Sent: r.seq, AckedThrough: r.ackedThrough, Delivered: r.delivered, InFlight: r.seq - r.ackedThrough}
}

// breakLocked marks the rail broken and tears it down; unlock reports why.
func (r *Rail) breakLocked(reason string, err error) {
	if r.closed || r.broken {
		return
	}
	if r.h.Broken != nil {
		r.reportLocked(func() { r.h.Broken(reason, err) })
	}
	r.broken = true
	r.teardownLocked()
}

// reportLocked leaves fn for unlock to call, counted in the rail's goroutines now, while its
// receiving and timer goroutines still run (they end only at the teardown that follows), so Wait
// never sees the count at zero before it.
func (r *Rail) reportLocked(fn func()) {
	r.wg.Add(1)
	r.report = fn
}

// unlock unlocks r.mu, then makes the report a break or the peer's close left under it, on a
// goroutine of its own: never on a caller's, whose own locks it may hold.
func (r *Rail) unlock() {
	report := r.report
	r.report = nil
	if report != nil {
		go func() { // owned: counted by reportLocked, so Wait waits for it
			defer r.wg.Done()
			report()
		}()
	}
	r.mu.Unlock()
}

// teardownLocked frees the rail's subscription and goroutines, once.
func (r *Rail) teardownLocked() {
	if r.tornDown {
		return
	}
	r.tornDown = true
	if r.sub != nil {
		_ = r.sub.Unsubscribe() // a closed connection has none left to drop
	}
	close(r.done)
	close(r.credited)
	r.credited = make(chan struct{})
}
