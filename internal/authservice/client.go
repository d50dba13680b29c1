package authservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal"

	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/failover"
	"github.com/gocotal/cotal/internal/remotemgr"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/internal/userauth/oidc"
	"github.com/gocotal/cotal/wire"
)

// maxDocument bounds a mesh document.
const maxDocument = 256 << 10

// FetchMeshDocument reads what the exchange at meshURL advertises (GET /.well-known/cotal-mesh):
// the space, its broker, its identity provider and its routes. The URL must be https, or http on
// loopback, and is not redirected.
//
// meshURL may name several exchanges, comma-separated (the nodes of a cluster): the first that
// answers is read.
func FetchMeshDocument(ctx context.Context, hc *http.Client, meshURL string) (*MeshDocument, error) {
	var doc *MeshDocument
	err := failover.New(failover.Split(meshURL)...).Do(ctx, func(ctx context.Context, u string) (err error) {
		doc, err = fetchMeshDocument(ctx, hc, u)
		return err
	})
	return doc, err
}

// fetchMeshDocument reads the mesh document of one exchange.
func fetchMeshDocument(ctx context.Context, hc *http.Client, meshURL string) (*MeshDocument, error) {
	meshURL = strings.TrimSuffix(meshURL, "/")
	if err := oidc.CheckURL(meshURL); err != nil {
		return nil, fmt.Errorf("mesh URL %s: %w", meshURL, err)
	}
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return errors.New("the exchange redirected") }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, meshURL+userauth.PathMesh, nil)
	if err != nil {
		return nil, err
	}
	res, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reach the mesh at %s: %w", meshURL, err)
	}
	defer res.Body.Close()
	if err := failover.Status(res.StatusCode); err != nil {
		return nil, fmt.Errorf("reach the mesh at %s: %w", meshURL, err)
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s is not a cotal exchange: GET %s answered HTTP %d", meshURL, userauth.PathMesh, res.StatusCode)
	}
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxDocument+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxDocument {
		return nil, fmt.Errorf("the mesh document of %s is over %d bytes", meshURL, maxDocument)
	}
	var doc MeshDocument
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("the mesh document of %s: %w", meshURL, err)
	}
	if err := doc.validate(); err != nil {
		return nil, fmt.Errorf("the mesh document of %s: %w", meshURL, err)
	}
	return &doc, nil
}

// validate checks what a client relies on.
func (d *MeshDocument) validate() error {
	if _, err := wire.ParseSpace(d.Space); err != nil {
		return err
	}
	if d.Server == "" || d.IdP.ClientID == "" {
		return errors.New("it names no broker or IdP client")
	}
	if err := bearerSafe(d.Server); err != nil {
		return err
	}
	for _, u := range []string{d.IdP.Issuer, d.ExchangeURL, d.ManagerAuthorityURL} {
		if err := oidc.CheckURL(u); err != nil {
			return err
		}
	}
	// Another node's entry the client would not send a bearer or a token to is left out, not
	// taken for a broken document: the node itself answered well.
	d.Servers = slices.DeleteFunc(d.Servers, func(u string) bool { return bearerSafe(u) != nil })
	d.ExchangeURLs = slices.DeleteFunc(d.ExchangeURLs, func(u string) bool { return oidc.CheckURL(u) != nil })
	d.ManagerAuthorityURLs = slices.DeleteFunc(d.ManagerAuthorityURLs, func(u string) bool { return oidc.CheckURL(u) != nil })
	return nil
}

// Discover reads the document of the mesh at meshURL for the person whose logins are cached at
// sessionsPath. When none of meshURL's exchanges answers, it reads it from the other exchanges
// that person's login to the mesh recorded: a command that names a node of a cluster that is down
// goes on through the others.
func Discover(ctx context.Context, hc *http.Client, sessionsPath, meshURL string) (*MeshDocument, error) {
	doc, err := FetchMeshDocument(ctx, hc, meshURL)
	if err == nil || !failover.Unanswered(err) {
		return doc, err
	}
	sessions, lerr := oidc.LoadSessions(sessionsPath)
	if lerr != nil {
		return nil, err
	}
	key, sess, ferr := sessions.Find(failover.Split(meshURL)...)
	if ferr != nil {
		return nil, err
	}
	others := slices.DeleteFunc(append([]string{key}, sess.Aliases...), func(u string) bool {
		return slices.Contains(failover.Split(meshURL), u)
	})
	if len(others) == 0 {
		return nil, err
	}
	return FetchMeshDocument(ctx, hc, strings.Join(others, ","))
}

