package cotal

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/wire"
)

// ErrInvalidOption is matched by every error an Option returns.
var ErrInvalidOption = errors.New("invalid option")

// Option configures Connect. Options validate their input and may fail.
type Option func(*options) error

type options struct {
	creds           []byte
	credsPath       string
	space           wire.Space
	card            *wire.AgentCard
	name            string
	presence        bool
	presenceSet     bool // WithPresence was given: on means on, even if the grant lacks the row
	heartbeat       time.Duration
	handler         Handler
	log             *slog.Logger
	join            []string
	connectAttempts int
	natsOpts        []nats.Option
	bearer          *bearerAuth
	sendWindow      int
}

// Defaults that options override.
const (
	defaultConnectAttempts = 3
	minHeartbeat           = 100 * time.Millisecond
	// DefaultSendWindow is how many pipelined sends (SendAsync and its kin) may await their
	// acknowledgement at once unless WithSendWindow says otherwise.
	DefaultSendWindow = 256
	maxSendWindow     = 65536
)

func defaultOptions() *options {
	return &options{
		presence:        true,
		heartbeat:       wire.HeartbeatInterval,
		log:             slog.New(slog.DiscardHandler),
		connectAttempts: defaultConnectAttempts,
		sendWindow:      DefaultSendWindow,
	}
}

// WithCreds authenticates with the creds file at path. The client adopts the principal, space,
// lifecycle and role the credential names. Required for an authenticated mesh.
func WithCreds(path string) Option {
	return func(o *options) error {
		raw, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("%w: creds: %w", ErrInvalidOption, err)
		}
		o.creds, o.credsPath = raw, path
		return nil
	}
}

// WithCredsData authenticates with the contents of a creds file.
func WithCredsData(creds []byte) Option {
	return func(o *options) error {
		if len(creds) == 0 {
			return fmt.Errorf("%w: empty creds", ErrInvalidOption)
		}
		o.creds = creds
		return nil
	}
}

// WithSpace names the space; it must agree with the credential's and with a cotal:// URL's.
// Default: the credential's space, or "main" on an open mesh.
func WithSpace(space string) Option {
	return func(o *options) error {
		sp, err := wire.ParseSpace(space)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
		o.space = sp
		return nil
	}
}

// WithCard sets the card the client advertises in presence. Its ID, if set, must be the
// credential's principal: Connect fails otherwise, before anything is published (SPEC §2).
func WithCard(card wire.AgentCard) Option {
	return func(o *options) error {
		c := card
		o.card = &c
		return nil
	}
}

// WithName sets the display name of the card (default: the actor token).
func WithName(name string) Option {
	return func(o *options) error {
		if name == "" || len(name) > wire.MaxNameLength {
			return fmt.Errorf("%w: name must be 1 to %d characters", ErrInvalidOption, wire.MaxNameLength)
		}
		o.name = name
		return nil
	}
}

// WithPresence turns presence on or off. On, the client writes its presence row every heartbeat
// and a final offline row on Close; a one-shot sender turns it off. The default is on when the
// credential may write its presence row (an observer's may not).
func WithPresence(on bool) Option {
	return func(o *options) error { o.presence, o.presenceSet = on, true; return nil }
}

// WithHeartbeat sets the presence refresh interval (default wire.HeartbeatInterval, 2 s).
func WithHeartbeat(d time.Duration) Option {
	return func(o *options) error {
		if d < minHeartbeat || d >= wire.LivenessWindow {
			return fmt.Errorf("%w: heartbeat %s must be at least %s and under the liveness window %s", ErrInvalidOption, d, minHeartbeat, wire.LivenessWindow)
		}
		o.heartbeat = d
		return nil
	}
}

// WithHandler receives every delivery: channel messages of joined channels, direct messages, and
// tasks for the credential's role. Without a handler the client only sends.
func WithHandler(h Handler) Option {
	return func(o *options) error {
		if h == nil {
			return fmt.Errorf("%w: nil handler", ErrInvalidOption)
		}
		o.handler = h
		return nil
	}
}

// WithJoin joins these channels once connected (a cotal:// URL's ?channel= adds to them).
func WithJoin(channels ...string) Option {
	return func(o *options) error {
		for _, ch := range channels {
			if err := wire.ValidateChannelPattern(ch); err != nil {
				return fmt.Errorf("%w: %w", ErrInvalidOption, err)
			}
		}
		o.join = append(o.join, channels...)
		return nil
	}
}

// WithLogger sends the client's diagnostics to log (default: discarded).
func WithLogger(log *slog.Logger) Option {
	return func(o *options) error {
		if log == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		o.log = log
		return nil
	}
}

// WithConnectAttempts bounds how often Connect tries an unreachable broker (default 3), with
// backoff between attempts.
func WithConnectAttempts(n int) Option {
	return func(o *options) error {
		if n < 1 || n > 100 {
			return fmt.Errorf("%w: connect attempts %d must be 1-100", ErrInvalidOption, n)
		}
		o.connectAttempts = n
		return nil
	}
}

// WithSendWindow bounds how many pipelined sends (SendAsync, PostAsync, DirectMessageAsync,
// AskAsync) may await their acknowledgement at once (default DefaultSendWindow); a send beyond it
// waits for a slot. 1-65536.
func WithSendWindow(n int) Option {
	return func(o *options) error {
		if n < 1 || n > maxSendWindow {
			return fmt.Errorf("%w: send window %d must be 1-%d", ErrInvalidOption, n, maxSendWindow)
		}
		o.sendWindow = n
		return nil
	}
}

// WithNATSOptions adds nats.go options, for what this package does not expose (TLS roots, say).
// Options that would break the contract (the inbox prefix, the credential) are overridden.
func WithNATSOptions(opts ...nats.Option) Option {
	return func(o *options) error { o.natsOpts = append(o.natsOpts, opts...); return nil }
}
