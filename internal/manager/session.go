package manager

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/sessiongrant"
	"github.com/gocotal/cotal/internal/sessionrail"
	"github.com/gocotal/cotal/wire"
)

// Attach sessions (SPEC §13.6): attach answers with a grant for a session the manager has already
// redeemed through the ledger for the caller's lifecycle; the manager serves its half on the
// session-serving credential the ledger releases to it, bridging the agent's terminal to the
// session's rails; the holder takes its half through the same ledger. Ending the session, from
// either side or by expiry, is the ledger's close: the row goes terminal and both halves are
// refused by the broker.

// SessionAuthority is the trusted path the manager establishes and ends sessions through: the
// mesh's ledger, or for a remote manager its host's, reached through the host.
type SessionAuthority interface {
	// SessionHolder returns the lifecycle that holds a session caller asks for, and its epoch.
	SessionHolder(ctx context.Context, caller wire.Lifecycle) (wire.Lifecycle, int64, error)
	// RedeemSession establishes a session: its row active, both halves staged. It returns the
	// session's grant, signed.
	RedeemSession(ctx context.Context, req authstore.SessionRequest) (*SessionGrant, error)
	// SessionServing releases a session's serving half to the instance that serves it.
	SessionServing(ctx context.Context, sessionID string, instance wire.LifecycleUID, epoch int64) (*authority.Credential, error)
	// CloseSession ends a session and has the broker refuse the halves the ledger released.
	CloseSession(ctx context.Context, sessionID string, closer authstore.SessionCloser, to authstore.SessionState) error
}

// Session limits.
const (
	// DefaultMaxSessions is a manager's ceiling of concurrent sessions.
	DefaultMaxSessions = 64
	// SessionLifetime is how long a session's grant and credentials live; a reconnect asks for a
	// fresh one.
	SessionLifetime = 12 * time.Hour
	// tapBuffer bounds the output chunks queued for a session's bridge; past it output is dropped
	// and reported in a drop frame, as is output the holder's flow window has no room for. It
	// bounds the keystrokes queued for an agent that does not read its input the same way.
	tapBuffer = 256
	// SessionIdle ends a session whose holder has sent nothing for so long, not even a credit: a
	// holder that vanished without detaching (killed, or its network gone). A holder's rail
	// re-sends its credit every second while the screen is quiet.
	SessionIdle = 2 * time.Minute
)

// SessionGrant is attach's grant, signed by the authority that established the session.
type SessionGrant = sessiongrant.Grant

// attachResult is attach's reply.
type attachResult struct {
	Grant json.RawMessage `json:"grant"`
}

// bridge serves one session: the agent's terminal on one side, the session's rails on the other.
type bridge struct {
	svc   *Service
	grant *SessionGrant
	agent string
	term  *Terminal
	nc    *nats.Conn
	rail  atomic.Pointer[sessionrail.Rail]
	in    chan *meshwire.AttachFrame
	typed chan []byte // keystrokes for the terminal, written by their own goroutine
	// dropped counts output bytes lost since the last drop frame went out; the bridge's loop
	// owns it.
	dropped int64

	endOnce sync.Once
	ended   chan struct{} // closed by end
	reason  meshwire.EndReason
}

// seatOf checks the target of a lifecycle command (despawn, attach, input) against the running
// agent: not-found when this manager runs no agent of the name, expired when it is another
// lifecycle.
func (svc *Service) seatOf(req *endpoint.Request) (Status, *wire.EndpointError) {
	t := req.Envelope.Target
	st, ok := svc.sup.Lookup(t.Actor)
	if !ok || st.Principal != t.Owner+"."+t.Actor {
		return Status{}, notExecuted(wire.CodeNotFound, "this manager runs no agent %s.%s", t.Owner, t.Actor)
	}
	if string(st.LifecycleUID) != t.LifecycleUID {
		return Status{}, notExecuted(wire.CodeExpired, "%s is now lifecycle %s, not %s", t.Actor, st.LifecycleUID, t.LifecycleUID)
	}
	return st, nil
}

