package remotemgr

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/sessiongrant"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/internal/authendpoint"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/internal/failover"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/wire"
)

// ClientConfig is where a remote manager asks for its authority, and as whom.
type ClientConfig struct {
	Space wire.Space
	// URL is the host's manager-service-authority route (<exchange>/manager-service-authority),
	// or several comma-separated (every authority node's of a cluster): a request goes on to the
	// next when one does not answer.
	URL string
	// Actor is the person's actor whose ledger row holds supervise ("cli" for a person's CLI).
	Actor string
	// Instance is the manager's instance id, kept across restarts.
	Instance wire.LifecycleUID
	// IDToken returns a fresh IdP token of the person, per request.
	IDToken func(ctx context.Context) (string, error)
	// HTTP is the client the requests go through; userauth.NewHTTPClient's when nil.
	HTTP *http.Client
	// Server is the broker URL a retirement requester connects to (Retire).
	Server string
}

// Client is one incarnation of a remote manager talking to its host: five fresh identities whose
// seeds never leave this process, a fresh manager lifecycle, and the proofs the host returned.
type Client struct {
	cfg       ClientConfig
	routes    *failover.Endpoints
	lifecycle wire.LifecycleUID
	ids       Identities
	seeds     map[string]nkeys.KeyPair // by public key
	actors    meshwire.RemoteManagerActors

	mu      sync.Mutex
	owner   string
	current string // the current-registration proof
	epoch   int64
}

// NewClient makes a client with fresh identities.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.HTTP == nil {
		cfg.HTTP = userauth.NewHTTPClient()
	}
	if cfg.Actor == "" {
		return nil, errors.New("remote manager: the person's actor is required")
	}
	c := &Client{cfg: cfg, routes: failover.New(failover.Split(cfg.URL)...), lifecycle: wire.NewLifecycleUID(), seeds: map[string]nkeys.KeyPair{}, actors: meshwire.RemoteManagerActorsOf(cfg.Instance)}
	for _, id := range []*Identity{&c.ids.Supervisor, &c.ids.Executor, &c.ids.Serve, &c.ids.GoalWriter, &c.ids.SessionLedger} {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, err
		}
		pub, _ := kp.PublicKey()
		id.ID, c.seeds[pub] = pub, kp
	}
	return c, nil
}

// Actors returns the manager's actors.
func (c *Client) Actors() meshwire.RemoteManagerActors { return c.actors }

// Owner returns the owner the host derived for the person, once prepared.
func (c *Client) Owner() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owner
}

// request builds a request of kind and op.
func (c *Client) request(kind, op string) Request {
	id := make([]byte, 18)
	_, _ = rand.Read(id) // never fails since Go 1.24
	return Request{
		V: protocolVersion, Kind: kind, Operation: op, Space: string(c.cfg.Space), Actor: c.cfg.Actor,
		InstanceID: string(c.cfg.Instance), ManagerLifecycleUID: string(c.lifecycle),
		RequestID: base64.RawURLEncoding.EncodeToString(id), Identities: c.ids,
	}
}

// hosted returns a request of kind and op carrying the current-registration proof and epoch.
func (c *Client) hosted(kind, op string) Request {
	r := c.request(kind, op)
	c.mu.Lock()
	r.RegistrationProof, r.ProcessEpoch = c.current, &c.epoch
	c.mu.Unlock()
	epoch := *r.ProcessEpoch
	r.ProcessEpoch = &epoch
	return r
}

// do sends r and decodes the host's answer; a refusal is a *Refusal with the host's code.
func (c *Client) do(ctx context.Context, r Request) (*Response, error) {
	tok, err := c.cfg.IDToken(ctx)
	if err != nil {
		return nil, fmt.Errorf("remote manager %s: the person's IdP token: %w", r.Operation, err)
	}
	body, _ := json.Marshal(Envelope{IDPToken: tok, Request: r}) // always encodes
	raw, err := postAny(ctx, c.cfg.HTTP, c.routes, body, "remote manager "+opName(r))
	if err != nil {
		return nil, err
	}
	var resp Response
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil, fmt.Errorf("remote manager %s: decode the answer: %w", opName(r), err)
	}
	if resp.RequestID != r.RequestID || resp.InstanceID != r.InstanceID || resp.Space != r.Space {
		return nil, fmt.Errorf("remote manager %s: the answer is for another request", opName(r))
	}
	return &resp, nil
}

func opName(r Request) string {
	if r.Operation == "" {
		return r.Kind
	}
	return r.Operation
}

// credential reads the credential the host issued under name and attaches the seed of its
// subject, one of the manager's five identities.
func (c *Client) credential(resp *Response, name string, profile authority.Profile, actor string) (*authority.Credential, error) {
	is, claims, err := issuedClaims(resp, name)
	if err != nil {
		return nil, err
	}
	kp, ok := c.seeds[claims.Subject]
	if !ok {
		return nil, fmt.Errorf("remote manager %s: the %s credential is for a key this manager does not hold", resp.Operation, name)
	}
	return c.attach(resp, is, claims, profile, actor, kp)
}

