package lang

import (
	"context"
	"errors"
)

// The branches of a concurrency scope (spec §7): each runs as a coroutine in a frame of its own,
// started in declaration order. A parallel or fanOut fails with its first failure, which cancels
// the rest; a race is won by the settled arm with the least logical settlement time, equal times
// going to declaration order, and its settling cancels the others.

// arm is one branch's outcome.
type arm struct {
	v     Value
	clock int64
	err   error
	done  bool
}

// arms are a scope's branches' outcomes.
type arms struct {
	res []arm
	// failed is the first branch to fail, in the order failures happened; -1 when none did.
	failed int
	// fatal is a run-level fault a branch met (a divergence, a refused append, a release): it
	// unwinds the run ahead of any decision, and the scope settles nothing.
	fatal error
	// winner is a race's winner; -1 when no arm settled.
	winner int
	// clock is the joined branch clock: the greatest of every arm's, a cut arm's landings
	// included.
	clock int64
}

// others are the keys of every branch but i.
func (a *arms) others(keys []string, i int) []string {
	var out []string
	for j, k := range keys {
		if j != i {
			out = append(out, k)
		}
	}
	return out
}

// cut reports whether an arm was cut: with no failure of the scope's own, the scope itself was
// cut from outside.
func (a *arms) cut() bool {
	for _, r := range a.res {
		if isCancelledErr(r.err) {
			return true
		}
	}
	return false
}

// fault is a run-level fault one arm met, when no arm settled.
func (a *arms) fault() error {
	for _, r := range a.res {
		if r.err != nil && !isCancelledErr(r.err) {
			return r.err
		}
	}
	return errCancelled
}

// runArms runs branches concurrently from frame f and returns once every one has settled or been
// cut.
func (in *interp) runArms(f *frame, scopeKey string, branches []branch, race bool) *arms {
	a := &arms{res: make([]arm, len(branches)), failed: -1, winner: -1, clock: f.clock}
	frames := make([]*frame, len(branches))
	parent := f.co
	running, joined := 0, false
	for i, b := range branches {
		if a.failed >= 0 {
			a.res[i] = arm{err: errCancelled, done: true} // never started: a failure came first
			continue
		}
		cf := newFrame(f, scopeKey+"/b:"+b.key, f.clock, true)
		cf.co = newCoro()
		cf.co.parent = f.co
		if race {
			cf.co.lost = func() bool {
				w := a.winner
				return cf.cancelled && w >= 0 && w != i && (cf.clock > a.res[w].clock || cf.clock == a.res[w].clock && i > w)
			}
		}
		cf.ctx, cf.end = context.WithCancel(f.context(in))
		frames[i] = cf
		running++
		in.sched.start(parent, cf.co, func() {
			v, err := in.callValue(cf, b.fn, b.args)
			a.res[i] = arm{v: v, clock: cf.clock, err: err, done: true}
			running--
			in.settled(a, frames, i, race)
			if running == 0 && joined {
				in.sched.markReady(parent)
			}
		})
	}
	if running > 0 {
		joined = true
		in.sched.wait(parent)
	}
	for _, cf := range frames {
		if cf != nil {
			cf.end()
			a.clock = max(a.clock, cf.clock) // a cut arm's landings count toward the join too
		}
	}
	return a
}

// settled takes branch i's outcome into its scope's decision, holding the baton.
func (in *interp) settled(a *arms, frames []*frame, i int, race bool) {
	r := a.res[i]
	var stop uncatchable
	switch {
	case isCancelledErr(r.err):
		return // a cut arm is no candidate
	case errors.As(r.err, &stop):
		if a.fatal == nil {
			a.fatal = r.err
		}
		// A run-level fault cancels no sibling's work in flight: each runs to its next boundary,
		// where it stops, and the journal stays where the fault left it.
		for j, cf := range frames {
			if j != i && cf != nil {
				cf.cancelled = true
			}
		}
		return
	case !race:
		if r.err != nil && a.failed < 0 {
			a.failed = i
			in.cut(frames, i, func(*parked) bool { return false })
		}
		return
	}
	// A race: the earliest settled arm wins; a later settle with an earlier clock re-decides.
	if a.winner < 0 || r.clock < a.res[a.winner].clock || r.clock == a.res[a.winner].clock && i < a.winner {
		a.winner = i
	}
	t, w := a.res[a.winner].clock, a.winner
	// Every sibling performs no new effect; one whose effect in flight lands after t, or at t
	// from an arm declared after the winner, can no longer win and is cut.
	in.cut(frames, w, func(p *parked) bool {
		j := armOf(frames, p.f)
		return p.wake < t || p.wake == t && j < w
	})
}

// cut cancels every branch but keep: it starts no new effect, and its parked effects that the
// keep function does not keep are taken back.
func (in *interp) cut(frames []*frame, keep int, keepParked func(*parked) bool) {
	for j, cf := range frames {
		if j == keep || cf == nil {
			continue
		}
		cf.cancelled = true
	}
	if in.sched.timed == nil {
		for j, cf := range frames {
			if j != keep && cf != nil {
				cf.end() // live effects in flight are the handler's to abandon
			}
		}
		return
	}
	in.sched.cancel(func(pf *frame) bool {
		j := armOf(frames, pf)
		return j >= 0 && j != keep
	}, keepParked)
}

// armOf returns the index of the branch frame f runs under, or -1.
func armOf(frames []*frame, f *frame) int {
	for j, cf := range frames {
		if cf != nil && f.under(cf) {
			return j
		}
	}
	return -1
}
