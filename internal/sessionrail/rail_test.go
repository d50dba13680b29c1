package sessionrail_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/sessionrail"
	"github.com/gocotal/cotal/wire"
)

const space = wire.Space("railtest")

// session is one session's rails on a plain embedded broker.
type session struct {
	t        *testing.T
	nc       *nats.Conn
	id       string
	in, out  string
	received chan frame
}

type frame struct {
	seq  int64
	data string
}

// end records how one side's rail ended.
type end struct {
	mu     sync.Mutex
	reason string
	err    error
	closed bool
	done   chan struct{}
}

func newEnd() *end { return &end{done: make(chan struct{})} }

func (e *end) handlers(got chan<- frame) sessionrail.Handlers {
	return sessionrail.Handlers{
		Data: func(data json.RawMessage, seq int64) error {
			got <- frame{seq, string(data)}
			return nil
		},
		Close: func() { e.mu.Lock(); e.closed = true; e.mu.Unlock(); close(e.done) },
		Broken: func(reason string, err error) {
			e.mu.Lock()
			e.reason, e.err = reason, err
			e.mu.Unlock()
			close(e.done)
		},
	}
}

func (e *end) wait(t *testing.T, within time.Duration) (string, bool) {
	t.Helper()
	select {
	case <-e.done:
	case <-time.After(within):
		t.Fatalf("the rail did not end within %s", within)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reason, e.closed
}

func newSession(t *testing.T) *session {
	url := meshtest.StartBroker(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	id := meshwire.NewSessionID()
	in, _ := meshwire.SessionRail(space, "manager", id, 3, meshwire.SessionIn)
	out, _ := meshwire.SessionRail(space, "manager", id, 3, meshwire.SessionOut)
	return &session{t: t, nc: nc, id: id, in: in, out: out}
}

func (s *session) config(role sessionrail.Role, window int) sessionrail.Config {
	return sessionrail.Config{Space: space, Endpoint: "manager", SessionID: s.id, Epoch: 3, Window: window, Role: role}
}

func (s *session) open(cfg sessionrail.Config, h sessionrail.Handlers) *sessionrail.Rail {
	s.t.Helper()
	r, err := sessionrail.Open(s.nc, cfg, h)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { r.Close(); r.Wait() })
	if err := s.nc.Flush(); err != nil {
		s.t.Fatal(err)
	}
	return r
}

func value(i int) json.RawMessage { return json.RawMessage(strconv.Itoa(i)) }

// expect reads n frames and checks they are 1..n in order, each carrying its own number.
func expect(t *testing.T, got <-chan frame, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		select {
		case f := <-got:
			if f.seq != int64(i) || f.data != strconv.Itoa(i) {
				t.Fatalf("frame %d arrived as seq %d carrying %s", i, f.seq, f.data)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("frame %d never arrived", i)
		}
	}
}

func TestDuplexFlowCyclesCredits(t *testing.T) {
	s := newSession(t)
	const n = 200
	toServing, toCaller := make(chan frame, n), make(chan frame, n)
	serving := s.open(s.config(sessionrail.Serving, 4), newEnd().handlers(toServing))
	caller := s.open(s.config(sessionrail.Caller, 4), newEnd().handlers(toCaller))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make(chan error, 2)
	for _, r := range []*sessionrail.Rail{serving, caller} {
		go func() {
			for i := 1; i <= n; i++ {
				if _, err := r.SendWait(ctx, value(i)); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	expect(t, toServing, 1, n)
	expect(t, toCaller, 1, n)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	meshtest.Eventually(t, 5*time.Second, "both windows drain", func() bool {
		return serving.Stats().InFlight == 0 && caller.Stats().InFlight == 0
	})
	if st := caller.Stats(); st.Sent != n || st.Delivered != n {
		t.Errorf("caller stats %+v", st)
	}
}

func TestAFullWindowRefusesAndAStalledOneBreaks(t *testing.T) {
	s := newSession(t)
	cfg := s.config(sessionrail.Serving, 4)
	cfg.Stall = 500 * time.Millisecond
	cfg.IdleCredit = 100 * time.Millisecond
	ended := newEnd()
	serving := s.open(cfg, ended.handlers(make(chan frame, 1)))
	// The caller's side is a bare subscriber: it takes the frames and never credits them.
	var mu sync.Mutex
	var seen []string
	sub, err := s.nc.Subscribe(s.out, func(m *nats.Msg) { mu.Lock(); seen = append(seen, string(m.Data)); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	for i := 1; i <= 4; i++ {
		if _, err := serving.Send(value(i)); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	if _, err := serving.Send(value(5)); !errors.Is(err, sessionrail.ErrWindowFull) {
		t.Fatalf("a fifth frame in a window of 4 = %v, want ErrWindowFull", err)
	}
	reason, _ := ended.wait(t, 5*time.Second)
	if reason != sessionrail.ReasonStall {
		t.Fatalf("the rail broke for %q, want %q", reason, sessionrail.ReasonStall)
	}
	if _, err := serving.Send(value(6)); !errors.Is(err, sessionrail.ErrClosed) {
		t.Errorf("a send on a stalled rail = %v, want ErrClosed", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 4 || seen[0] != `{"t":"f","seq":1,"data":1}` {
		t.Errorf("the out rail carried %q", seen)
	}
}

// TestAPeerOutOfProtocolBreaksTheRail sends by hand what an honest peer never sends.
func TestAPeerOutOfProtocolBreaksTheRail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		frames []string
		want   string
	}{
		{"a gap", []string{`{"t":"f","seq":2,"data":1}`}, sessionrail.ReasonGap},
		{"not a frame", []string{`{"k":"data","b":"aGk="}`}, sessionrail.ReasonGarbled},
		{"an unknown member", []string{`{"t":"credit","ack":0,"more":1}`}, sessionrail.ReasonGarbled},
		{"an ack of frames never sent", []string{`{"t":"credit","ack":1}`}, sessionrail.ReasonOverrun},
		{"a piggybacked overrun", []string{`{"t":"f","seq":1,"data":1,"ack":9}`}, sessionrail.ReasonOverrun},
		{"frames past the window", floodOf(3), sessionrail.ReasonFlood},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t)
			ended := newEnd()
			got := make(chan frame, 8)
			h := ended.handlers(got)
			block := make(chan struct{})
			defer close(block)
			h.Data = func(data json.RawMessage, seq int64) error { got <- frame{seq, string(data)}; <-block; return nil }
			s.open(s.config(sessionrail.Serving, 2), h)
			for _, f := range tc.frames {
				if err := s.nc.Publish(s.in, []byte(f)); err != nil {
					t.Fatal(err)
				}
			}
			if reason, _ := ended.wait(t, 5*time.Second); reason != tc.want {
				t.Fatalf("the rail broke for %q, want %q", reason, tc.want)
			}
			if tc.want == sessionrail.ReasonOverrun && len(got) != 0 {
				t.Errorf("a frame that broke the rail reached the handler")
			}
		})
	}
}

func floodOf(n int) []string {
	var fs []string
	for i := 1; i <= n; i++ {
		fs = append(fs, fmt.Sprintf(`{"t":"f","seq":%d,"data":%d}`, i, i))
	}
	return fs
}

func TestTheIdleCreditHealsALostCredit(t *testing.T) {
	s := newSession(t)
	cfg := s.config(sessionrail.Serving, 8) // a credit every 4 frames
	cfg.IdleCredit = 50 * time.Millisecond
	got := make(chan frame, 8)
	s.open(cfg, newEnd().handlers(got))
	caller := s.open(s.config(sessionrail.Caller, 8), newEnd().handlers(make(chan frame, 8)))
	if _, err := caller.Send(value(1)); err != nil {
		t.Fatal(err)
	}
	expect(t, got, 1, 1)
	meshtest.Eventually(t, 5*time.Second, "a quiet receiver re-sends its watermark", func() bool {
		return caller.Stats().AckedThrough == 1
	})
}

func TestCloseReachesThePeerAndDuplicatesAreTakenOnce(t *testing.T) {
	s := newSession(t)
	// The caller sends before the serving side listens: those frames are lost, and sent again.
	cfg := s.config(sessionrail.Caller, 4)
	cfg.Retain = true
	callerEnd := newEnd()
	caller := s.open(cfg, callerEnd.handlers(make(chan frame, 1)))
	for i := 1; i <= 3; i++ {
		if _, err := caller.Send(value(i)); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan frame, 8)
	servingEnd := newEnd()
	serving := s.open(s.config(sessionrail.Serving, 4), servingEnd.handlers(got))
	caller.Retransmit()
	caller.Retransmit()
	expect(t, got, 1, 3)
	if _, err := caller.Send(value(4)); err != nil {
		t.Fatal(err)
	}
	expect(t, got, 4, 1)
	select {
	case f := <-got:
		t.Fatalf("frame %d was taken twice", f.seq)
	case <-time.After(200 * time.Millisecond):
	}
	serving.Close()
	if _, closed := callerEnd.wait(t, 5*time.Second); !closed {
		t.Fatal("the caller did not hear the close")
	}
	if _, err := caller.Send(value(5)); !errors.Is(err, sessionrail.ErrClosed) {
		t.Errorf("a send after the peer closed = %v, want ErrClosed", err)
	}
	if _, err := serving.Send(value(1)); !errors.Is(err, sessionrail.ErrClosed) {
		t.Errorf("a send after closing = %v, want ErrClosed", err)
	}
}

func TestAFrameOverThePayloadLimitIsRefused(t *testing.T) {
	s := newSession(t)
	cfg := s.config(sessionrail.Caller, 4)
	cfg.MaxPayload = 64
	r := s.open(cfg, newEnd().handlers(make(chan frame, 1)))
	big, _ := json.Marshal(string(make([]byte, 64)))
	if _, err := r.Send(big); !errors.Is(err, sessionrail.ErrTooLarge) {
		t.Fatalf("Send = %v, want ErrTooLarge", err)
	}
	if st := r.Stats(); st.Sent != 0 {
		t.Errorf("a refused frame used a sequence number: %+v", st)
	}
}

func TestOpenRefusesABadWindow(t *testing.T) {
	s := newSession(t)
	for _, w := range []int{0, meshwire.SessionWindowMax + 1} {
		if _, err := sessionrail.Open(s.nc, s.config(sessionrail.Caller, w), sessionrail.Handlers{}); err == nil {
			t.Errorf("window %d was taken", w)
		}
	}
}