// issuedFor reads the credential the host issued under name for kp, which must be its subject,
// and attaches kp's seed.
func (c *Client) issuedFor(resp *Response, name string, profile authority.Profile, actor string, kp nkeys.KeyPair) (*authority.Credential, error) {
	is, claims, err := issuedClaims(resp, name)
	if err != nil {
		return nil, err
	}
	if pub, _ := kp.PublicKey(); claims.Subject != pub {
		return nil, fmt.Errorf("remote manager %s: the %s credential is for another key than asked", resp.Operation, name)
	}
	return c.attach(resp, is, claims, profile, actor, kp)
}

// issuedClaims returns the credential the host issued under name, and its claims.
func issuedClaims(resp *Response, name string) (Issued, *jwt.UserClaims, error) {
	is, ok := resp.Credentials[name]
	if !ok {
		return Issued{}, nil, fmt.Errorf("remote manager %s: the host issued no %s credential", resp.Operation, name)
	}
	claims, err := jwt.DecodeUserClaims(is.JWT)
	if err != nil {
		return Issued{}, nil, fmt.Errorf("remote manager %s: the %s credential: %w", resp.Operation, name, err)
	}
	return is, claims, nil
}

// attach makes the issued credential usable: its JWT with kp's seed, as actor of the owner.
func (c *Client) attach(resp *Response, is Issued, claims *jwt.UserClaims, profile authority.Profile, actor string, kp nkeys.KeyPair) (*authority.Credential, error) {
	p, err := wire.NewPrincipal(resp.Owner, actor)
	if err != nil {
		return nil, err
	}
	seed, _ := kp.Seed()
	creds, err := jwt.FormatUserConfig(is.JWT, seed)
	if err != nil {
		return nil, err
	}
	return &authority.Credential{Profile: profile, Principal: p, LifecycleUID: c.lifecycle, PublicKey: claims.Subject, JWT: is.JWT,
		Expires: time.Unix(claims.Expires, 0), Creds: creds}, nil
}

// Standing are a remote manager's credentials: the supervisor and executor from prepare, and
// from activate on the serve credential with its goal-writer and session-ledger siblings.
type Standing struct {
	Supervisor, Executor, Serve, GoalWriter, SessionLedger *authority.Credential
}

// Prepare registers the incarnation with the host and returns its supervisor and executor
// credentials.
func (c *Client) Prepare(ctx context.Context) (*Standing, error) {
	resp, err := c.do(ctx, c.request(KindAuthority, OpPrepare))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.owner = resp.Owner
	c.mu.Unlock()
	return c.standing(resp)
}

// standing reads the supervisor and executor credentials, and the serve one when issued.
func (c *Client) standing(resp *Response) (*Standing, error) {
	var s Standing
	var err error
	if s.Supervisor, err = c.credential(resp, CredSupervisor, authority.ProfileRemoteManager, c.actors.Supervisor); err != nil {
		return nil, err
	}
	if s.Executor, err = c.credential(resp, CredExecutor, authority.ProfileRemoteManager, c.actors.Executor); err != nil {
		return nil, err
	}
	if _, ok := resp.Credentials[CredServe]; ok {
		if err := c.served(resp, &s); err != nil {
			return nil, err
		}
	}
	return &s, nil
}

// served reads the serve credential and its two siblings into s.
func (c *Client) served(resp *Response, s *Standing) error {
	var err error
	if s.Serve, err = c.credential(resp, CredServe, authority.ProfileEndpointServe, c.actors.Serve); err != nil {
		return err
	}
	if s.GoalWriter, err = c.credential(resp, CredGoalWriter, authority.ProfileGoalWriter, c.actors.GoalWriter); err != nil {
		return err
	}
	s.SessionLedger, err = c.credential(resp, CredSessionLedger, authority.ProfileSessionLedger, c.actors.SessionLedger)
	return err
}

