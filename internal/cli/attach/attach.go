// Package attach implements `cotal attach` and `cotal input`: a person's terminal on a spawned
// agent's terminal, through a session the agent's manager serves over the broker, and one line
// typed into it without attaching.
package attach

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/agentflags"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/remotemgr"
	"github.com/gocotal/cotal/internal/sessionrail"
	"github.com/gocotal/cotal/wire"
)

// DetachKey is the byte that detaches: Ctrl-], read on its own.
const DetachKey = 0x1d

// Backoff is the wait before each reconnect of a lost session, the last repeated.
var Backoff = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second}

// readyEvery is how often a new session asks for the screen until the first frame arrives.
const readyEvery = 500 * time.Millisecond

// Options are the inputs of `cotal attach`.
type Options struct {
	*factory.Factory
	Name        string
	NoReconnect bool
	// MeshURL and Instance attach as the person logged in to a user-auth mesh, through their
	// manager-caller view of Instance (or the only live manager they may address).
	MeshURL  string
	Instance string
}

// NewCmdAttach returns the `cotal attach` command.
func NewCmdAttach(f *factory.Factory) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "attach NAME [--mesh URL [--instance ID]]",
		Short: "Attach your terminal to a spawned agent's terminal; Ctrl-] detaches",
		Long: "Attach to the terminal of agent NAME, spawned with the pty runtime, through a session its\n" +
			"manager serves over the broker: you see its current screen, then live output, and what you\n" +
			"type reaches it. Ctrl-] detaches, ending the session: both of its credentials are revoked.\n" +
			"A lost connection reconnects with a fresh session after 1, 2, 5, 10, then every 30 s, until\n" +
			"the agent is gone or you detach.\n\n" +
			"With --mesh URL, attach as yourself (`cotal login --mesh URL` first) to an agent of the\n" +
			"remote manager you run for that user-auth mesh: your half of the session is kept by the\n" +
			"mesh's host, which gives it to you alone and ends the session when you detach.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if err := agentflags.ValidName("NAME", o.Name); err != nil {
				return err
			}
			switch {
			case o.MeshURL != "":
				if err := o.CheckMesh(o.MeshURL); err != nil {
					return err
				}
			case o.Instance != "":
				return &exit.UsageError{Err: errors.New("--instance names the manager of a --mesh attach; without --mesh the manager that runs the agent is found")}
			}
			return attachRun(cmd.Context(), o)
		},
	}
	o.Target.Register(cmd.Flags())
	cmd.Flags().BoolVar(&o.NoReconnect, "no-reconnect", false, "exit when the session is lost instead of reconnecting")
	cmd.Flags().StringVar(&o.MeshURL, "mesh", "", "attach, as yourself (`cotal login --mesh` first), to an agent of your remote manager on the user-auth mesh whose exchange is at this URL")
	cmd.Flags().StringVar(&o.Instance, "instance", "", "with --mesh, the manager instance to ask (default: the only live one you may address)")
	return cmd
}

// halves is where the holder of a session takes its half and ends the session: the mesh's
// ledger for the host's operator, or the host's session-holder route for a person attaching
// from another machine.
type halves interface {
	Caller(ctx context.Context, g *manager.SessionGrant, holder wire.Lifecycle) (*authority.Credential, error)
	End(ctx context.Context, sessionID string, holder wire.Lifecycle) error
}

// ledgerHalves are the operator's: the mesh's own ledger.
type ledgerHalves struct{ l *ledger.Ledger }

func (h ledgerHalves) Caller(ctx context.Context, g *manager.SessionGrant, holder wire.Lifecycle) (*authority.Credential, error) {
	return h.l.SessionCaller(ctx, g.Raw, holder)
}

func (h ledgerHalves) End(ctx context.Context, sessionID string, holder wire.Lifecycle) error {
	return h.l.CloseSession(ctx, sessionID, authstore.SessionCloser{Holder: &holder}, authstore.SessionClosed)
}

// hostHalves are a person's: the host's session-holder route, which authenticates them.
type hostHalves struct{ c *remotemgr.HolderClient }

func (h hostHalves) Caller(ctx context.Context, g *manager.SessionGrant, holder wire.Lifecycle) (*authority.Credential, error) {
	return h.c.Caller(ctx, g, holder)
}

