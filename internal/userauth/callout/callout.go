package callout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/internal/meshwire"
)

// DefaultStartTimeout bounds Serve's readiness flush when its ctx has no deadline.
const DefaultStartTimeout = 10 * time.Second

// maxInFlight bounds the requests decided at once; further requests wait in the subscription.
const maxInFlight = 64

// ErrInvalidConfig is matched by the error Serve returns for an unusable Config.
var ErrInvalidConfig = errors.New("callout: invalid config")

// Config is what a callout service needs. Account, XKey, DataAccount and Authorize are required.
type Config struct {
	// Account is the auth account's key pair, which signs every response.
	Account nkeys.KeyPair
	// XKey is the auth account's curve key pair: requests are sealed to it, and responses are
	// sealed with it.
	XKey nkeys.KeyPair
	// DataAccount is the public key of the space's data account, the only account a user JWT
	// may land a connection in.
	DataAccount string
	// AllowedServers lists the ids (N…) of the servers whose requests are answered; empty
	// answers any server whose signed id matches its sealing key.
	AllowedServers []string
	// Authorize decides a connect: a user JWT for r.UserNkey, or an error to refuse it. Its ctx
	// ends when the server stops waiting. Its error is logged, so it must not carry the token.
	// It is called concurrently.
	Authorize func(ctx context.Context, r Request) (userJWT string, err error)
	// Log receives one line per dropped or refused request; nil discards.
	Log *slog.Logger
}

// validate checks the config and returns the auth account's public key.
func (c *Config) validate() (string, error) {
	if c.Account == nil || c.XKey == nil || c.Authorize == nil {
		return "", fmt.Errorf("%w: Account, XKey and Authorize are required", ErrInvalidConfig)
	}
	acct, err := c.Account.PublicKey()
	if err != nil || !nkeys.IsValidPublicAccountKey(acct) {
		return "", fmt.Errorf("%w: Account is not an account key pair", ErrInvalidConfig)
	}
	if xk, err := c.XKey.PublicKey(); err != nil || !nkeys.IsValidPublicCurveKey(xk) {
		return "", fmt.Errorf("%w: XKey is not a curve key pair", ErrInvalidConfig)
	}
	if !nkeys.IsValidPublicAccountKey(c.DataAccount) {
		return "", fmt.Errorf("%w: DataAccount %q is not a public account key", ErrInvalidConfig, c.DataAccount)
	}
	if c.DataAccount == acct {
		return "", fmt.Errorf("%w: DataAccount is the auth account itself", ErrInvalidConfig)
	}
	for _, id := range c.AllowedServers {
		if !nkeys.IsValidPublicServerKey(id) {
			return "", fmt.Errorf("%w: allowed server %q is not a public server key", ErrInvalidConfig, id)
		}
	}
	return acct, nil
}

// Service is a running callout responder. Stop ends it. It is safe for concurrent use.
type Service struct {
	h      *handler
	sub    *nats.Subscription
	ctx    context.Context // ends at Stop; parents every decision
	cancel context.CancelFunc
	sem    chan struct{} // bounds the decisions in flight

	mu        sync.Mutex
	stopped   bool        // mu guards stopped; once set, no decision starts
	stopWatch func() bool // mu guards stopWatch; it stops the ctx watcher

	wg       sync.WaitGroup // the decisions in flight
	stopOnce sync.Once
}

// Serve answers the authorization requests of the auth account on nc, which must be connected as
// the account's callout user and should serve nothing else. It returns once the broker has the
// subscription, so a client connecting after Serve returns is answered; a subscription the broker
// refused is an error. The service runs until Stop or until ctx ends; ctx's deadline, or
// DefaultStartTimeout, bounds the start.
func Serve(ctx context.Context, nc *nats.Conn, cfg Config) (*Service, error) {
	acct, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.AllowedServers = append([]string(nil), cfg.AllowedServers...)
	s := &Service{
		h:   &handler{cfg: cfg, accountPub: acct, log: log},
		sem: make(chan struct{}, maxInFlight),
	}
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.sub, err = nc.QueueSubscribe(meshwire.AuthCalloutSubject, meshwire.AuthCalloutQueue, s.onMsg)
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("subscribe %s: %w", meshwire.AuthCalloutSubject, err)
	}
	if err := s.flush(ctx, nc); err != nil {
		s.Stop()
		return nil, err
	}
	s.mu.Lock() // the watcher may fire at once, and its Stop reads stopWatch
	s.stopWatch = context.AfterFunc(ctx, s.Stop)
	s.mu.Unlock()
	return s, nil
}

// flush waits until the broker has processed the subscription, and reports a refusal of it. The
// broker answers a refused subscribe with a permissions violation before the flush's PONG, and
// nats.go records it as the connection's last error before the flush returns.
func (s *Service) flush(ctx context.Context, nc *nats.Conn) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultStartTimeout)
		defer cancel()
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("flush subscription to %s: %w", meshwire.AuthCalloutSubject, err)
	}
	if err := nc.LastError(); errors.Is(err, nats.ErrPermissionViolation) {
		return fmt.Errorf("subscribe %s in queue %s: %w", meshwire.AuthCalloutSubject, meshwire.AuthCalloutQueue, err)
	}
	return nil
}

// onMsg starts the decision of one request, waiting for a free slot first.
func (s *Service) onMsg(m *nats.Msg) {
	select {
	case s.sem <- struct{}{}:
	case <-s.ctx.Done():
		return
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		<-s.sem
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() { <-s.sem }()
		reply := s.h.handle(s.ctx, m.Header, m.Data)
		if reply == nil || m.Reply == "" {
			return
		}
		if err := m.Respond(reply); err != nil {
			s.h.log.Warn("auth callout response not sent", "err", err.Error())
		}
	}()
}

// Answering reports whether the service is subscribed for requests on a connected connection:
// whether the broker can hand it a connect to decide.
func (s *Service) Answering() bool {
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	return !stopped && s.sub.IsValid()
}

// Stop unsubscribes, cancels the decisions in flight and waits for them to end. It is idempotent.
func (s *Service) Stop() {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.stopped = true
		if s.stopWatch != nil {
			s.stopWatch()
		}
		s.mu.Unlock()
		s.cancel()
		if s.sub != nil {
			// The connection may be closed already, which ends the subscription too.
			_ = s.sub.Unsubscribe()
		}
		s.wg.Wait()
	})
}