// Exchanges returns the document's exchange faces, in the order to try them: every node's when
// it lists them, else its own.
func (d *MeshDocument) Exchanges() *failover.Endpoints {
	return failover.New(append([]string{d.ExchangeURL}, d.ExchangeURLs...)...)
}

// ManagerAuthorities returns the document's remote-manager routes, as Exchanges.
func (d *MeshDocument) ManagerAuthorities() *failover.Endpoints {
	return failover.New(append([]string{d.ManagerAuthorityURL}, d.ManagerAuthorityURLs...)...)
}

// Brokers returns the broker URLs a client connects to, comma-separated as nats.go takes them:
// every node's when the document lists them, else its own.
func (d *MeshDocument) Brokers() string {
	return strings.Join(failover.New(append([]string{d.Server}, d.Servers...)...).URLs(), ",")
}

// LoginKeys are where a login to the mesh at meshURL is kept in the sessions file: under the first
// URL meshURL names, and found under every other URL it names and every exchange doc lists (the
// login's aliases). A login is only ever looked up by the URLs a person named (oidc.Sessions.Find
// matches them against the aliases too), never by what a mesh document says: a document cannot
// have another mesh's login sent to its exchange.
func LoginKeys(meshURL string, doc *MeshDocument) (key string, aliases []string) {
	all := failover.New(append(failover.Split(meshURL), doc.Exchanges().URLs()...)...).URLs()
	return all[0], all[1:]
}

// IDTokens returns a source of fresh IdP tokens for the person logged in to the mesh at meshURL
// (`cotal login`), from the sessions file at path: the cached token, or one renewed as
// oidc.RenewStored does, so every source of one login, in this process or another, shares each
// renewal. A mesh nobody logged in to is an error that says to log in; a logout ends the renewals.
func IDTokens(ctx context.Context, hc *http.Client, path, meshURL string, doc *MeshDocument) (func(context.Context) (string, error), error) {
	sessions, err := oidc.LoadSessions(path)
	if err != nil {
		return nil, err
	}
	key, sess, err := sessions.Find(failover.Split(meshURL)...)
	if err != nil {
		return nil, fmt.Errorf("not logged in to %s: run `cotal login --mesh %s` (%w)", meshURL, meshURL, err)
	}
	if sess.Issuer != doc.IdP.Issuer || sess.ClientID != doc.IdP.ClientID {
		return nil, fmt.Errorf("the login for %s is with %s, the mesh now uses %s: run `cotal login --mesh %s` again", key, sess.Issuer, doc.IdP.Issuer, key)
	}
	provider, err := oidc.Discover(ctx, hc, doc.IdP.Issuer)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex // the session is renewed in place, by one caller at a time
	return func(ctx context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		tok, err := oidc.RenewStored(ctx, hc, provider, path, key, &sess)
		if err != nil {
			return "", fmt.Errorf("renew the login for %s (`cotal login --mesh %s` if it has ended): %w", key, key, err)
		}
		return tok, nil
	}, nil
}

// bearerSafe refuses a broker a bearer would reach in clear from another machine: a bearer is
// replayable until it expires, so beyond loopback the broker must be reached over TLS (tls://,
// wss://).
func bearerSafe(server string) error {
	u, err := url.Parse(server)
	if err != nil || u.Host == "" {
		return fmt.Errorf("the broker %q is not a URL", server)
	}
	switch u.Scheme {
	case "tls", "wss":
		return nil
	case "nats", "ws":
		if ip := net.ParseIP(u.Hostname()); u.Hostname() == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
		return fmt.Errorf("the broker %s is reached without TLS: bearers sent in clear could be replayed; serve it with --tls-cert and --tls-key", server)
	}
	return fmt.Errorf("the broker %s has an unknown scheme", server)
}