func (h hostHalves) End(ctx context.Context, sessionID string, _ wire.Lifecycle) error {
	return h.c.End(ctx, sessionID)
}

// connect connects the caller of the manager and finds where the session halves are taken and
// which broker they connect to: the operator's control instrument and the mesh's ledger, or with
// --mesh the person's manager-caller view and their host's session-holder route.
func (o *Options) connect(ctx context.Context) (*factory.Control, halves, string, error) {
	if o.MeshURL != "" {
		ctl, err := o.MeshControl(ctx, o.MeshURL, wire.LifecycleUID(o.Instance))
		if err != nil {
			return nil, nil, "", err
		}
		hc, server, err := o.MeshSessionHolder(ctx, o.MeshURL)
		if err != nil {
			ctl.Close()
			return nil, nil, "", err
		}
		return ctl, hostHalves{hc}, server, nil
	}
	ctl, err := o.WatchControl(ctx)
	if err != nil {
		return nil, nil, "", err
	}
	l, err := o.Ledger(ctx, ctl.Space)
	if err == nil {
		var st *mesh.State
		if _, st, _, err = o.Mesh(""); err == nil {
			return ctl, ledgerHalves{l}, st.URL, nil
		}
	}
	ctl.Close()
	return nil, nil, "", err
}

// errDetached ends an attach the person ended.
var errDetached = errors.New("detached")

// errGone ends an attach whose agent is gone.
var errGone = errors.New("the agent is gone")

func attachRun(ctx context.Context, o *Options) error {
	ctl, h, url, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer ctl.Close()
	in := newInput(o.IO.In)
	restore := rawMode(o.IO.In)
	defer restore()
	attempt := 0
	for {
		began := time.Now()
		lost, err := session(ctx, o, ctl, h, url, in)
		switch {
		case errors.Is(err, errDetached):
			fmt.Fprintf(o.IO.ErrOut, "\r\n[cotal: detached from %s]\r\n", o.Name)
			return nil
		case errors.Is(err, errGone):
			fmt.Fprintf(o.IO.ErrOut, "\r\n[cotal: %s is gone]\r\n", o.Name)
			return nil
		case ctx.Err() != nil:
			return nil
		case !lost || o.NoReconnect:
			return err
		}
		if time.Since(began) >= sessionSettled {
			attempt = 0 // the session was up: the backoff starts again
		}
		wait := Backoff[min(attempt, len(Backoff)-1)]
		attempt++
		fmt.Fprintf(o.IO.ErrOut, "\r\n[cotal: connection lost (%v), reconnecting in %s; Ctrl-] gives up]\r\n", err, wait)
		if in.waitOrDetach(ctx, wait) {
			fmt.Fprintf(o.IO.ErrOut, "\r\n[cotal: detached from %s]\r\n", o.Name)
			return nil
		}
	}
}

// transient reports whether an attach that failed with err may succeed when asked again: a
// refusal the manager decided (headless, not authorized, at its ceiling, no manager at all) is
// final; no answer, an unavailable manager or a lost connection are not.
func transient(err error) bool {
	e, ok := errors.AsType[*wire.EndpointError](err)
	return !ok || e.Code == wire.CodeUnavailable || e.OutcomeOrUnknown() != wire.OutcomeNotExecuted
}

// errConnClosed is a session whose connection closed under it: lost, and resumed on a fresh one.
var errConnClosed = errors.New("the session's connection closed")

// sessionSettled is how long a session must have lasted for its loss to restart the backoff.
const sessionSettled = 5 * time.Second