// terminalOf checks the target as seatOf does and returns its terminal: failed-precondition for
// a headless agent.
func (svc *Service) terminalOf(req *endpoint.Request) (Status, *Terminal, *wire.EndpointError) {
	st, refusal := svc.seatOf(req)
	if refusal != nil {
		return Status{}, nil, refusal
	}
	term, err := svc.sup.Terminal(st.Name)
	switch {
	case errors.Is(err, ErrNoTerminal):
		return Status{}, nil, notExecuted(wire.CodeFailedPrecondition, "%s runs headless: it has no terminal to attach to or type into", st.Name)
	case err != nil:
		return Status{}, nil, notExecuted(wire.CodeNotFound, "%v", err)
	}
	return st, term, nil
}

// attach establishes a session on the target agent's terminal and answers with its grant.
func (svc *Service) attach(ctx context.Context, req *endpoint.Request) (any, error) {
	if svc.cfg.Sessions == nil {
		return nil, notExecuted(wire.CodeUnimplemented, "this manager serves no sessions")
	}
	if !svc.cfg.HostLaunch(ctx, req.Caller()) {
		// A session's half waits in the mesh's ledger, for the operator's instrument (or a remote
		// manager's own person, through its host) alone.
		return nil, notExecuted(wire.CodePermissionDenied, "only the operator's instrument, or a remote manager's own person, can hold a session of this manager")
	}
	st, term, refusal := svc.terminalOf(req)
	if refusal != nil {
		return nil, refusal
	}
	// A slot is taken before anything is minted, and given back when the session's bridge ends
	// or the attach fails, so concurrent attaches never pass the ceiling.
	select {
	case svc.sessionSlots <- struct{}{}:
	default:
		return nil, notExecuted(wire.CodeResourceExhausted, "this manager serves %d sessions, its --max-sessions ceiling", svc.cfg.MaxSessions)
	}
	served := false
	defer func() {
		if !served {
			<-svc.sessionSlots
		}
	}()
	p, err := wire.ParsePrincipal(st.Principal)
	if err != nil {
		return nil, err
	}
	target := wire.Lifecycle{Principal: p, UID: st.LifecycleUID}
	holder, holderEpoch, err := svc.cfg.Sessions.SessionHolder(ctx, req.Caller())
	if err != nil {
		return nil, notExecuted(wire.CodeFailedPrecondition, "the caller cannot hold a session: %v", err)
	}
	sessionID := meshwire.NewSessionID()
	g, err := svc.cfg.Sessions.RedeemSession(ctx, authstore.SessionRequest{
		SessionID: sessionID, Holder: holder, HolderEpoch: holderEpoch, ServingEpoch: svc.cfg.Epoch, Expires: time.Now().Add(SessionLifetime),
		Target:  &target,
		Serving: authstore.Endpoint{Name: wire.ManagerEndpoint.Token(), InstanceID: svc.cfg.Instance},
	})
	if err != nil {
		return nil, wire.NewEndpointError(wire.CodeUnavailable, wire.OutcomeNotExecuted, "establish the session: %v", err)
	}
	b, err := svc.serveSession(ctx, g, st.Name, term)
	if err != nil {
		svc.closeSession(g.SessionID, authstore.SessionClosed)
		return nil, wire.NewEndpointError(wire.CodeUnavailable, wire.OutcomeNotExecuted, "serve the session: %v", err)
	}
	served = true
	go b.run() // owned: ends with the session, giving back its slot; Stop ends every session and waits
	return attachResult{Grant: g.Raw}, nil
}