// PersonOptions returns the broker URL and the SDK options the person logged in to the mesh at
// meshURL (`cotal login`) connects with as their actor: the mesh's sentinel creds and bearers the
// exchange issues for their IdP token, afresh at every connect. The client checks no channel
// itself: what the person's row grants, the broker enforces.
func PersonOptions(ctx context.Context, hc *http.Client, sessionsPath, meshURL, actor string) (string, []cotal.Option, error) {
	doc, err := Discover(ctx, hc, sessionsPath, meshURL)
	if err != nil {
		return "", nil, err
	}
	tokens, err := IDTokens(ctx, hc, sessionsPath, meshURL, doc)
	if err != nil {
		return "", nil, err
	}
	exchanges := doc.Exchanges()
	bearer := func(ctx context.Context) (tok string, act *userauth.Act, err error) {
		idToken, err := tokens(ctx)
		if err != nil {
			return "", nil, err
		}
		err = exchanges.Do(ctx, func(ctx context.Context, u string) (err error) {
			tok, act, err = userauth.FetchPersonBearer(ctx, hc, u, idToken, userauth.PersonBearer{Actor: actor})
			return err
		})
		return tok, act, err
	}
	_, act, err := bearer(ctx)
	if err != nil {
		return "", nil, err
	}
	p, err := act.Principal()
	if err != nil {
		return "", nil, err
	}
	everything := []string{">"}
	g := cotal.Grant{Profile: "agent", Principal: p, Space: wire.Space(doc.Space), Lifecycle: act.LifecycleUID,
		AllowSubscribe: everything, AllowPublish: everything}
	// The brokers in the document's order: the node whose exchange was named first.
	return doc.Brokers(), []cotal.Option{cotal.WithNATSOptions(nats.DontRandomize()), cotal.WithBearer([]byte(doc.SentinelCreds), g, func(ctx context.Context) (string, error) {
		tok, _, err := bearer(ctx)
		return tok, err
	})}, nil
}

// Login logs a person in to the mesh doc describes with its IdP's device flow: approve is given
// the device code to have the person confirm it (print where to, or approve it at a development
// IdP), then the flow is polled to its tokens, whose ID token is verified. It returns the tokens
// and who they name.
func Login(ctx context.Context, hc *http.Client, doc *MeshDocument, approve func(ctx context.Context, dc *oidc.DeviceCode) error) (*oidc.Tokens, *oidc.Identity, error) {
	p, err := oidc.Discover(ctx, hc, doc.IdP.Issuer)
	if err != nil {
		return nil, nil, err
	}
	dc, err := p.StartDevice(ctx, hc, doc.IdP.ClientID, nil)
	if err != nil {
		return nil, nil, err
	}
	if err := approve(ctx, dc); err != nil {
		return nil, nil, err
	}
	tok, err := p.PollDevice(ctx, hc, doc.IdP.ClientID, dc)
	if err != nil {
		return nil, nil, err
	}
	id, err := oidc.NewVerifier(p, doc.IdP.ClientID, hc).Verify(ctx, tok.IDToken)
	if err != nil {
		return nil, nil, fmt.Errorf("the identity provider's token: %w", err)
	}
	return tok, &id, nil
}

// ManagerCall is a person's connection to one manager instance through a manager-caller view
// (SPEC §10): the broker lets it call that instance on its own rail and nothing else.
type ManagerCall struct {
	Conn  *nats.Conn
	Space wire.Space
	// Me is the person's incarnation: the caller lifecycle of every call.
	Me wire.Lifecycle
	// Instance is the manager instance the view addresses.
	Instance wire.LifecycleUID
}

// DialManager connects the person logged in to the mesh at meshURL (sessionsPath) as their actor
// through a manager-caller view of instance, or of the only live manager they may address when
// instance is empty. Every reconnect's bearer names the same instance, so a reconnect never moves
// the caller to another manager. A bearer for another principal, view or instance than asked is
// refused.
func DialManager(ctx context.Context, hc *http.Client, sessionsPath, meshURL, actor string, instance wire.LifecycleUID) (*ManagerCall, error) {
	req := userauth.PersonBearer{Actor: actor, View: userauth.ViewManagerCaller, ManagerInstanceID: instance}
	v, err := dialView(ctx, hc, sessionsPath, meshURL, nil, &req, func(act *userauth.Act) bool {
		ok := act.ManagerInstanceID != "" && (req.ManagerInstanceID == "" || act.ManagerInstanceID == req.ManagerInstanceID)
		if ok {
			req.ManagerInstanceID = act.ManagerInstanceID // every reconnect asks for the same one
		}
		return ok
	})
	if err != nil {
		return nil, err
	}
	return &ManagerCall{Conn: v.Conn, Space: v.Space, Me: v.Me, Instance: req.ManagerInstanceID}, nil
}