// session runs one session until it ends. lost reports a session that went away without the
// person or the agent ending it, which a reconnect may resume.
func session(ctx context.Context, o *Options, ctl *factory.Control, h halves, url string, in *input) (lost bool, err error) {
	g, err := ctl.Manager.Attach(ctx, ctl.Records, o.Name)
	if e, ok := errors.AsType[*wire.EndpointError](err); ok && e.Code == wire.CodeNotFound {
		return false, errGone
	}
	if err != nil {
		return transient(err), factory.Refusal(err)
	}
	holder, err := wire.ParsePrincipal(g.Holder.ID)
	if err != nil {
		return false, fmt.Errorf("the grant's holder: %w", err)
	}
	me := wire.Lifecycle{Principal: holder, UID: g.Holder.LifecycleUID}
	cred, err := h.Caller(ctx, g, me)
	if err != nil {
		// The session was established for nothing: end it rather than hold a manager's slot.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		_ = h.End(cctx, g.SessionID, me)
		cancel()
		// A refusal the host decided is final; no answer may not be.
		ref, refused := errors.AsType[*remotemgr.Refusal](err)
		return !refused || ref.Code == wire.CodeUnavailable, fmt.Errorf("redeem the session: %w", err)
	}
	defer func() { // ending is the ledger's close: both halves refused by the broker
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		_ = h.End(cctx, g.SessionID, me)
	}()
	closed := make(chan struct{})
	nc, err := dial.As(ctx, url, cred, nats.NoReconnect(), nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		return true, err
	}
	defer nc.Close()
	return drive(ctx, o, nc, closed, g, in)
}

// drive opens the holder's rail of session g on nc and runs the session until it ends: the screen
// to the person's terminal, their keystrokes and window size to the agent's. lost reports a
// session that went away without the person or the agent ending it.
func drive(ctx context.Context, o *Options, nc *nats.Conn, closed <-chan struct{}, g *manager.SessionGrant, in *input) (lost bool, err error) {
	// The rail hands each frame over once the loop takes it, so it credits only what was shown.
	frames := make(chan *meshwire.AttachFrame)
	broke := make(chan error, 1)
	done := make(chan struct{})
	defer close(done)
	rail, err := sessionrail.Open(nc, sessionrail.Config{Space: wire.Space(g.Space), Endpoint: g.Endpoint, SessionID: g.SessionID,
		Epoch: g.Serving.Epoch, Window: g.Window, Role: sessionrail.Caller, Retain: true}, sessionrail.Handlers{
		Data: func(data json.RawMessage, _ int64) error {
			f, err := meshwire.DecodeAttachFrame(data)
			if err != nil {
				return err // a frame no manager sends: the rail breaks and a fresh session follows
			}
			select {
			case frames <- f:
			case <-done:
			}
			return nil
		},
		Close:  func() { broke <- errors.New("the manager closed the session") },
		Broken: func(reason string, err error) { broke <- fmt.Errorf("the session's rail broke (%s): %w", reason, err) },
	})
	if err != nil {
		return true, err
	}
	defer func() { rail.Close(); _ = nc.Flush() }()
	if err := nc.Flush(); err != nil {
		return true, err
	}
	// send waits for the window: keystrokes are never dropped, and a manager that stops
	// crediting breaks the rail after its stall timeout; a connection that closes ends the wait.
	sendCtx, stopSends := context.WithCancel(ctx)
	defer stopSends()
	go func() { // owned: ends with the session
		select {
		case <-closed:
			stopSends()
		case <-sendCtx.Done():
		}
	}()
	send := func(f *meshwire.AttachFrame) error {
		_, err := rail.SendWait(sendCtx, f.Encode())
		select {
		case <-closed:
			return errConnClosed
		default:
			return err
		}
	}
	resize := func() error {
		if cols, rows, ok := size(o.IO.Out); ok {
			return send(&meshwire.AttachFrame{Kind: meshwire.AttachResize, Cols: cols, Rows: rows})
		}
		return nil
	}
	if err := resize(); err != nil {
		return true, err
	}
	if err := send(&meshwire.AttachFrame{Kind: meshwire.AttachReady}); err != nil {
		return true, err
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	ready := time.NewTicker(readyEvery)
	defer ready.Stop()
	for {
		var err error
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-closed:
			return true, errConnClosed
		case err := <-broke:
			return true, err
		case <-ready.C: // until the first frame: the manager's broker may not have had our frames
			rail.Retransmit()
		case <-winch:
			err = resize()
		case p, ok := <-in.bytes:
			switch {
			case !ok:
				return false, errDetached // stdin ended
			case len(p) == 1 && p[0] == DetachKey:
				return false, errDetached
			}
			for len(p) > 0 && err == nil {
				n := min(len(p), meshwire.MaxAttachData)
				err = send(&meshwire.AttachFrame{Kind: meshwire.AttachData, Data: p[:n]})
				p = p[n:]
			}
		case f := <-frames:
			ready.Stop()
			switch f.Kind {
			case meshwire.AttachData:
				_, _ = o.IO.Out.Write(f.Data)
			case meshwire.AttachDrop:
				fmt.Fprintf(o.IO.ErrOut, "\r\n[cotal: %d bytes dropped - backpressure]\r\n", f.Bytes)
			case meshwire.AttachEnd:
				switch f.Reason {
				case meshwire.EndProcessExit, meshwire.EndTargetDespawn:
					return false, errGone
				case meshwire.EndClosed:
					return false, errDetached
				}
				return true, fmt.Errorf("the session ended: %s", f.Reason) // expired, manager-restart, another endpoint's reason
			}
		}
		if err != nil {
			return errors.Is(err, errConnClosed) || !errors.Is(err, context.Canceled), err
		}
	}
}