// Register writes the instance's serve gate through nc, a connection as the executor: open,
// naming the serve principal. A gate already there (an earlier incarnation's) is kept: the host
// moves it to the next epoch at activation.
func (c *Client) Register(ctx context.Context, nc *nats.Conn) error {
	serve, err := wire.NewPrincipal(c.Owner(), c.actors.Serve)
	if err != nil {
		return err
	}
	key := managerGateKey(c.cfg.Instance)
	msg := nats.NewMsg(meshwire.AuthBucket(c.cfg.Space).Subject(key))
	msg.Data = registrationGate(serve, "register-"+string(c.lifecycle))
	msg.Header.Set(nats.ExpectedLastSubjSeqHdr, "0")
	reply, err := nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		return fmt.Errorf("register the serve gate %s: %w", key, err)
	}
	var ack struct {
		Error *struct {
			Code    int    `json:"code"`
			ErrCode int    `json:"err_code"`
			Desc    string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(reply.Data, &ack); err != nil {
		return fmt.Errorf("register the serve gate %s: %w", key, err)
	}
	// A wrong last sequence: the gate exists.
	if ack.Error != nil && !jsapi.WrongLastSequence(ack.Error.ErrCode) {
		return fmt.Errorf("register the serve gate %s: %s", key, ack.Error.Desc)
	}
	return nil
}

// Activate asks for the serve credential and its siblings: it returns the serve credential and
// the epoch it serves at.
func (c *Client) Activate(ctx context.Context) (*authority.Credential, int64, error) {
	r := c.request(KindAuthority, OpActivate)
	var err error
	if r.ContractArtifacts, err = managerArtifacts(); err != nil {
		return nil, 0, err
	}
	r.RegistrationProof = RegistrationProof(c.Owner(), &r)
	resp, err := c.do(ctx, r)
	if err != nil {
		return nil, 0, err
	}
	if resp.ProcessEpoch == nil || resp.NextRegistrationProof == "" || resp.NextRegistrationProof == r.RegistrationProof {
		return nil, 0, errors.New("remote manager activate: the host returned no current-registration proof")
	}
	var st Standing
	if err := c.served(resp, &st); err != nil {
		return nil, 0, err
	}
	serve := st.Serve
	c.mu.Lock()
	c.current, c.epoch = resp.NextRegistrationProof, *resp.ProcessEpoch
	c.mu.Unlock()
	return serve, *resp.ProcessEpoch, nil
}

// Renew renews the standing bundle at the current epoch: supervisor, executor and serve.
func (c *Client) Renew(ctx context.Context, account string) (*Standing, error) {
	r := c.hosted(KindAuthority, OpRenewStandingBundle)
	r.AccountPublicKey = account
	resp, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	s, err := c.standing(resp)
	if err == nil && (s.Serve == nil || len(resp.Credentials) != 5) {
		err = fmt.Errorf("remote manager renew: the host renewed %d credentials, not the standing five", len(resp.Credentials))
	}
	return s, err
}

// Enrolled is a managed agent the host enrolled: its lifecycle, its actor token and its grant.
type Enrolled struct {
	LifecycleUID wire.LifecycleUID
	ActorToken   string
	Grant        AgentGrant
}

// Enroll asks the host for a managed agent.
func (c *Client) Enroll(ctx context.Context, e Enrollment) (*Enrolled, error) {
	r := c.hosted(KindEnrollment, "")
	r.Enrollment = &e
	resp, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	if resp.ActorToken == "" || resp.Agent == nil {
		return nil, errors.New("remote manager enrollment: the host returned no actor token")
	}
	uid, err := wire.ParseLifecycleUID(resp.LifecycleUID)
	if err != nil {
		return nil, fmt.Errorf("remote manager enrollment: %w", err)
	}
	return &Enrolled{LifecycleUID: uid, ActorToken: resp.ActorToken, Grant: *resp.Agent}, nil
}

// Retire retires a managed agent this manager spawned, as SPEC §13.6 has it: the host signs a
// retirement requester for a key generated here, which asks the auth endpoint, in exact mode, to
// retire the agent's lifecycle (any instance of the endpoint may run it).
func (c *Client) Retire(ctx context.Context, l wire.Lifecycle) error {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return err
	}
	pub, _ := kp.PublicKey()
	r := c.request(KindAuthority, OpRetire)
	c.mu.Lock()
	proof, epoch := c.current, c.epoch
	c.mu.Unlock()
	r.RegistrationProof = proof
	opID := RetirementOpID(l.UID)
	target := Target{Owner: l.Principal.Owner(), Actor: l.Principal.Actor(), LifecycleUID: string(l.UID)}
	r.Retirement = &Retirement{ID: pub, Target: target, OpID: opID, ServeEpoch: epoch}
	resp, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	cred, err := c.issuedFor(resp, CredRetirementRequester, authority.ProfileRetirementRequester, c.actors.Serve, kp)
	if err != nil {
		return err
	}
	nc, err := dial.As(ctx, c.cfg.Server, cred, nats.NoReconnect())
	if err != nil {
		return fmt.Errorf("retire %s: connect as its retirement requester: %w", l, err)
	}
	defer nc.Close()
	caller := endpoint.NewCaller(nc, c.cfg.Space, wire.Lifecycle{Principal: cred.Principal, UID: c.lifecycle}, "retire")
	res, err := caller.Describe(ctx, meshwire.AuthEndpoint, "")
	if err != nil {
		return fmt.Errorf("retire %s: resolve the auth endpoint: %w", l, err)
	}
	call, err := res.Call(meshwire.CommandRetireLifecycle, authendpoint.RetireArgs{
		OpID: opID, ServeEndpoint: wire.ManagerEndpoint.Token(), ServeInstanceID: c.cfg.Instance, ServeEpoch: epoch})
	if err != nil {
		return err
	}
	// Exact mode, and not bound to the instance that resolved: on a cluster every authority node
	// serves the auth endpoint in its one queue group, which the requester's grant addresses, so
	// a bound call lands on a sibling as often as not. Any of them may run it: a retirement is
	// idempotent by its opId (a retry resumes it, a retired lifecycle is a success).
	call.Mode, call.Target = wire.ModeExact, &wire.Target{Owner: target.Owner, Actor: target.Actor, LifecycleUID: target.LifecycleUID}
	reply, err := caller.Call(ctx, call)
	if err != nil {
		return fmt.Errorf("retire %s: %w", l, err)
	}
	var out authendpoint.Retired
	if err := json.Unmarshal(reply.Data, &out); err != nil || !out.Retired {
		return fmt.Errorf("retire %s: the auth endpoint did not retire it (%s)", l, reply.Data)
	}
	return nil
}

