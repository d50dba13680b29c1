// Package authservice runs a space's auth service in user-auth mode (SPEC §10, §13.1): the NATS
// auth callout that admits people's and managed agents' connections on short-lived bearers, the
// exchange that issues those bearers on its loopback and public faces, and the route remote
// managers take for their authority. `cotal up --user-auth` starts one beside the broker.
package authservice

import (
	"context"

	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/authendpoint"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/remotemgr"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/internal/userauth/callout"
	"github.com/gocotal/cotal/internal/userauth/oidc"
	"github.com/gocotal/cotal/wire"
)

// Config is what an auth service runs on.
type Config struct {
	// Dir is the space's user-auth state (Paths).
	Dir     string
	Space   wire.Space
	Keyring *authority.Keyring
	Ledger  *ledger.Ledger
	// Server is the broker URL the callout connects to, and the one the mesh document advertises
	// unless AdvertisedServer names another (how other machines reach the broker: a public name,
	// a TLS or websocket front).
	Server           string
	AdvertisedServer string
	// IdP is the identity provider people log in with.
	IdP IdP
	// PublicAddr is where the public face listens; 127.0.0.1:0 when empty. It is plain HTTP: put
	// a TLS proxy in front of it before other machines use it.
	PublicAddr string
	// PublicURL is the public face's URL as other machines reach it (a TLS proxy's), advertised
	// in the mesh document; its own address when empty.
	PublicURL string
	// TrustedProxy takes a public caller's address from the last X-Forwarded-For hop.
	TrustedProxy bool
	// RemoteManagerLifetime is how long the standing credentials of a remote manager live; it
	// renews them at three quarters of it. remotemgr.StandingLifetime when zero.
	RemoteManagerLifetime time.Duration
	// BearerLifetime, when set, caps every bearer the exchange mints (userauth.Exchange.Lifetime).
	BearerLifetime time.Duration
	// Node names this node in the cluster's records of its auth services (its server name).
	Node string
	// Cluster, on a cluster, is its name: every authority node serves the space's auth service,
	// and they hold its plane together.
	Cluster string
	Log     *slog.Logger
}

// IdP names the identity provider and the client this mesh's people log in as.
type IdP struct {
	Issuer   string `json:"issuer"`
	ClientID string `json:"clientId"`
}

// Paths of a space's user-auth state, under Config.Dir.
const (
	ownerSecretFile = "owner-secret.json"
	issuerFile      = "issuer.json"
	idpPinFile      = "idp.json"
	serviceFile     = "auth-service.json"
	// authInstanceFile keeps the auth endpoint's instance id.
	authInstanceFile = "auth-instance"
)

// Service is a running auth service.
type Service struct {
	cfg       Config
	loopback  *http.Server
	public    *http.Server
	callout   *callout.Service
	calloutNC *nats.Conn
	plane     *ledger.PlaneHold
	// authHeld and authEndpoint serve the auth endpoint: retire-lifecycle for remote managers.
	authHeld     *ledger.Held
	authEndpoint *authendpoint.Service
	started      chan struct{} // closed when Start returns: what it set up is in place
	// book records this node for the others.
	book      *nodeBook
	closeOnce sync.Once
	closeErr  error
	// LoopbackURL is the loopback face, which needs Cap; PublicURL the public face.
	LoopbackURL, PublicURL string
	Cap                    string
	// Host is the host's authority over people's managers and managed agents: what the host's
	// own manager enrolls a person's agents through.
	Host *remotemgr.Host
	// SentinelCreds are the shared, deny-all creds a client presents beside its bearer.
	SentinelCreds []byte
}

// MeshDocument is what GET /.well-known/cotal-mesh answers: what a person's CLI on another
// machine needs to log in and reach the mesh. The field names are a stable interface.
type MeshDocument struct {
	Space string `json:"space"`
	// Server is the broker URL.
	Server string `json:"server"`
	IdP    IdP    `json:"idp"`
	// ExchangeURL is the public face; ManagerAuthorityURL its remote-manager route.
	ExchangeURL         string `json:"exchangeUrl"`
	ManagerAuthorityURL string `json:"managerAuthorityUrl"`
	// SentinelCreds are the shared, deny-all creds a client presents beside its bearer.
	SentinelCreds string `json:"sentinelCreds"`
	// ExchangeURLs, ManagerAuthorityURLs and Servers are every authority node's public face,
	// remote-manager route and broker (this node's first): a client goes on through another one
	// when its node is down. A document without them names one node.
	ExchangeURLs         []string `json:"exchangeUrls,omitempty"`
	ManagerAuthorityURLs []string `json:"managerAuthorityUrls,omitempty"`
	Servers              []string `json:"servers,omitempty"`
}

