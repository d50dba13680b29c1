package manager

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"
)

// ScrollbackBytes bounds a Terminal's scrollback: the last this many bytes of raw output.
const ScrollbackBytes = 256 << 10

// drainGrace is how long, once a process has exited, its run's reader may go on reading what the
// process wrote before the master is closed under it. The reader normally ends at once, when the
// last holder of the terminal closes it; a leftover process that holds it open is cut off.
const drainGrace = time.Second

// readChunk is the most a run's reader takes from the master at once.
const readChunk = 32 << 10

// Terminal is a PTY agent's terminal, one per agent for its whole life: each run of its process
// (a restart starts a new one) gets a fresh pty, while the scrollback and the window size carry
// on. Taps watch its output; Write types into it. Supervisor.Terminal returns it; its zero value
// is not usable. It is safe for concurrent use.
type Terminal struct {
	name string
	// log, when set, keeps the output in the agent's log file too.
	log *agentLog

	mu sync.Mutex
	// mu guards scroll, cols, rows and run, and the taps of run.
	scroll     ring
	cols, rows uint16
	// run is the pty of the process that runs, or nil between runs and after the last.
	run *ptyRun
}

// ptyRun is one run of the process on its own pty.
type ptyRun struct {
	master *os.File
	// taps are the taps attached during this run and not yet ended; the Terminal's mu guards it.
	taps map[*Tap]struct{}
	// read is closed when the run's reader has ended.
	read chan struct{}
}

func newTerminal(name string) *Terminal {
	return &Terminal{name: name, scroll: ring{buf: make([]byte, ScrollbackBytes)}, cols: defaultCols, rows: defaultRows}
}

// start starts cmd on a new pty at the recorded size and reads its output until the run's end.
func (t *Terminal) start(cmd *exec.Cmd) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	master, err := startOnPTY(cmd, t.cols, t.rows)
	if err != nil {
		return err
	}
	r := &ptyRun{master: master, taps: map[*Tap]struct{}{}, read: make(chan struct{})}
	t.run = r
	go t.read(r) // owned: finish closes the master and waits for it
	return nil
}

// read feeds what the run's process writes to the scrollback and the run's taps, until the
// master reports the end (EIO once no process holds the terminal) or is closed.
func (t *Terminal) read(r *ptyRun) {
	defer close(r.read)
	buf := make([]byte, readChunk)
	var queries queryScanner
	for {
		n, err := r.master.Read(buf)
		if n > 0 {
			chunk := bytes.Clone(buf[:n])
			t.mu.Lock()
			t.scroll.write(chunk)
			for tap := range r.taps {
				tap.offer(chunk)
			}
			attached := len(r.taps) > 0
			t.mu.Unlock()
			if t.log != nil {
				_, _ = t.log.Write(chunk) // a log that cannot be written loses its lines, not the agent
			}
			// With a person attached, their terminal answers what the process asks.
			if answer := queries.answers(chunk); len(answer) > 0 && !attached {
				_, _ = r.master.Write(answer) // a process that ended asks nothing more
			}
		}
		if err != nil {
			return
		}
	}
}

// finish ends the run of a process that has exited: it lets the reader take what the process
// wrote, closes the master and ends the run's taps, once the last of the output has reached
// them.
func (t *Terminal) finish() {
	t.mu.Lock()
	r := t.run
	t.run = nil
	t.mu.Unlock()
	if r == nil {
		return
	}
	drain := time.NewTimer(drainGrace)
	defer drain.Stop()
	select {
	case <-r.read:
	case <-drain.C:
	}
	_ = r.master.Close() // closed once, here; it ends a Read still under way
	<-r.read
	t.mu.Lock()
	defer t.mu.Unlock()
	for tap := range r.taps {
		tap.end()
	}
}

// Attach returns a tap on the terminal's output. Its Snapshot is the scrollback at this moment
// and its Out channel carries every chunk read after it, neither gap nor overlap between them.
// buffer bounds the chunks queued on Out (below 1 counts as 1); a chunk that finds the queue full
// is dropped and counted in Dropped, so a slow tap holds up neither the process nor other taps.
// The tap ends (Done) when the process running now exits, or at once if none runs; a restart
// does not revive it.
func (t *Terminal) Attach(buffer int) *Tap {
	t.mu.Lock()
	defer t.mu.Unlock()
	tap := &Tap{Snapshot: t.scroll.bytes(), t: t, out: make(chan []byte, max(buffer, 1)), done: make(chan struct{})}
	if t.run == nil {
		tap.end()
		return tap
	}
	tap.run = t.run
	t.run.taps[tap] = struct{}{}
	return tap
}

