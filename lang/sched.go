package lang

import (
	"errors"
	"slices"
	"sync"
	"time"
)

// The scheduler: a run's code runs as coroutines, one at a time, as a JavaScript engine runs a
// program on one thread. The running coroutine holds the baton and passes it only where it
// waits: for an effect, or for the branches of a scope. What runs next is decided, never raced:
// a scope starts its branches in declaration order, each running until it first waits; an
// effect's answer queues its coroutine in the order answers arrive; and under the simulator,
// whose effects take virtual time, an answer lands only when every coroutine waits, the
// earliest landing time first (the declaration order of their asking breaking ties).

// coro is one coroutine: the run's root, or one branch of a scope.
type coro struct {
	resume chan struct{}
	// parent is the coroutine of the scope that started this branch; nil for the root.
	parent *coro
	// lost, on a race's arm, reports that the arm was cut and can no longer win.
	lost func() bool
	// returnTo, while a scope starts this branch, is the coroutine that started it: the branch
	// hands the baton back to it when it first waits or ends, as a JavaScript call of the branch
	// returns at its first await.
	returnTo *coro
}

func newCoro() *coro { return &coro{resume: make(chan struct{}, 1)} }

// timed is a handler whose effects take virtual time (the simulator): it answers at once with
// what an effect costs, and lands the answer when the scheduler's clock reaches it.
type timed interface {
	Handler
	answer(req *Request) (cost int64, land func() (*Outcome, error))
	setNow(t int64)
}

type sched struct {
	mu     sync.Mutex
	holder *coro
	ready  []*coro
	live   int // effects a live handler is performing outside the baton
	parked []*parked
	seq    int
	timed  timed // nil under a live handler
}

// parked is a virtual-time effect waiting to land.
type parked struct {
	co    *coro
	f     *frame
	wake  int64
	seq   int
	land  func() (*Outcome, error)
	out   *Outcome
	err   error
	taken bool // cancelled before it landed
}

// errCancelled is a cancelled branch's unwinding: no catch sees it (spec §7.6).
var errCancelled = &Fault{Code: "cancelled", Message: "the branch was cancelled"}

func (s *sched) give(c *coro) {
	s.holder = c
	c.resume <- struct{}{}
}

// passLocked hands the baton on from c, which stops running: back to the coroutine that started
// it, else to the first ready one, else it lands the earliest virtual-time effect once nothing
// else can run.
func (s *sched) passLocked(c *coro) {
	if r := c.returnTo; r != nil {
		c.returnTo = nil
		s.give(r)
		return
	}
	if len(s.ready) > 0 {
		next := s.ready[0]
		s.ready = s.ready[1:]
		s.give(next)
		return
	}
	s.holder = nil
	s.pumpLocked()
}

// pumpLocked lands the earliest parked effect when no coroutine can run and no live effect is
// out.
func (s *sched) pumpLocked() {
	if s.holder != nil || s.live > 0 || len(s.ready) > 0 || len(s.parked) == 0 {
		return
	}
	i := 0
	for j, p := range s.parked {
		if p.wake < s.parked[i].wake || p.wake == s.parked[i].wake && p.seq < s.parked[i].seq {
			i = j
		}
	}
	p := s.parked[i]
	s.parked = slices.Delete(s.parked, i, i+1)
	if p.wake > s.timed.Now() {
		s.timed.setNow(p.wake)
	}
	p.out, p.err = p.land()
	s.give(p.co)
}

func (s *sched) readyLocked(c *coro) {
	if s.holder == nil {
		s.give(c)
		return
	}
	s.ready = append(s.ready, c)
}

// perform dispatches req for coroutine c in frame f, without the baton, and returns when c holds
// it again.
func (s *sched) perform(in *interp, f *frame, c *coro, req *Request) (*Outcome, error) {
	if s.timed != nil {
		cost, land := s.timed.answer(req)
		return s.park(f, c, cost, land)
	}
	s.mu.Lock()
	s.live++
	s.passLocked(c)
	s.mu.Unlock()
	out, err := in.handler.Perform(f.context(in), req)
	s.mu.Lock()
	s.live--
	s.readyLocked(c)
	s.mu.Unlock()
	<-c.resume
	if f.context(in).Err() != nil && in.ctx.Err() == nil {
		return nil, errCancelled // the branch was cut while its effect was out
	}
	return out, err
}

// park parks c until the virtual clock has moved cost on from now, and lands the answer then.
func (s *sched) park(f *frame, c *coro, cost int64, land func() (*Outcome, error)) (*Outcome, error) {
	p := &parked{co: c, f: f, wake: s.timed.Now() + cost, land: land}
	s.mu.Lock()
	p.seq = s.seq
	s.seq++
	s.parked = append(s.parked, p)
	s.passLocked(c)
	s.mu.Unlock()
	<-c.resume
	if p.taken {
		return nil, errCancelled
	}
	return p.out, p.err
}

// start runs body as child, a new coroutine started from parent: child runs at once, until it
// first waits or ends, and then parent goes on.
func (s *sched) start(parent, child *coro, body func()) {
	child.returnTo = parent
	go func() {
		<-child.resume
		body()
		s.mu.Lock()
		s.passLocked(child)
		s.mu.Unlock()
	}()
	s.mu.Lock()
	s.give(child)
	s.mu.Unlock()
	<-parent.resume
}

// yield passes the baton from the running coroutine to those ready to run, and takes it back
// after them; it returns errCancelled when the coroutine runs under a race's arm that can no
// longer win.
func (s *sched) yield() error {
	s.mu.Lock()
	c := s.holder
	if len(s.ready) == 0 && c.returnTo == nil {
		s.mu.Unlock()
	} else {
		s.ready = append(s.ready, c)
		s.passLocked(c)
		s.mu.Unlock()
		<-c.resume
	}
	for k := c; k != nil; k = k.parent {
		if k.lost != nil && k.lost() {
			return errCancelled
		}
	}
	return nil
}

// wait blocks c until markReady(c): the baton goes on meanwhile.
func (s *sched) wait(c *coro) {
	s.mu.Lock()
	s.passLocked(c)
	s.mu.Unlock()
	<-c.resume
}

// markReady queues c to run again.
func (s *sched) markReady(c *coro) {
	s.mu.Lock()
	s.readyLocked(c)
	s.mu.Unlock()
}

// cancel takes back the parked effects whose frames under reports cut and that keep does not
// keep: they resume cancelled. Called with the baton.
func (s *sched) cancel(under func(*frame) bool, keep func(p *parked) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.parked[:0]
	for _, p := range s.parked {
		if under(p.f) && !keep(p) {
			p.taken = true
			s.ready = append(s.ready, p.co)
			continue
		}
		kept = append(kept, p)
	}
	s.parked = kept
}

// isCancelledErr reports whether err is a branch's cancellation.
func isCancelledErr(err error) bool { return errors.Is(err, errCancelled) }

// pause waits ms for frame f's coroutine without the baton: on the virtual clock under the
// simulator, else in real time (a waitUntil's cadence).
func (s *sched) pause(in *interp, f *frame, ms int64) error {
	if s.timed != nil {
		_, err := s.park(f, f.co, ms, func() (*Outcome, error) { return &Outcome{}, nil })
		return err
	}
	c := f.co
	s.mu.Lock()
	s.live++
	s.passLocked(c)
	s.mu.Unlock()
	ctx := f.context(in)
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	s.mu.Lock()
	s.live--
	s.readyLocked(c)
	s.mu.Unlock()
	<-c.resume
	if ctx.Err() != nil {
		return errCancelled
	}
	return nil
}