// AuthorizeAdmin asks the host whether caller holds host launch authority on this manager (an
// operator's instrument, or the person who supervises it), and what caller may hand an agent it
// spawns here: nil when caller may spawn nothing of its own.
func (c *Client) AuthorizeAdmin(ctx context.Context, caller wire.Lifecycle) (bool, *AgentGrant, error) {
	resp, err := c.adminAuthorization(ctx, caller)
	if err != nil {
		return false, nil, err
	}
	return resp.Authorized != nil && *resp.Authorized, resp.CallerGrant, nil
}

// SessionHolder asks the host which lifecycle holds a session caller attaches, as its ledger
// resolves it, with its process epoch; an error when caller is neither the host's operator nor
// this manager's own person, the callers whose half the host's ledger can hold.
func (c *Client) SessionHolder(ctx context.Context, caller wire.Lifecycle) (*SessionHolder, error) {
	resp, err := c.adminAuthorization(ctx, caller)
	if err != nil {
		return nil, err
	}
	if resp.SessionHolder == nil {
		return nil, fmt.Errorf("only the host's operator and the manager's own person hold a session of a remote manager, and %s is neither", caller)
	}
	return resp.SessionHolder, nil
}

// Session has the host redeem a session on target's terminal in its ledger for holder and sign
// the session's serving half, on a key made here, for this manager to bridge the session on; it
// lives until exp, but never past a day, and epoch is the serving incarnation's.
func (c *Client) Session(ctx context.Context, sessionID string, epoch int64, exp time.Time, holder SessionHolder, target wire.Lifecycle) (*authority.Credential, *sessiongrant.Grant, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, nil, err
	}
	pub, _ := kp.PublicKey()
	r := c.hosted(KindAuthority, OpSession)
	r.Session = &SessionAsk{ID: pub, Endpoint: wire.ManagerEndpoint.Token(), SessionID: sessionID, Epoch: epoch, Exp: exp.Unix(), Holder: &holder,
		Target: &Target{Owner: target.Principal.Owner(), Actor: target.Principal.Actor(), LifecycleUID: string(target.UID)}}
	resp, err := c.do(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	g, err := sessiongrant.Parse(resp.Grant)
	var cred *authority.Credential
	if err == nil {
		cred, err = c.issuedFor(resp, CredSessionServing, authority.ProfileSessionServing, c.actors.Serve, kp)
	}
	if err != nil {
		// The host established the session: it must not stay active with nobody to serve it.
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		return nil, nil, errors.Join(fmt.Errorf("session %s: the host's answer: %w", sessionID, err), c.EndSession(ectx, sessionID, authstore.SessionClosed))
	}
	return cred, g, nil
}

// EndSession has the host end a session this manager serves in its ledger, in state to: the
// broker refuses both halves from then on.
func (c *Client) EndSession(ctx context.Context, sessionID string, to authstore.SessionState) error {
	r := c.hosted(KindAuthority, OpSession)
	r.Session = &SessionAsk{Endpoint: wire.ManagerEndpoint.Token(), SessionID: sessionID, End: to}
	_, err := c.do(ctx, r)
	return err
}

// adminAuthorization asks the host what it decides of caller on this manager.
func (c *Client) adminAuthorization(ctx context.Context, caller wire.Lifecycle) (*Response, error) {
	r := c.hosted(KindAdminAuthorization, "")
	r.Caller = &Target{Owner: caller.Principal.Owner(), Actor: caller.Principal.Actor(), LifecycleUID: string(caller.UID)}
	return c.do(ctx, r)
}