// Write types p into the terminal of the process that runs. It blocks while the process does not
// read its input, until the process ends. With no process running it returns an error wrapping
// ErrNotRunning.
func (t *Terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	r := t.run
	t.mu.Unlock()
	if r == nil {
		return 0, fmt.Errorf("write to %s's terminal: %w", t.name, ErrNotRunning)
	}
	n, err := r.master.Write(p) // outside mu: a blocked write must not hold up the reader
	if errors.Is(err, os.ErrClosed) {
		err = ErrNotRunning // the process ended under the write
	}
	if err != nil {
		return n, fmt.Errorf("write to %s's terminal: %w", t.name, err)
	}
	return n, nil
}

// Resize sets the terminal's window size, in columns and rows: the running process sees it at
// once (SIGWINCH), and each later run starts at it. It returns an error if either is 0, or if the
// running pty refuses it.
func (t *Terminal) Resize(cols, rows uint16) error {
	if cols == 0 || rows == 0 {
		return fmt.Errorf("resize %s's terminal to %dx%d: columns and rows must be positive", t.name, cols, rows)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cols, t.rows = cols, rows
	if t.run == nil {
		return nil
	}
	if err := setSize(t.run.master, cols, rows); err != nil {
		return fmt.Errorf("resize %s's terminal: %w", t.name, err)
	}
	return nil
}

// Size returns the terminal's window size: the last Resize, or 120 columns by 40 rows.
func (t *Terminal) Size() (cols, rows uint16) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cols, t.rows
}

// Tap is one watcher of a Terminal's output, from Attach until Close or the end of the process it
// watches. Terminal.Attach returns it; its zero value is not usable. It is safe for concurrent use.
type Tap struct {
	// Snapshot is the scrollback when the tap attached; Out carries what followed.
	Snapshot []byte

	t       *Terminal
	run     *ptyRun // nil when attached with no process running
	out     chan []byte
	done    chan struct{}
	dropped atomic.Int64
	// ended is set when done is closed; the Terminal's mu guards it.
	ended bool
}

// Out returns the channel of output chunks read after the snapshot, in order. It is never
// closed: once Done is closed no chunk is added, so what is still queued can be drained without
// blocking. Receivers must not modify a chunk; every tap shares it.
func (tap *Tap) Out() <-chan []byte { return tap.out }

// Done returns a channel closed when the process the tap watches has exited and its last output
// is queued on Out, or when the tap is closed.
func (tap *Tap) Done() <-chan struct{} { return tap.done }

// Dropped returns the bytes dropped because Out was full since the last call, and resets the
// count.
func (tap *Tap) Dropped() int64 { return tap.dropped.Swap(0) }

// Close detaches the tap and closes Done. Closing a tap again does nothing.
func (tap *Tap) Close() {
	tap.t.mu.Lock()
	defer tap.t.mu.Unlock()
	tap.end()
}

// offer queues chunk on Out, or counts it as dropped if Out is full. The Terminal's mu is held.
func (tap *Tap) offer(chunk []byte) {
	select {
	case tap.out <- chunk:
	default:
		tap.dropped.Add(int64(len(chunk)))
	}
}

// end detaches the tap and closes Done, once. The Terminal's mu is held.
func (tap *Tap) end() {
	if tap.ended {
		return
	}
	tap.ended = true
	if tap.run != nil {
		delete(tap.run.taps, tap)
	}
	close(tap.done)
}

// ring is a bounded scrollback: the last len(buf) bytes written.
type ring struct {
	buf  []byte
	pos  int  // where the next byte goes
	full bool // whether buf has wrapped: the oldest byte is at pos
}

func (r *ring) write(p []byte) {
	size := len(r.buf)
	if len(p) >= size {
		copy(r.buf, p[len(p)-size:])
		r.pos, r.full = 0, true
		return
	}
	n := copy(r.buf[r.pos:], p)
	copy(r.buf, p[n:])
	r.full = r.full || r.pos+len(p) >= size
	r.pos = (r.pos + len(p)) % size
}

// bytes returns a copy of the scrollback, oldest byte first.
func (r *ring) bytes() []byte {
	if !r.full {
		return bytes.Clone(r.buf[:r.pos])
	}
	return append(bytes.Clone(r.buf[r.pos:]), r.buf[:r.pos]...)
}
