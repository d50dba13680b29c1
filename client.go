package cotal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/wire"
)

// Errors callers branch on.
var (
	// ErrClosed is returned by calls on a closed client.
	ErrClosed = errors.New("client closed")
	// ErrNotPermitted wraps a refusal by the broker (a permission violation).
	ErrNotPermitted = errors.New("not permitted by the broker")
	// ErrUnreachable is returned by Connect when no attempt reached the broker.
	ErrUnreachable = errors.New("broker unreachable")
	// ErrRosterEnded is reported on Errors when a roster ends because its client's connection
	// closed (Close, or a connection the broker closed for good); its Done closes. A roster
	// ended by its Stop is not reported.
	ErrRosterEnded = errors.New("roster ended")
	// ErrRosterRestarted is reported on Errors when the broker ended a roster's watch: the
	// roster watches again, with backoff, and goes on updating without losing or repeating a
	// peer (see Roster).
	ErrRosterRestarted = errors.New("roster watch restarted")
)

// Client is one participant's connection to a space. It is safe for concurrent use. Create one
// with Connect and end it with Close; the zero value is not usable.
type Client struct {
	nc *nats.Conn
	js jetstream.JetStream
	// pipe is the JetStream context of the pipelined sends: its window bounds those awaiting
	// their acknowledgement.
	pipe  jetstream.JetStream
	grant *Grant // nil on an open mesh
	space wire.Space
	me    wire.Principal
	log   *slog.Logger
	opts  *options

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // goroutines the client started

	// asyncErrs delivers the broker's asynchronous errors to the caller; see Errors.
	asyncErrs chan error

	// presenceMu serialises presence writes; presenceDone is set, under it, by the final
	// offline write, after which no write is made.
	presenceMu   sync.Mutex
	presenceDone bool
	// histMu runs history reads one at a time: the lifecycle's chathist consumer has one name.
	histMu sync.Mutex

	mu       sync.Mutex // guards the fields below
	closed   bool
	refusals map[string]error // permission violations by subject, for publishes awaiting an ack
	presence wire.Presence
	joined   map[string]*joined
	consume  []jetstream.ConsumeContext

	deliver *deliverer
}

// Connect connects to a space. url is a cotal:// or cotals:// URL (SPEC §10), or a nats:// or
// tls:// server URL with the space from WithSpace or the credential. With WithCreds the client
// adopts the credential's principal and fails, before publishing anything, if an explicit card
// disagrees; it sets the inbox prefix its grant allows before any request; it refuses a broker
// older than wire.MinServerVersion. An unreachable broker is tried a bounded number of times,
// then ErrUnreachable; once connected, the client reconnects with backoff.
func Connect(ctx context.Context, url string, opts ...Option) (*Client, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	target, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	c := &Client{opts: o, log: o.log, asyncErrs: make(chan error, 64), refusals: map[string]error{}, joined: map[string]*joined{}}
	if err := c.identify(target); err != nil {
		return nil, err
	}
	if err := c.dial(ctx, target); err != nil {
		return nil, err
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.deliver = newDeliverer(c)
	if err := c.start(ctx, append(o.join, target.Channels...)); err != nil {
		c.abort()
		return nil, err
	}
	return c, nil
}

// identify settles the client's principal and space from the credential, the URL and the
// options, before any connection exists.
func (c *Client) identify(t *Target) error {
	o := c.opts
	linked, ok, err := linkCredential(t.Token)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidOption, err)
	}
	if ok {
		if len(o.creds) > 0 || o.bearer != nil {
			return fmt.Errorf("%w: %v", ErrInvalidOption, errLinkAndCreds)
		}
		t.Token = ""
	}
	if linked != nil {
		if err := c.adopt(linked); err != nil {
			return err
		}
	} else if o.bearer != nil {
		if len(o.creds) > 0 || t.Token != "" || t.User != "" {
			return fmt.Errorf("%w: a bearer excludes a creds file and a token or user:pass in the URL", ErrInvalidOption)
		}
		g := o.bearer.grant
		c.grant, c.me, c.space = &g, g.Principal, g.Space
		if !o.presenceSet {
			o.presence = g.Presence
		}
	} else if len(o.creds) > 0 {
		if t.Token != "" || t.User != "" {
			return fmt.Errorf("%w: a creds file excludes a token or user:pass in the URL", ErrInvalidOption)
		}
		g, err := ParseCreds(o.creds)
		if err != nil {
			if o.credsPath != "" {
				return fmt.Errorf("creds %s: %w", o.credsPath, err)
			}
			return fmt.Errorf("creds: %w", err)
		}
		if err := c.adopt(g); err != nil {
			return err
		}
	} else {
		p, err := wire.NewPrincipal(wire.DevOwner, strings.ReplaceAll(string(wire.NewConnID()), "-", "_"))
		if err != nil {
			return err
		}
		c.me, c.space = p, "main"
	}
	for _, sp := range []wire.Space{t.Space, o.space} {
		if sp == "" {
			continue
		}
		if c.grant != nil && sp != c.grant.Space {
			return fmt.Errorf("%w: space %q disagrees with the credential's space %q", ErrInvalidOption, sp, c.grant.Space)
		}
		c.space = sp
	}
	if o.card != nil && o.card.ID != "" && o.card.ID != c.me.String() {
		return fmt.Errorf("%w: the card names %q but the credential is %q (SPEC §2: adopt the credential's principal)", ErrInvalidOption, o.card.ID, c.me)
	}
	return nil
}