// input reads the person's keystrokes, each read one slice, so a lone Ctrl-] tells itself apart
// from the same byte inside a paste.
type input struct{ bytes chan []byte }

// waitOrDetach waits d for a reconnect, reading what is typed meanwhile: Ctrl-] or Ctrl-C gives up
// (true); anything else is dropped, not sent to a session that did not see it typed.
func (in *input) waitOrDetach(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return true
		case <-t.C:
			return false
		case p, ok := <-in.bytes:
			if !ok || slices.Contains(p, DetachKey) || slices.Contains(p, ctrlC) {
				return true
			}
		}
	}
}

// ctrlC is Ctrl-C as a raw terminal reads it.
const ctrlC = 0x03

func newInput(r io.Reader) *input {
	in := &input{bytes: make(chan []byte, 16)}
	go func() { // owned: ends with stdin, as the process exits
		defer close(in.bytes)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				in.bytes <- append([]byte(nil), buf[:n]...)
			}
			if err != nil {
				return
			}
		}
	}()
	return in
}

// rawMode puts the terminal behind r, if it is one, into raw mode and returns the restore.
func rawMode(r io.Reader) func() {
	f, ok := r.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return func() {}
	}
	old, err := term.MakeRaw(int(f.Fd()))
	if err != nil {
		return func() {}
	}
	return func() { _ = term.Restore(int(f.Fd()), old) }
}

// size returns the window size of the terminal behind w, if it is one.
func size(w io.Writer) (cols, rows int, ok bool) {
	f, isFile := w.(*os.File)
	if !isFile || !term.IsTerminal(int(f.Fd())) {
		return 0, 0, false
	}
	cols, rows, err := term.GetSize(int(f.Fd()))
	return cols, rows, err == nil && cols > 0 && rows > 0
}

// InputOptions are the inputs of `cotal input`.
type InputOptions struct {
	*factory.Factory
	Name    string
	Text    string
	NoEnter bool
}

// NewCmdInput returns the `cotal input` command.
func NewCmdInput(f *factory.Factory) *cobra.Command {
	o := &InputOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "input NAME --text TEXT [--no-enter]",
		Short: "Type a line into a spawned agent's terminal without attaching",
		Long: "Type TEXT into the terminal of agent NAME (pty runtime), then Enter unless --no-enter:\n" +
			"a harness command such as /compact, without holding a session. Text that starts with a\n" +
			"dash goes as --text=-x.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if err := agentflags.ValidName("NAME", o.Name); err != nil {
				return err
			}
			if o.Text == "" {
				return &exit.UsageError{Err: errors.New("--text: name the text to type")}
			}
			return inputRun(cmd.Context(), o)
		},
	}
	o.Target.Register(cmd.Flags())
	cmd.Flags().StringVar(&o.Text, "text", "", "the text to type (required)")
	cmd.Flags().BoolVar(&o.NoEnter, "no-enter", false, "type the text without pressing Enter")
	return cmd
}

func inputRun(ctx context.Context, o *InputOptions) error {
	ctl, err := o.Control(ctx)
	if err != nil {
		return err
	}
	defer ctl.Close()
	n, err := ctl.Manager.Input(ctx, ctl.Records, o.Name, o.Text, !o.NoEnter)
	if err != nil {
		return factory.Refusal(err)
	}
	fmt.Fprintf(o.IO.Out, "sent %d bytes to %s\n", n, o.Name)
	return nil
}
