package remotemgr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/wire"
)

// SuperviseConfig is what a remote manager (`cotal supervise --mesh URL`) runs with.
type SuperviseConfig struct {
	Space wire.Space
	// Server is the broker URL agents and the manager connect to (several comma-separated: a
	// cluster's nodes).
	Server string
	// AuthorityURL is the host's manager-service-authority route; ExchangeURL the exchange the
	// spawned agents get their bearers from; SentinelCreds the space's shared sentinel creds they
	// present beside them. Both URLs may name several, comma-separated: every authority node's.
	AuthorityURL  string
	ExchangeURL   string
	SentinelCreds []byte
	// Actor is the person's actor whose row holds supervise.
	Actor string
	// IDToken returns a fresh IdP token of the person.
	IDToken func(ctx context.Context) (string, error)
	HTTP    *http.Client
	// MaxSessions is its ceiling of attach sessions; manager.DefaultMaxSessions when zero.
	MaxSessions int
	// Instance is the manager's instance id, claimed by the caller for as long as Supervise runs.
	Instance wire.LifecycleUID
	// MaterialDir is where the manager writes its agents' launch material; AwaitWake asks an
	// agent's harness hook for its idle wait.
	MaterialDir string
	AwaitWake   func(context.Context, wire.Principal) (string, error)
	// Ready, when set, is called once the manager serves, with its instance and epoch.
	Ready func(instance wire.LifecycleUID, epoch int64)
	Log   *slog.Logger
}

// renewRetry bounds the wait before a failed bundle renewal is tried again.
const renewRetry = 10 * time.Second

// Supervise runs a remote manager for o.Space until ctx ends or its host takes its authority
// away: it prepares with the host, registers its serve gate as its executor, activates, and serves
// the manager endpoint on the serve credential while the supervisor credential holds its lease and
// answers the manager liveness plane. The standing bundle is renewed at three quarters of its
// lifetime; a renewal the host refuses (the person's supervise scope revoked, a newer incarnation)
// or a connection the broker closes (an eviction) ends it with an error, after it has stopped its
// agents, which are retired through the host.
func Supervise(ctx context.Context, o SuperviseConfig) error {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c, err := NewClient(ClientConfig{Space: o.Space, URL: o.AuthorityURL, Actor: o.Actor, Instance: o.Instance, IDToken: o.IDToken, HTTP: o.HTTP, Server: o.Server})
	if err != nil {
		return err
	}
	st, err := c.Prepare(ctx)
	if err != nil {
		return fmt.Errorf("remote supervision of space %s was refused at prepare: %w", o.Space, err)
	}
	if err := register(ctx, o.Server, c, st.Executor); err != nil {
		return err
	}
	serve, epoch, err := c.Activate(ctx)
	if err != nil {
		return fmt.Errorf("remote supervision of space %s was refused at activate: %w", o.Space, err)
	}
	account, err := issuerAccount(serve.JWT)
	if err != nil {
		return err
	}
	supConn, err := dial.AsRenewing(ctx, o.Server, st.Supervisor)
	if err != nil {
		return fmt.Errorf("connect as the remote manager's supervisor: %w", err)
	}
	defer supConn.Close()
	serveConn, err := dial.AsRenewing(ctx, o.Server, serve)
	if err != nil {
		return fmt.Errorf("connect as the remote manager's serve identity: %w", err)
	}
	defer serveConn.Close()
	lease, err := manager.HoldLease(ctx, supConn.Conn, o.Space, st.Supervisor.Principal, o.Instance, log)
	if err != nil {
		return err
	}
	defer lease.Close()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	sup, err := manager.New(manager.Config{
		Issue: remoteIssuer(c, o), Space: o.Space, URL: o.Server, MaterialDir: o.MaterialDir,
		MCPCommand: []string{exe, "mcp"}, AwaitWake: o.AwaitWake, Log: log,
	})
	if err != nil {
		return err
	}
	defer func() {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), manager.AgentsStopWait)
		defer cancel()
		_ = sup.Close(actx) // each agent's own failure is logged by the supervisor
	}()
	svc, err := sup.Serve(ctx, manager.ServiceConfig{
		Conn: serveConn.Conn, Presence: supConn.Conn, Space: o.Space, Instance: o.Instance, Epoch: epoch, Owner: c.Owner(), Log: log,
		Sessions: newRemoteSessions(c), MaxSessions: o.MaxSessions,
		HostLaunch: func(ctx context.Context, caller wire.Lifecycle) bool {
			ok, _, err := c.AuthorizeAdmin(ctx, caller)
			if err != nil {
				log.Warn("ask the host whether a caller may launch", "caller", caller, "err", err)
			}
			return ok
		},
		CallerGrant: func(ctx context.Context, caller wire.Lifecycle) (*cotal.Grant, error) {
			_, g, err := c.AuthorizeAdmin(ctx, caller)
			switch {
			case err != nil:
				return nil, err
			case g == nil:
				return nil, fmt.Errorf("%s holds no spawn scope of the manager's owner", caller)
			}
			return &cotal.Grant{Principal: caller.Principal, Lifecycle: caller.UID, Role: g.Role, AllowSubscribe: g.AllowSubscribe, AllowPublish: g.AllowPublish}, nil
		},
	})
	if err != nil {
		return fmt.Errorf("serve the manager endpoint: %w", err)
	}
	if o.Ready != nil {
		o.Ready(o.Instance, epoch)
	}
	runErr := keepRemote(ctx, c, account, supConn, serveConn, earliest(st.Supervisor, serve), log)
	// The service stops first (its sessions' ledger closes), then the deferred: the agents, the
	// lease, the connections.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), manager.ServiceStopWait)
	defer cancel()
	if err := svc.Stop(sctx); err != nil {
		log.Warn("stop serving the manager endpoint", "err", err)
	}
	return runErr
}

