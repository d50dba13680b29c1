package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// side does a case's work one way: through Cotal or as raw nats.go.
type side interface {
	// round does n units of work and returns once every one of them has arrived.
	round(ctx context.Context, n int) error
}

// arrivals counts what a round must see arrive: a counter, or once for exactly-once work.
type arrivals interface {
	expect(n int)
	wait(ctx context.Context) error
}

// sendSide is a side that sends its messages one at a time and then waits for what they owe:
// per arrivals each message (one per subscriber of a multicast), timing each if lat is set.
type sendSide struct {
	send func(ctx context.Context) error
	got  arrivals
	per  int
	lat  *stamps
}

func (s *sendSide) round(ctx context.Context, n int) error {
	s.got.expect(n * s.per)
	if s.lat != nil {
		s.lat.reset(n)
	}
	for i := range n {
		if s.lat != nil {
			s.lat.send(i)
		}
		if err := s.send(ctx); err != nil {
			return err
		}
	}
	return s.got.wait(ctx)
}

func (s *sendSide) stamps() *stamps { return s.lat }

// rawPublish publishes body to subject through JetStream with a fresh Nats-Msg-Id, as the SDK
// publishes a message with its id.
func rawPublish(js jetstream.JetStream, subject string, body []byte) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := js.Publish(ctx, subject, body, jetstream.WithMsgID(wire.NewMessageID()))
		return err
	}
}

// stallTimeout fails a round in which nothing arrives for this long: past the consumers'
// AckWait, so that a delivery lost in flight is redelivered before the round is called stalled.
const stallTimeout = meshwire.AckWait + 15*time.Second

// counter counts arrivals and signals when a round's target is reached.
type counter struct {
	n, want atomic.Int64
	done    chan struct{}
}

func newCounter() *counter { return &counter{done: make(chan struct{}, 1)} }

// expect starts a round that ends at n arrivals.
func (c *counter) expect(n int) {
	select {
	case <-c.done:
	default:
	}
	c.n.Store(0)
	c.want.Store(int64(n))
}

// next is the 0-based index in the round of the next arrival.
func (c *counter) next() int64 { return c.n.Load() }

// add counts one arrival.
func (c *counter) add() {
	if c.n.Add(1) == c.want.Load() {
		c.done <- struct{}{}
	}
}

// wait returns once the round's target is reached, or fails when arrivals stall.
func (c *counter) wait(ctx context.Context) error {
	last := c.n.Load()
	t := time.NewTicker(stallTimeout)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			now := c.n.Load()
			if now == last {
				return fmt.Errorf("stalled: %d of %d arrived, none in %s", now, c.want.Load(), stallTimeout)
			}
			last = now
		}
	}
}

// timed is a side that records each message's latency.
type timed interface{ stamps() *stamps }

// stamps records when each message of a round was sent, so that the receiver can time it. A
// round's messages arrive in the order they were sent (one publisher, one stream, one consumer).
type stamps struct {
	sent []atomic.Int64
	mu   sync.Mutex
	lat  []time.Duration
}

// reset prepares for a round of n messages.
func (s *stamps) reset(n int) {
	if cap(s.sent) < n {
		s.sent = make([]atomic.Int64, n)
	}
	s.sent = s.sent[:n]
}

func (s *stamps) send(i int) { s.sent[i].Store(time.Now().UnixNano()) }

// arrived records the latency of the round's i-th message.
func (s *stamps) arrived(i int64) {
	if i < 0 || int(i) >= len(s.sent) {
		return
	}
	d := time.Duration(time.Now().UnixNano() - s.sent[i].Load())
	s.mu.Lock()
	s.lat = append(s.lat, d)
	s.mu.Unlock()
}

// take returns the latencies recorded so far and forgets them.
func (s *stamps) take() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lat
	s.lat = nil
	return l
}

// percentiles of lat, in microseconds.
func percentiles(lat []time.Duration) Percentiles {
	if len(lat) == 0 {
		return Percentiles{}
	}
	slices.Sort(lat)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(lat)))) - 1
		return float64(lat[max(i, 0)]) / float64(time.Microsecond)
	}
	return Percentiles{P50: at(0.50), P99: at(0.99), P999: at(0.999)}
}

// warmup is the round run before measuring, so connections, consumers and caches are hot.
const warmup = 200

// warm runs a side's warmup round and forgets its latencies.
func warm(ctx context.Context, s side) error {
	if err := s.round(ctx, warmup); err != nil {
		return fmt.Errorf("warm up: %w", err)
	}
	if t, ok := s.(timed); ok && t.stamps() != nil {
		t.stamps().take() // the warmup's latencies are not part of the figure
	}
	return nil
}

// setup connects one side of a case on f, which closes what it connected after the case. The
// two sides of a case use apart channels, recipients or roles, so that neither receives the
// other's traffic.
type setup func(ctx context.Context, f *fleet) (side, error)

// pair measures a throughput case: both sides set up and warmed up, then rounds of the same size
// that alternate between them for about twice the run's duration in all, so that a drift in the
// machine's speed falls on both alike, and never both at once. A round grows until a pair of
// them takes a tenth of the duration, so the pauses between rounds stay small. It reports each
// side's units per second of its own rounds, with their ratio against a target (zero: none).
func (r *runner) pair(ctx context.Context, name, unit string, cotal, raw setup, target float64) (Result, error) {
	f := r.fleet()
	defer f.close()
	sides := [2]side{}
	for i, s := range []setup{cotal, raw} {
		sd, err := s(ctx, f)
		if err != nil {
			return Result{}, fmt.Errorf("%s: %w", sideNames[i], err)
		}
		if err := warm(ctx, sd); err != nil {
			return Result{}, fmt.Errorf("%s: %w", sideNames[i], err)
		}
		sides[i] = sd
	}
	d := r.opts.Duration
	var took [2]time.Duration
	n, units := 100, 0
	for took[0]+took[1] < 2*d {
		var pairTook time.Duration
		for i, sd := range sides {
			start := time.Now()
			if err := sd.round(ctx, n); err != nil {
				return Result{}, fmt.Errorf("%s: %w", sideNames[i], err)
			}
			t := time.Since(start)
			took[i] += t
			pairTook += t
		}
		units += n
		if pairTook < d/10 {
			n *= 2
		}
	}
	c, rw := float64(units)/took[0].Seconds(), float64(units)/took[1].Seconds()
	res := Result{Name: name, Unit: unit, Cotal: c, Raw: rw, Ratio: c / rw}
	if target > 0 {
		res.Target = fmt.Sprintf("ratio ≥ %.2f", target)
		res.Met = met(res.Ratio >= target)
	}
	return res, nil
}

// sideNames name the sides of a pair in errors.
var sideNames = [2]string{"through cotal", "raw"}

func met(ok bool) *bool { return &ok }