// liveDocument is the mesh document a face serves: completed with the cluster's nodes as they
// were last read at each request.
type liveDocument struct {
	base MeshDocument
	book *nodeBook
}

// MarshalJSON implements json.Marshaler.
func (d liveDocument) MarshalJSON() ([]byte, error) { return json.Marshal(d.book.document(d.base)) }

// Start runs the auth service of cfg.Space: it pins the IdP (a start with another IdP than the
// pinned one is refused, since every owner derives from it), loads or creates the owner secret
// and the bearer keys, answers the broker's auth callout, and serves both faces. It returns once
// both faces listen and the callout is subscribed.
func Start(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if err := atomicfile.MkdirPrivate(cfg.Dir); err != nil {
		return nil, err
	}
	if err := pinIdP(filepath.Join(cfg.Dir, idpPinFile), cfg.IdP); err != nil {
		return nil, err
	}
	hc := userauth.NewHTTPClient()
	provider, err := oidc.Discover(ctx, hc, cfg.IdP.Issuer)
	if err != nil {
		return nil, fmt.Errorf("the identity provider %s: %w", cfg.IdP.Issuer, err)
	}
	kv, err := cfg.Ledger.UserAuthStore(ctx)
	if err != nil {
		return nil, err
	}
	st, err := OpenState(ctx, cfg.Dir, cfg.Space, kv)
	if err != nil {
		return nil, err
	}
	issuer, err := userauth.LoadOrCreateIssuer(filepath.Join(cfg.Dir, issuerFile), cfg.Space)
	if err != nil {
		return nil, err
	}
	keys, err := cfg.Keyring.Space(cfg.Space)
	if err != nil {
		return nil, err
	}
	ex := &userauth.Exchange{
		Space: cfg.Space, Issuer: issuer, People: st.People, OwnerSecret: st.secret,
		Identity: verifier{oidc.NewVerifier(provider, cfg.IdP.ClientID, hc)},
		Roots:    roots{cfg.Ledger}, Managers: managers{cfg.Ledger, st.Registry, cfg.Log}, Lifetime: cfg.BearerLifetime, Log: cfg.Log,
	}
	host := &remotemgr.Host{Space: cfg.Space, Keys: keys, Ledger: cfg.Ledger, People: people{ex}, Registry: st.Registry, Managed: st.People, Life: cfg.RemoteManagerLifetime, Log: cfg.Log}
	s := &Service{cfg: cfg, Cap: userauth.NewCap(), Host: host, started: make(chan struct{})}
	defer close(s.started)
	ck, err := cfg.Keyring.Callout(cfg.Space)
	if err != nil {
		return nil, err
	}
	// One auth service per space: a second refuses while this one holds the plane, and this one
	// stops admitting connects if it ever loses it. The authority nodes of a cluster serve as one
	// and hold it together.
	lost := func(err error) {
		cfg.Log.Error("the auth service lost its plane claim: it stops", "space", cfg.Space, "err", err)
		go func() { // not on the claim's own goroutine, which Close waits for
			<-s.started
			_ = s.Close(context.Background())
		}()
	}
	if cfg.Cluster != "" {
		s.plane, err = cfg.Ledger.SharePlane(ctx, fmt.Sprintf("auth-service:%s:cluster:%s", cfg.Space, cfg.Cluster), lost)
	} else {
		s.plane, err = cfg.Ledger.HoldPlane(ctx, fmt.Sprintf("auth-service:%s:%d", cfg.Space, os.Getpid()), lost)
	}
	if err != nil {
		return nil, fmt.Errorf("claim the auth plane of space %s: %w", cfg.Space, err)
	}
	if err := s.serveAuthEndpoint(ctx, host); err != nil {
		return nil, errors.Join(err, s.Close(context.WithoutCancel(ctx)))
	}
	if err := s.serveFaces(ctx, ck, keys, issuer, ex, host); err != nil {
		return nil, errors.Join(err, s.Close(context.WithoutCancel(ctx)))
	}
	return s, nil
}

// authActor is the principal the auth endpoint is served as, local.cotal_auth.
const authActor = "cotal_auth"