// serveSession connects the session's serving half and opens its serving rail.
func (svc *Service) serveSession(ctx context.Context, g *SessionGrant, agent string, term *Terminal) (*bridge, error) {
	cred, err := svc.cfg.Sessions.SessionServing(ctx, g.SessionID, svc.cfg.Instance, svc.cfg.Epoch)
	if err != nil {
		return nil, err
	}
	b := &bridge{svc: svc, grant: g, agent: agent, term: term, in: make(chan *meshwire.AttachFrame, tapBuffer),
		typed: make(chan []byte, tapBuffer), ended: make(chan struct{})}
	// The broker closes the connection when either half is revoked: the session ended elsewhere.
	b.nc, err = dial.As(ctx, svc.sup.cfg.URL, cred, nats.NoReconnect(), nats.ClosedHandler(func(*nats.Conn) { b.end(meshwire.EndClosed, false) }))
	if err != nil {
		return nil, err
	}
	rail, err := sessionrail.Open(b.nc, sessionrail.Config{Space: svc.cfg.Space, Endpoint: g.Endpoint, SessionID: g.SessionID,
		Epoch: g.Serving.Epoch, Window: g.Window, Role: sessionrail.Serving}, sessionrail.Handlers{
		Data:  b.take,
		Close: func() { b.end(meshwire.EndClosed, false) }, // the holder detached
		Broken: func(reason string, err error) {
			svc.cfg.Log.Warn("end a session whose rail broke", "session", g.SessionID, "reason", reason, "err", err)
			b.end(meshwire.EndClosed, false)
		},
		Dropped: func(msg *nats.Msg) {
			svc.cfg.Log.Warn("drop a delivery onto a session rail", "session", g.SessionID, "subject", msg.Subject)
		},
	})
	if err != nil {
		b.nc.Close()
		return nil, err
	}
	b.rail.Store(rail)
	if err := b.nc.Flush(); err != nil {
		b.nc.Close()
		return nil, err
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if svc.stopping {
		b.nc.Close()
		return nil, ErrClosed
	}
	svc.sessions[g.SessionID] = b
	svc.sessionsWG.Add(1)
	return b, nil
}

// take takes one terminal frame off the in rail for the bridge's loop, in order. It waits while
// the loop is behind, so the rail credits only what the loop took. A frame that is not a terminal
// frame is dropped, as the reference's bridge does: a holder's bad frame never ends its session.
func (b *bridge) take(data json.RawMessage, _ int64) error {
	f, err := meshwire.DecodeAttachFrame(data)
	if err != nil {
		b.svc.cfg.Log.Warn("drop a malformed session frame", "session", b.grant.SessionID, "err", err)
		return nil
	}
	select {
	case b.in <- f:
	case <-b.ended:
	}
	return nil
}

// typist writes the holder's keystrokes into the terminal in order. A write blocks while the
// agent does not read its input; it never holds up the bridge, and it ends with the session (or,
// when a write is blocked then, once that write returns).
func (b *bridge) typist() {
	for {
		select {
		case <-b.ended:
			return
		case p := <-b.typed:
			if _, err := b.term.Write(p); err != nil {
				b.svc.cfg.Log.Warn("type into an attached terminal", "session", b.grant.SessionID, "err", err)
			}
		}
	}
}

// run bridges until the session ends: keystrokes and resizes from the in rail to the terminal, the
// terminal's screen (from the first ready) and live output to the out rail.
func (b *bridge) run() {
	defer b.svc.sessionsWG.Done()
	defer func() { <-b.svc.sessionSlots }()
	defer b.svc.forget(b.grant.SessionID)
	var tap *Tap
	defer func() {
		if tap != nil {
			tap.Close()
		}
	}()
	go b.typist() // owned: ends with the session
	expire := time.NewTimer(time.Until(b.grant.Exp.Time()))
	defer expire.Stop()
	idle := time.NewTicker(max(b.svc.cfg.SessionIdle/4, time.Millisecond))
	defer idle.Stop()
	var typedDropped int
	var out <-chan []byte
	var exited <-chan struct{}
	for {
		select {
		case <-b.ended:
			b.nc.Close()
			b.rail.Load().Wait()
			return
		case <-expire.C:
			b.end(meshwire.EndExpired, true)
		case <-idle.C: // the holder is gone without a word
			if time.Since(b.rail.Load().LastHeard()) >= b.svc.cfg.SessionIdle {
				b.end(meshwire.EndClosed, true)
			}
		case <-exited:
			for drained := false; !drained; { // the tail queued before the end
				select {
				case chunk := <-out:
					b.forward(chunk)
				default:
					drained = true
				}
			}
			b.end(meshwire.EndProcessExit, true)
		case chunk := <-out:
			b.dropped += tap.Dropped()
			b.forward(chunk)
		case f := <-b.in:
			switch f.Kind {
			case meshwire.AttachReady: // the current screen, then live output; again on every ready
				if tap != nil {
					tap.Close()
				}
				tap = b.term.Attach(tapBuffer)
				// An empty screen still goes out as an empty data frame: a holder that has taken a
				// frame re-credits while the screen is quiet, which keeps the session from idling.
				b.forward(tap.Snapshot)
				if len(tap.Snapshot) == 0 {
					b.send(&meshwire.AttachFrame{Kind: meshwire.AttachData})
				}
				out, exited = tap.Out(), tap.Done()
			case meshwire.AttachData:
				if len(f.Data) == 0 {
					continue
				}
				select {
				case b.typed <- f.Data:
				default: // the agent is not reading its input: keystrokes past the buffer are lost
					if typedDropped++; typedDropped == 1 || typedDropped%tapBuffer == 0 {
						b.svc.cfg.Log.Warn("drop keystrokes the agent does not read", "session", b.grant.SessionID, "frames", typedDropped)
					}
				}
			case meshwire.AttachResize:
				cols, rows := min(f.Cols, maxTermSide), min(f.Rows, maxTermSide)
				if err := b.term.Resize(uint16(cols), uint16(rows)); err != nil {
					b.svc.cfg.Log.Warn("resize an attached terminal", "session", b.grant.SessionID, "err", err)
				}
			default: // end and drop go the other way: the reference's bridge ignores them too
				b.svc.cfg.Log.Warn("drop a session frame the caller may not send", "session", b.grant.SessionID, "kind", f.Kind)
			}
		}
	}
}

// maxTermSide is the largest side a terminal takes; a larger resize is clamped to it.
const maxTermSide = 1<<16 - 1

// forward sends output as data frames of at most meshwire.MaxAttachData bytes each. Output the
// holder's window has no room for is dropped and counted; the next frame that fits is preceded
// by a drop frame saying how much was lost.
func (b *bridge) forward(p []byte) {
	for len(p) > 0 {
		n := min(len(p), meshwire.MaxAttachData)
		if b.dropped > 0 {
			if !b.send(&meshwire.AttachFrame{Kind: meshwire.AttachDrop, Bytes: b.dropped}) {
				b.dropped += int64(n)
				p = p[n:]
				continue
			}
			b.dropped = 0
		}
		if !b.send(&meshwire.AttachFrame{Kind: meshwire.AttachData, Data: p[:n]}) {
			b.dropped += int64(n)
		}
		p = p[n:]
	}
}

// send sends one frame on the out rail: false when the window is full; a rail that is closed or
// broken ends the session.
func (b *bridge) send(f *meshwire.AttachFrame) bool {
	_, err := b.rail.Load().Send(f.Encode())
	switch {
	case err == nil:
		return true
	case errors.Is(err, sessionrail.ErrWindowFull):
	default:
		b.end(meshwire.EndClosed, false)
	}
	return false
}

// end ends the session once, for reason: with tell, the holder is sent an end frame first, when
// its window has room; the rail closes, and the ledger closes the row and revokes both halves.
func (b *bridge) end(reason meshwire.EndReason, tell bool) {
	b.endOnce.Do(func() {
		b.reason = reason
		if rail := b.rail.Load(); rail != nil {
			if tell {
				_, _ = rail.Send((&meshwire.AttachFrame{Kind: meshwire.AttachEnd, Reason: reason}).Encode()) // advisory
			}
			rail.Close()
			_ = b.nc.Flush() // best effort: the revocation below closes the rails either way
		}
		to := authstore.SessionClosed
		switch reason {
		case meshwire.EndExpired:
			to = authstore.SessionExpired
		case meshwire.EndTargetDespawn:
			to = authstore.SessionRetired
		}
		b.svc.closes.Go(func() { b.svc.closeSession(b.grant.SessionID, to) }) // not under the connection's callback
		close(b.ended)
	})
}

// closeSession ends a session in the ledger as its serving party.
func (svc *Service) closeSession(sessionID string, to authstore.SessionState) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	closer := authstore.SessionCloser{Serving: &authstore.Endpoint{Name: wire.ManagerEndpoint.Token(), InstanceID: svc.cfg.Instance}, Epoch: svc.cfg.Epoch}
	if err := svc.cfg.Sessions.CloseSession(ctx, sessionID, closer, to); err != nil {
		svc.cfg.Log.Warn("close a session", "session", sessionID, "err", err)
	}
}