// register connects as the executor and writes the instance's serve gate.
func register(ctx context.Context, server string, c *Client, exe *authority.Credential) error {
	nc, err := dial.As(ctx, server, exe)
	if err != nil {
		return fmt.Errorf("connect as the remote manager's executor: %w", err)
	}
	defer nc.Close()
	return c.Register(ctx, nc)
}

// issuerAccount returns the account a user JWT was issued for: the one a renewal names.
func issuerAccount(token string) (string, error) {
	claims, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return "", err
	}
	return claims.IssuerAccount, nil
}

// remoteIssuer enrolls agents through the host: each a managed agent of the manager's person,
// connecting on bearers it exchanges its actor token for, retired through the host when done.
func remoteIssuer(c *Client, o SuperviseConfig) manager.Issuer {
	return func(ctx context.Context, spec manager.Spec) (*manager.Launch, error) {
		e, err := c.Enroll(ctx, Enrollment{Name: spec.Name, Role: spec.Role, Subscribe: spec.Subscribe,
			AllowSubscribe: spec.AllowSubscribe, AllowPublish: spec.AllowPublish})
		if err != nil {
			return nil, err
		}
		p, err := wire.NewPrincipal(c.Owner(), spec.Name)
		if err != nil {
			return nil, err
		}
		lc := wire.Lifecycle{Principal: p, UID: e.LifecycleUID}
		return &manager.Launch{Principal: p, UID: e.LifecycleUID, Retire: func(ctx context.Context) error { return c.Retire(ctx, lc) },
			Bearer: &manager.BearerLaunch{Exchange: o.ExchangeURL, ActorToken: e.ActorToken, SentinelCreds: o.SentinelCreds,
				Role: e.Grant.Role, AllowSubscribe: e.Grant.AllowSubscribe, AllowPublish: e.Grant.AllowPublish}}, nil
	}
}

// keepRemote renews the standing bundle at three quarters of its lifetime and watches the two
// connections, until ctx ends (nil), the host refuses a renewal, or the broker closes a connection.
func keepRemote(ctx context.Context, c *Client, account string, sup, serve *dial.Renewing, expires time.Time, log *slog.Logger) error {
	closed := make(chan string, 4)
	ended := func(name string) {
		select {
		case closed <- name:
		default: // one report is enough
		}
	}
	for name, conn := range map[string]*dial.Renewing{"supervisor": sup, "serve": serve} {
		conn.SetClosedHandler(func(*nats.Conn) { ended(name) })
		// An eviction: the broker revoked the key. Reconnecting cannot help, so stop now rather
		// than after the client gives up.
		conn.SetDisconnectErrHandler(func(_ *nats.Conn, err error) {
			if errors.Is(err, nats.ErrAuthRevoked) {
				ended(name)
			}
		})
	}
	for {
		wait := time.Until(expires) * 3 / 4
		select {
		case <-ctx.Done():
			return nil
		case name := <-closed:
			return fmt.Errorf("remote supervision ended: the broker closed the %s connection (evicted, or its credential expired)", name)
		case <-time.After(wait):
		}
		for {
			st, err := c.Renew(ctx, account)
			if err == nil {
				if err = errors.Join(sup.Renew(ctx, st.Supervisor), serve.Renew(ctx, st.Serve)); err == nil {
					expires = earliest(st.Supervisor, st.Serve)
				}
			}
			var ref *Refusal
			switch {
			case err == nil:
			case ctx.Err() != nil:
				return nil
			case errors.As(err, &ref) && (ref.Code == wire.CodePermissionDenied || ref.Code == wire.CodeConflict || ref.Code == wire.CodeFailedPrecondition):
				return fmt.Errorf("remote supervision ended: the host refused the renewal: %w", err)
			case !time.Now().Before(expires):
				return fmt.Errorf("remote supervision ended: the credentials expired unrenewed: %w", err)
			default:
				log.Warn("renew the remote manager's credentials", "err", err)
				select {
				case <-ctx.Done():
					return nil
				case name := <-closed:
					return fmt.Errorf("remote supervision ended: the broker closed the %s connection", name)
				case <-time.After(min(renewRetry, time.Until(expires)/4)):
				}
				continue
			}
			break
		}
	}
}

// earliest returns when the first of creds expires.
func earliest(creds ...*authority.Credential) time.Time {
	var t time.Time
	for _, c := range creds {
		if t.IsZero() || c.Expires.Before(t) {
			t = c.Expires
		}
	}
	return t
}
