package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// side does a case's work one way: through Cotal or as raw nats.go.
type side interface {
	// round does n units of work and returns once every one of them has arrived.
	round(ctx context.Context, n int) error
}

// stallTimeout fails a round in which nothing arrives for this long.
const stallTimeout = 30 * time.Second

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

// throughput runs rounds of s for about d after a warmup round and returns units per second. A
// round grows until it takes a tenth of d, so that the pauses between rounds stay small.
func throughput(ctx context.Context, s side, d time.Duration) (float64, error) {
	if err := s.round(ctx, warmup); err != nil {
		return 0, fmt.Errorf("warm up: %w", err)
	}
	if t, ok := s.(timed); ok {
		t.stamps().take() // the warmup's latencies are not part of the figure
	}
	n, total, elapsed := 100, 0, time.Duration(0)
	for elapsed < d {
		start := time.Now()
		if err := s.round(ctx, n); err != nil {
			return 0, err
		}
		took := time.Since(start)
		elapsed += took
		total += n
		if took < d/10 {
			n *= 2
		}
	}
	return float64(total) / elapsed.Seconds(), nil
}

// setup connects one side of a case on f, which closes what it connected once the side is
// measured.
type setup func(ctx context.Context, f *fleet) (side, error)

// measure sets up a side, runs it for the run's duration and tears it down, so that the two
// sides of a case never load the broker at the same time.
func (r *runner) measure(ctx context.Context, s setup) (float64, error) {
	f := r.fleet()
	defer f.close()
	sd, err := s(ctx, f)
	if err != nil {
		return 0, err
	}
	return throughput(ctx, sd, r.opts.Duration)
}

// pair measures the Cotal side and then the raw side of a throughput case, and reports them
// with their ratio against a target ratio (zero for none).
func (r *runner) pair(ctx context.Context, name, unit string, cotal, raw setup, target float64) (Result, error) {
	c, err := r.measure(ctx, cotal)
	if err != nil {
		return Result{}, fmt.Errorf("through cotal: %w", err)
	}
	rw, err := r.measure(ctx, raw)
	if err != nil {
		return Result{}, fmt.Errorf("raw: %w", err)
	}
	res := Result{Name: name, Unit: unit, Cotal: c, Raw: rw, Ratio: c / rw}
	if target > 0 {
		res.Target = fmt.Sprintf("ratio ≥ %.2f", target)
		res.Met = met(res.Ratio >= target)
	}
	return res, nil
}

func met(ok bool) *bool { return &ok }