func (svc *Service) forget(sessionID string) {
	svc.mu.Lock()
	delete(svc.sessions, sessionID)
	svc.mu.Unlock()
}

// endSessions ends every session of agent (every session when agent is empty) for reason.
func (svc *Service) endSessions(agent string, reason meshwire.EndReason) {
	svc.mu.Lock()
	if agent == "" {
		svc.stopping = true // no session starts from here on
	}
	var ending []*bridge
	for _, b := range svc.sessions {
		if agent == "" || b.agent == agent {
			ending = append(ending, b)
		}
	}
	svc.mu.Unlock()
	for _, b := range ending {
		b.end(reason, true)
	}
}

// SessionCount returns how many sessions the manager serves.
func (svc *Service) SessionCount() int {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	return len(svc.sessions)
}

// inputArgs are input's args.
type inputArgs struct {
	Text  string `json:"text"`
	Enter *bool  `json:"enter,omitempty"`
}

// inputResult is input's reply: the bytes written into the terminal.
type inputResult struct {
	Name  string `json:"name"`
	Bytes int    `json:"bytes"`
}

// input types text into the target agent's terminal, then Enter (a carriage return) unless enter
// is false, without a session.
func (svc *Service) input(ctx context.Context, req *endpoint.Request) (any, error) {
	var args inputArgs
	if err := json.Unmarshal(req.Args(), &args); err != nil {
		return nil, notExecuted(wire.CodeBadRequest, "args: %v", err)
	}
	st, term, refusal := svc.terminalOf(req)
	if refusal != nil {
		return nil, refusal
	}
	text := []byte(args.Text)
	if args.Enter == nil || *args.Enter {
		text = append(text, '\r')
	}
	// The write runs on its own: an agent that does not read its input holds it, never the
	// handler past the request's deadline.
	type written struct {
		n   int
		err error
	}
	done := make(chan written, 1)
	go func() { // owned: ends when the write returns, at the latest when the agent's process ends
		n, err := term.Write(text)
		done <- written{n, err}
	}()
	select {
	case w := <-done:
		if w.err != nil {
			outcome := wire.OutcomeUnknown
			if w.n == 0 {
				outcome = wire.OutcomeNotExecuted
			}
			return nil, wire.NewEndpointError(wire.CodeFailedPrecondition, outcome, "type into %s: %v", st.Name, w.err)
		}
		return inputResult{Name: st.Name, Bytes: w.n}, nil
	case <-ctx.Done():
		return nil, wire.NewEndpointError(wire.CodeDeadlineExceeded, wire.OutcomeUnknown, "%s is not reading its input; the text may still be typed", st.Name)
	}
}