// serveAuthEndpoint serves the auth endpoint (retire-lifecycle, SPEC §13.6) as its instance, whose
// id is kept in the state directory so a restart takes the same instance over: its gate fences
// the serving credential of the incarnation before.
func (s *Service) serveAuthEndpoint(ctx context.Context, host *remotemgr.Host) error {
	instance, err := endpoint.LoadOrCreateInstance(filepath.Join(s.cfg.Dir, authInstanceFile))
	if err != nil {
		return err
	}
	h, epoch, err := s.cfg.Ledger.HoldServing(ctx, meshwire.AuthEndpoint, authActor, instance, authendpoint.Commands(), authority.DaemonLifetime, s.cfg.Log)
	if err != nil {
		return fmt.Errorf("issue the auth endpoint's serving credential: %w", err)
	}
	s.authHeld = h
	s.authEndpoint, err = authendpoint.Serve(ctx, authendpoint.Config{Conn: h.Conn, Space: s.cfg.Space, Instance: instance, Epoch: epoch,
		Retire: host.RetireLifecycle, Log: s.cfg.Log})
	if err != nil {
		return fmt.Errorf("serve the auth endpoint: %w", err)
	}
	return nil
}

// serveFaces starts the callout and both faces of the exchange, and writes the discovery file.
// What it started is stopped by Close.
func (s *Service) serveFaces(ctx context.Context, ck *authority.CalloutKeys, keys *authority.SpaceKeys, issuer *userauth.Issuer, ex *userauth.Exchange, host *remotemgr.Host) error {
	if err := s.serveCallout(ctx, ck, keys, ex); err != nil {
		return err
	}
	routes := map[string]userauth.Handler{
		userauth.PathExchange: ex.Handler(),
		// SPEC §13.6 puts this route on the operator's loopback face; a remote manager runs on
		// another machine, so the public face serves it too, as the reference does.
		remotemgr.Path: func(ctx context.Context, in *userauth.Incoming) (int, any) { return host.Handle(ctx, in.Body) },
		// A person on another machine takes their half of a session of their remote manager here.
		remotemgr.HolderPath: func(ctx context.Context, in *userauth.Incoming) (int, any) { return host.HandleHolder(ctx, in.Body) },
	}
	sentinel, err := ck.SentinelCreds()
	if err != nil {
		return err
	}
	s.SentinelCreds = sentinel
	pub, err := listen(s.cfg.PublicAddr)
	if err != nil {
		return fmt.Errorf("the exchange's public face: %w", err)
	}
	loop, err := listen("127.0.0.1:0")
	if err != nil {
		pub.Close()
		return fmt.Errorf("the exchange's loopback face: %w", err)
	}
	s.PublicURL = strings.TrimSuffix(s.cfg.PublicURL, "/")
	if s.PublicURL == "" {
		s.PublicURL = "http://" + pub.Addr().String()
	}
	s.LoopbackURL = "http://" + loop.Addr().String()
	advertised := s.cfg.AdvertisedServer
	if advertised == "" {
		advertised = s.cfg.Server
	}
	doc := MeshDocument{Space: string(s.cfg.Space), Server: advertised, IdP: s.cfg.IdP, ExchangeURL: s.PublicURL,
		ManagerAuthorityURL: managerAuthorityURL(s.PublicURL), SentinelCreds: string(sentinel)}
	if err := s.startBook(ctx, doc); err != nil {
		pub.Close()
		loop.Close()
		return err
	}
	opts := userauth.FaceOptions{Issuer: issuer, MeshDocument: liveDocument{doc, s.book}, Log: s.cfg.Log}
	pubFace, err := userauth.NewPublicFace(routes, userauth.PublicOptions{FaceOptions: opts, TrustedProxy: s.cfg.TrustedProxy})
	if err == nil {
		var loopFace *userauth.Face
		if loopFace, err = userauth.NewLoopbackFace(s.Cap, routes, opts); err == nil {
			s.public, s.loopback = server(pubFace), server(loopFace)
		}
	}
	if err != nil {
		pub.Close()
		loop.Close()
		return err
	}
	go func() { _ = s.public.Serve(pub) }()
	go func() { _ = s.loopback.Serve(loop) }()
	return s.writeReady()
}

// startBook records this node's auth service in the user-auth store and reads the others', then
// keeps doing so every NodeBeat until Close.
func (s *Service) startBook(ctx context.Context, doc MeshDocument) error {
	kv, err := s.cfg.Ledger.UserAuthStore(ctx)
	if err != nil {
		return err
	}
	node := s.cfg.Node
	if node == "" {
		node = "local"
	}
	s.book = &nodeBook{kv: kv, answering: s.answering, self: NodeRecord{Node: node, Server: doc.Server,
		ExchangeURL: doc.ExchangeURL, ManagerAuthorityURL: doc.ManagerAuthorityURL}}
	// The first beat is the start's: a loaded cluster that does not answer in time is asked again.
	if err := jsapi.RetryUnanswered(ctx, s.book.beat); err != nil {
		return err
	}
	s.book.start(ctx, func(err error) { s.cfg.Log.Warn("the auth service's node record", "err", err) })
	return nil
}