// adopt takes g, a credential's grant, as the client's identity: its principal, its space and,
// unless the options set it, whether to write presence. An expired credential is refused.
func (c *Client) adopt(g *Grant) error {
	if !g.Expires.IsZero() && time.Now().After(g.Expires) {
		return fmt.Errorf("%w at %s; mint a new one", ErrCredentialExpired, g.Expires.UTC().Format(time.RFC3339))
	}
	c.grant, c.me, c.space = g, g.Principal, g.Space
	if !c.opts.presenceSet {
		c.opts.presence = g.Presence
	}
	return nil
}

// dial connects, retrying an unreachable broker with backoff.
func (c *Client) dial(ctx context.Context, t *Target) error {
	opts := append([]nats.Option{}, c.opts.natsOpts...)
	opts = append(opts,
		nats.Name(c.me.String()),
		nats.PermissionErrOnSubscribe(true),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(reconnectDelay),
		nats.ErrorHandler(c.onAsyncError),
	)
	switch b := c.opts.bearer; {
	case b != nil:
		// The callout keys the credential's inbox by the connection's name, a client nonce.
		conn := wire.NewConnID()
		opts = append(opts, nats.UserJWTAndSeed(b.sentinelJWT, b.sentinelSeed), nats.Name(string(conn)),
			nats.CustomInboxPrefix(conn.InboxPrefix()),
			nats.TokenHandler(func() string {
				ctx, cancel := context.WithTimeout(context.Background(), bearerWait)
				defer cancel()
				tok, err := b.token(ctx)
				if err != nil {
					c.log.Warn("fetch a bearer to connect with", "err", err)
				}
				return tok
			}))
	case c.grant != nil:
		opts = append(opts, nats.UserJWTAndSeed(c.grant.jwt, c.grant.seed),
			nats.CustomInboxPrefix(wire.ConnID(c.grant.UserKey).InboxPrefix()))
	}
	if t.Token != "" {
		opts = append(opts, nats.Token(t.Token))
	}
	if t.User != "" {
		opts = append(opts, nats.UserInfo(t.User, t.Password))
	}
	if t.TLS {
		opts = append(opts, nats.Secure())
	}
	var last error
	for attempt := range c.opts.connectAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("connect to %s: %w", t.Server, ctx.Err())
			case <-time.After(reconnectDelay(attempt)):
			}
		}
		nc, err := nats.Connect(t.Server, opts...)
		if err == nil {
			if err := wire.CheckServerVersion(nc.ConnectedServerVersion()); err != nil {
				nc.Close()
				return err
			}
			c.nc = nc
			if c.js, err = jetstream.New(nc); err != nil {
				nc.Close()
				return fmt.Errorf("jetstream: %w", err)
			}
			if c.pipe, err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(c.opts.sendWindow),
				jetstream.WithPublishAsyncTimeout(asyncAckWait)); err != nil {
				nc.Close()
				return fmt.Errorf("jetstream: %w", err)
			}
			return nil
		}
		last = err
		if !transient(err) {
			break // an auth or protocol error will not heal by retrying
		}
	}
	if transient(last) {
		return fmt.Errorf("%w: %s after %d attempts: %v", ErrUnreachable, t.Server, c.opts.connectAttempts, last)
	}
	if errors.Is(last, nats.ErrAuthorization) || errors.Is(last, nats.ErrAuthExpired) || errors.Is(last, nats.ErrAuthRevoked) {
		return fmt.Errorf("%w: connect to %s: %v", ErrNotPermitted, t.Server, last)
	}
	return fmt.Errorf("connect to %s: %w", t.Server, last)
}