// ViewConn is a person's connection through a view of theirs (SPEC §10).
type ViewConn struct {
	Conn  *nats.Conn
	Space wire.Space
	// Me is the person's incarnation: the caller lifecycle of every call.
	Me wire.Lifecycle
}

// DialView connects the person logged in to the mesh at meshURL (sessionsPath) as their actor
// through view, a view the exchange issues on its loopback face only (the deployer and
// channel-writer views): face is that face's discovery file, which only the mesh's host can
// read. A bearer for another principal or view than asked is refused.
func DialView(ctx context.Context, hc *http.Client, sessionsPath, meshURL, actor string, view userauth.View, face *Ready) (*ViewConn, error) {
	return dialView(ctx, hc, sessionsPath, meshURL, face, &userauth.PersonBearer{Actor: actor, View: view}, nil)
}

// dialView connects as req asks, with bearers from the exchange's public face, or from its
// loopback face when face is set; each bearer must be of req's actor and view, of the same
// incarnation as the first, and pass check when it is set.
func dialView(ctx context.Context, hc *http.Client, sessionsPath, meshURL string, face *Ready, req *userauth.PersonBearer, check func(*userauth.Act) bool) (*ViewConn, error) {
	doc, err := Discover(ctx, hc, sessionsPath, meshURL)
	if err != nil {
		return nil, err
	}
	tokens, err := IDTokens(ctx, hc, sessionsPath, meshURL, doc)
	if err != nil {
		return nil, err
	}
	exchanges, capability := doc.Exchanges(), ""
	if face != nil {
		exchanges, capability = failover.New(face.URL), face.Cap
	}
	var mu sync.Mutex // a reconnect fetches on the client's own goroutine
	var me wire.Lifecycle
	bearer := func(ctx context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		idToken, err := tokens(ctx)
		if err != nil {
			return "", err
		}
		var tok string
		var act *userauth.Act
		err = exchanges.Do(ctx, func(ctx context.Context, u string) (err error) {
			tok, act, err = userauth.FetchViewBearer(ctx, hc, u, capability, idToken, *req)
			return err
		})
		if err != nil {
			return "", err
		}
		p, err := act.Principal()
		switch {
		case err != nil:
			return "", fmt.Errorf("the exchange's bearer: %w", err)
		case act.View != req.View || p.Actor() != req.Actor || check != nil && !check(act) ||
			!me.Principal.IsZero() && me != (wire.Lifecycle{Principal: p, UID: act.LifecycleUID}):
			return "", fmt.Errorf("the exchange answered a bearer of another principal, view or manager instance than asked (%s view %q on %q)", p, act.View, act.ManagerInstanceID)
		}
		me = wire.Lifecycle{Principal: p, UID: act.LifecycleUID}
		return tok, nil
	}
	// The first bearer is fetched here, so a refusal is the exchange's and names itself; the
	// first connect presents it, and every reconnect fetches its own.
	first, err := bearer(ctx)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	nc, err := dial.Bearer(ctx, doc.Brokers(), []byte(doc.SentinelCreds), func(ctx context.Context) (string, error) {
		tok := ""
		once.Do(func() { tok = first })
		if tok != "" {
			return tok, nil
		}
		return bearer(ctx)
	}, nats.DontRandomize())
	if err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	return &ViewConn{Conn: nc, Space: wire.Space(doc.Space), Me: me}, nil
}

// SessionHolder returns the person's side of the session-holder route of the mesh at meshURL
// (sessionsPath, as DialManager), what takes the caller half of a session their remote manager
// redeemed for them as actor and ends it, and the broker the half connects to.
func SessionHolder(ctx context.Context, hc *http.Client, sessionsPath, meshURL, actor string) (*remotemgr.HolderClient, string, error) {
	doc, err := Discover(ctx, hc, sessionsPath, meshURL)
	if err != nil {
		return nil, "", err
	}
	tokens, err := IDTokens(ctx, hc, sessionsPath, meshURL, doc)
	if err != nil {
		return nil, "", err
	}
	var routes []string
	for _, u := range doc.Exchanges().URLs() {
		routes = append(routes, remotemgr.HolderURL(u))
	}
	return &remotemgr.HolderClient{URL: strings.Join(routes, ","), Space: wire.Space(doc.Space), Actor: actor,
		IDToken: tokens, HTTP: hc}, doc.Brokers(), nil
}