// answering reports whether the callout can be handed a connect: subscribed on a live connection.
func (s *Service) answering() bool {
	return s.callout != nil && s.callout.Answering() && s.calloutNC != nil && s.calloutNC.IsConnected()
}

// server wraps a face in an http.Server with the timeouts a face does not set itself.
func server(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10}
}

// listen listens on addr (host:port); an empty addr takes a free loopback port.
func listen(addr string) (net.Listener, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	return net.Listen("tcp", addr)
}

// Ready is the auth service's discovery file (auth-service.json, 0600): where its faces listen
// and the loopback face's cap, for the host's own tools.
type Ready struct {
	URL       string `json:"url"`
	PublicURL string `json:"publicUrl"`
	PID       int    `json:"pid"`
	Cap       string `json:"cap"`
}

func (s *Service) writeReady() error {
	raw, _ := json.MarshalIndent(Ready{URL: s.LoopbackURL, PublicURL: s.PublicURL, PID: os.Getpid(), Cap: s.Cap}, "", "  ") // always encodes
	return atomicfile.Write(filepath.Join(s.cfg.Dir, serviceFile), append(raw, '\n'), 0o600)
}

// Close stops the faces and the callout, removes the discovery file and releases the plane. It
// may be called more than once.
func (s *Service) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		_ = os.Remove(filepath.Join(s.cfg.Dir, serviceFile))
		var err error
		if s.public != nil {
			err = errors.Join(err, s.public.Shutdown(ctx))
		}
		if s.loopback != nil {
			err = errors.Join(err, s.loopback.Shutdown(ctx))
		}
		if s.book != nil {
			err = errors.Join(err, s.book.close(ctx))
		}
		s.stopCallout()
		if s.authEndpoint != nil {
			err = errors.Join(err, s.authEndpoint.Stop(ctx))
		}
		if s.authHeld != nil {
			err = errors.Join(err, s.authHeld.Release())
		}
		if s.plane != nil {
			err = errors.Join(err, s.plane.Release(ctx))
		}
		s.closeErr = err
	})
	return s.closeErr
}

func (s *Service) stopCallout() {
	if s.callout != nil {
		s.callout.Stop()
	}
	if s.calloutNC != nil {
		s.calloutNC.Close()
	}
}

// serveCallout connects as the callout user and answers the broker's auth requests: a verified
// bearer whose row, scope, lifecycle and root still hold gets a user JWT of its view's profile
// that expires with the bearer.
func (s *Service) serveCallout(ctx context.Context, ck *authority.CalloutKeys, keys *authority.SpaceKeys, ex *userauth.Exchange) error {
	creds, err := ck.CalloutCreds()
	if err != nil {
		return err
	}
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		return err
	}
	kp, err := jwt.ParseDecoratedNKey(creds)
	if err != nil {
		return err
	}
	seed, _ := kp.Seed()
	nc, err := dial.Anonymous(ctx, s.cfg.Server, nats.UserJWTAndSeed(token, string(seed)), nats.Name("cotal auth callout"))
	if err != nil {
		return fmt.Errorf("connect as the auth callout: %w", err)
	}
	s.calloutNC = nc
	// The callout answers until Close, not until the start's context ends.
	svc, err := callout.Serve(context.WithoutCancel(ctx), nc, callout.Config{
		Account: ck.Account(), XKey: ck.XKey(), DataAccount: keys.AccountPublicKey(), Log: s.cfg.Log,
		Authorize: func(ctx context.Context, r callout.Request) (string, error) {
			return authorize(ctx, ex, keys, r)
		},
	})
	if err != nil {
		nc.Close()
		return err
	}
	s.callout = svc
	return nil
}