// transient reports whether a failed connect may succeed when tried again: no server answered,
// or one accepted the connection but did not complete the handshake in time (a broker busy with
// a mass join, say).
func transient(err error) bool {
	var ne net.Error
	return errors.Is(err, nats.ErrNoServers) || errors.Is(err, nats.ErrTimeout) || (errors.As(err, &ne) && ne.Timeout())
}

// reconnectDelay backs off from 100 ms to 5 s.
func reconnectDelay(attempt int) time.Duration {
	return min(100*time.Millisecond<<min(attempt, 6), 5*time.Second)
}

// onAsyncError records the broker's asynchronous errors: a permission violation on a publish is
// remembered by subject so the publish that caused it fails with ErrNotPermitted rather than a
// timeout, and every error is offered on Errors.
func (c *Client) onAsyncError(_ *nats.Conn, _ *nats.Subscription, err error) {
	if errors.Is(err, nats.ErrPermissionViolation) {
		if subj, ok := violatedPublish(err); ok {
			c.mu.Lock()
			c.refusals[subj] = err
			c.mu.Unlock()
		}
	}
	c.log.Warn("broker error", "err", err)
	c.report(err)
}

// report offers err on Errors without blocking: when the buffer is full the newest error is
// dropped (and was logged), never the connection.
func (c *Client) report(err error) {
	select {
	case c.asyncErrs <- err:
	default:
	}
}

// violatedPublish extracts the subject of a publish permission violation.
func violatedPublish(err error) (string, bool) {
	_, rest, ok := strings.Cut(err.Error(), `Permissions Violation for Publish to "`)
	if !ok {
		return "", false
	}
	subj, _, ok := strings.Cut(rest, `"`)
	return subj, ok
}

// Errors returns the asynchronous errors the broker reported (permission violations, slow
// consumers), late join refusals and failed consumes. The channel is buffered; errors beyond
// its capacity are dropped (they were logged).
func (c *Client) Errors() <-chan error { return c.asyncErrs }

// Principal returns the client's principal.
func (c *Client) Principal() wire.Principal { return c.me }

// Space returns the client's space.
func (c *Client) Space() wire.Space { return c.space }

// Grant returns a copy of what the client's credential grants; nil on an open mesh.
func (c *Client) Grant() *Grant {
	if c.grant == nil {
		return nil
	}
	g := *c.grant
	g.AllowPublish = slices.Clone(c.grant.AllowPublish)
	g.AllowSubscribe = slices.Clone(c.grant.AllowSubscribe)
	return &g
}

// Conn returns the underlying NATS connection, for what this package does not cover. Using it to
// publish on Cotal subjects bypasses the message checks.
func (c *Client) Conn() *nats.Conn { return c.nc }

// Close ends the client: it stops receiving (letting a handler in flight finish), writes one final
// offline presence row, and closes the connection, returning ctx.Err() if ctx ends first. A
// handler must not call Close: Close waits for the handler.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	consumers := c.consume
	joins := c.joined
	c.joined = map[string]*joined{}
	c.mu.Unlock()
	for _, cc := range consumers {
		cc.Stop()
	}
	for _, cc := range consumers {
		select { // a handler in flight finishes, and acks, before the connection closes
		case <-cc.Closed():
		case <-ctx.Done():
		}
	}
	for _, j := range joins {
		if j != nil {
			j.stop()
		}
	}
	var errs []error
	if c.opts.presence {
		errs = append(errs, c.writeOffline(ctx))
	}
	c.cancel()
	// Closing the connection first makes any request still in flight (a watch's consumer
	// cleanup, say) fail at once rather than run to its timeout.
	c.nc.Close()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}

// abort tears down a client whose start failed.
func (c *Client) abort() {
	c.cancel()
	c.nc.Close()
	c.wg.Wait()
}

// start begins presence, binds the durables a handler receives from, and joins channels.
func (c *Client) start(ctx context.Context, channels []string) error {
	if c.opts.presence {
		if err := c.startPresence(ctx); err != nil {
			return err
		}
	}
	if c.opts.handler != nil && c.grant != nil {
		if err := c.bindDurables(ctx); err != nil {
			return err
		}
	}
	for _, ch := range channels {
		if _, err := c.Join(ctx, ch); err != nil {
			return err
		}
	}
	return nil
}

// go runs f in a goroutine the client waits for at Close.
func (c *Client) goFn(f func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}