// authorize decides one connect.
func authorize(ctx context.Context, ex *userauth.Exchange, keys *authority.SpaceKeys, r callout.Request) (string, error) {
	conn, err := wire.ParseConnID(r.ConnName)
	if err != nil {
		return "", fmt.Errorf("the connection name is no client nonce: %w", err)
	}
	g, err := ex.Authorize(ctx, r.Token)
	if err != nil {
		return "", err
	}
	profile, err := viewProfile(g.Claims.Act.View)
	if err != nil {
		return "", err
	}
	p := g.Row.Principal()
	grant := authority.Grant{Principal: p, ConnID: conn, LifecycleUID: g.Row.LifecycleUID}
	switch profile {
	case authority.ProfileAgent:
		grant.AllowSubscribe, grant.AllowPublish, grant.Role = g.Row.AllowSubscribe, concrete(g.Row.AllowPublish), g.Row.Role
	case authority.ProfileManagerCaller:
		// The one instance the exchange selected and Authorize found still live; the spawn
		// family only for a bearer whose scope holds spawn.
		grant.Serve = &authority.ServeRows{Endpoint: wire.ManagerEndpoint, Instance: g.Claims.Act.ManagerInstanceID}
		if slices.Contains(g.Claims.Act.Scope, userauth.ScopeSpawn) {
			grant.Capabilities = []string{authority.CapabilitySpawn}
		}
	}
	life := time.Until(g.Claims.ExpiresAt())
	if life <= 0 {
		return "", errors.New("the bearer expired")
	}
	cred, err := keys.SignUser(authority.MintRequest{Profile: profile, Grant: grant, Expires: life, Name: p.Name()}, r.UserNkey)
	if err != nil {
		return "", err
	}
	return cred.JWT, nil
}

// concrete keeps the concrete channels of a publish ACL: a credential posts to channels, never to
// a pattern.
func concrete(acl []string) []string {
	var out []string
	for _, ch := range acl {
		if wire.IsConcreteChannel(ch) {
			out = append(out, ch)
		}
	}
	return out
}

// viewProfile is the profile the callout mints for a view; a view this implementation has no
// profile for is refused.
func viewProfile(v userauth.View) (authority.Profile, error) {
	switch v {
	case "":
		return authority.ProfileAgent, nil
	case userauth.ViewAdmin:
		return authority.ProfileAdmin, nil
	case userauth.ViewChannelWriter:
		return authority.ProfileChannelWriter, nil
	case userauth.ViewPurger, userauth.ViewChannelPurger:
		return authority.ProfilePurger, nil
	case userauth.ViewManagerCaller:
		return authority.ProfileManagerCaller, nil
	case userauth.ViewDeployer:
		return authority.ProfileDeployer, nil
	}
	return "", fmt.Errorf("view %s has no profile here", v)
}

// pinIdP records the IdP at the first start and refuses any other afterwards: owners derive from
// its issuer, so changing it would hand every person a new owner.
func pinIdP(path string, idp IdP) error {
	if idp.Issuer == "" || idp.ClientID == "" {
		return errors.New("user-auth mode needs an identity provider: its issuer and client id")
	}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		b, _ := json.MarshalIndent(idp, "", "  ") // strings always encode
		return atomicfile.Write(path, append(b, '\n'), 0o600)
	}
	if err != nil {
		return err
	}
	var pinned IdP
	if err := json.Unmarshal(raw, &pinned); err != nil || pinned.Issuer == "" {
		return fmt.Errorf("%s holds no IdP pin: fix or remove it (removing it re-keys every owner)", path)
	}
	if pinned != idp {
		return fmt.Errorf("this mesh's people log in with %s (client %s), pinned in %s; it was started with %s (client %s): owners derive from the issuer, so start it with the pinned IdP, or remove the pin to re-key every owner",
			pinned.Issuer, pinned.ClientID, path, idp.Issuer, idp.ClientID)
	}
	return nil
}

// PinnedIdP returns the IdP pinned in dir.
func PinnedIdP(dir string) (IdP, error) {
	var p IdP
	raw, err := os.ReadFile(filepath.Join(dir, idpPinFile))
	if err != nil {
		return p, fmt.Errorf("no identity provider is pinned in %s (has `cotal up --user-auth` run?): %w", dir, err)
	}
	if err := json.Unmarshal(raw, &p); err != nil || p.Issuer == "" {
		return p, fmt.Errorf("%s holds no IdP pin", filepath.Join(dir, idpPinFile))
	}
	return p, nil
}

// ReadReady reads the discovery file of the auth service whose state is in dir.
func ReadReady(dir string) (*Ready, error) {
	raw, err := os.ReadFile(filepath.Join(dir, serviceFile))
	if err != nil {
		return nil, fmt.Errorf("the auth service is not running (%w)", err)
	}
	var r Ready
	if err := json.Unmarshal(raw, &r); err != nil || r.URL == "" {
		return nil, fmt.Errorf("%s is not an auth service's discovery file", filepath.Join(dir, serviceFile))
	}
	return &r, nil
}
