package remotemgr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// Path is the exchange route a remote manager's requests take.
const Path = "/manager-service-authority"

// Request kinds on Path.
const (
	KindAuthority   = "manager-service-authority"
	KindMaintenance = "manager-service-maintenance"
	// KindEnrollment asks the host for a managed agent's credential; KindAdminAuthorization asks
	// whether a caller may launch on this manager as the host's operator.
	KindEnrollment         = "manager-managed-agent-enrollment"
	KindAdminAuthorization = "manager-admin-authorization"
)

// The operations of KindAuthority, and of KindMaintenance.
const (
	OpPrepare             = "prepare"
	OpActivate            = "activate"
	OpSession             = "session"
	OpRetire              = "retire"
	OpRenew               = "renew"
	OpRenewStandingBundle = "renewStandingBundle"
	OpRenewRunDriver      = "renewRunDriver"
	OpTransferReader      = "transferReader"
	OpEvictFamily         = "evict-family-principal"
)

// Limits on a request.
const (
	maxBody           = 64 << 10
	minRequestID      = 22
	maxRequestID      = 64
	maxArtifacts      = 128 // the reference manager registers 84: 41 schema roots, their manifests, its cluster document and manifest
	protocolVersion   = 1
	maxEvictPrincipal = 8
)

// Identity is one public nkey a remote manager holds the seed of.
type Identity struct {
	ID string `json:"id"`
}

// Identities are a remote manager's five keys, one per actor (meshwire.RemoteManagerActors).
type Identities struct {
	Supervisor    Identity `json:"supervisor"`
	Executor      Identity `json:"executor"`
	Serve         Identity `json:"serve"`
	GoalWriter    Identity `json:"goalWriter"`
	SessionLedger Identity `json:"sessionLedger"`
}

// keys lists the identities' keys in a fixed order.
func (ids Identities) keys() []string {
	return []string{ids.Supervisor.ID, ids.Executor.ID, ids.Serve.ID, ids.GoalWriter.ID, ids.SessionLedger.ID}
}

// SessionAsk names a session whose serving half the manager asks for. With Holder (cotal-go's
// addition) the host also redeems the session in its own ledger for that holder, the trusted
// auth path of SPEC §13.6, the session carrying Target's terminal: the holder then takes its half
// from there, as it would for a session of the host's own manager. With End (cotal-go's addition
// too) the manager ends such a session instead, as its serving party, in that state; nothing is
// signed.
type SessionAsk struct {
	ID        string                 `json:"id,omitempty"` // the serving half's public key
	Endpoint  string                 `json:"endpoint"`
	SessionID string                 `json:"sessionId"`
	Epoch     int64                  `json:"epoch"`
	Exp       int64                  `json:"exp"` // unix seconds
	Holder    *SessionHolder         `json:"holder,omitempty"`
	Target    *Target                `json:"target,omitempty"`
	End       authstore.SessionState `json:"end,omitempty"`
}

// SessionHolder is the lifecycle a session's grant binds and its process epoch, as the host's
// ledger resolves them for a caller.
type SessionHolder struct {
	ID           string `json:"id"`
	LifecycleUID string `json:"lifecycleUid"`
	ProcessEpoch int64  `json:"processEpoch"`
}

// Lifecycle returns the holder's lifecycle, or an error naming what is malformed.
func (h SessionHolder) Lifecycle() (wire.Lifecycle, error) {
	p, err := wire.ParsePrincipal(h.ID)
	if err != nil {
		return wire.Lifecycle{}, err
	}
	uid, err := wire.ParseLifecycleUID(h.LifecycleUID)
	if err != nil {
		return wire.Lifecycle{}, err
	}
	if h.ProcessEpoch < 0 {
		return wire.Lifecycle{}, errors.New("a negative process epoch")
	}
	return wire.Lifecycle{Principal: p, UID: uid}, nil
}

// Target names a lifecycle.
type Target struct {
	Owner        string `json:"owner"`
	Actor        string `json:"actor"`
	LifecycleUID string `json:"lifecycleUid"`
}

// Retirement asks the host for a retirement requester: the credential, for the public key ID
// the manager holds the seed of, that asks the auth endpoint to retire one agent it spawned.
type Retirement struct {
	ID         string `json:"id"`
	Target     Target `json:"target"`
	OpID       string `json:"opId"`
	ServeEpoch int64  `json:"serveEpoch"`
}

// RunAttempt names the workflow run attempt a renewRunDriver is for (SPEC §14.6): the run, the
// lease it holds it under (holder, epoch, fencing token), the takeover its replay durable is named
// by, and the public keys its driver and mediator hold the seeds of.
type RunAttempt struct {
	RunID        string `json:"runId"`
	Holder       string `json:"holder"`
	TakeoverID   string `json:"takeoverId"`
	Epoch        int64  `json:"epoch"`
	FencingToken int64  `json:"fencingToken"`
	DriverID     string `json:"driverId"`
	MediatorID   string `json:"mediatorId"`
}

// validate checks the run's ids, its lease and its two keys.
func (a *RunAttempt) validate() error {
	if err := meshwire.ValidateRunID(a.RunID); err != nil {
		return err
	}
	if err := meshwire.ValidateTakeoverID(a.TakeoverID); err != nil {
		return err
	}
	switch {
	case a.Holder == "" || len(a.Holder) > 256:
		return errors.New("run holder must be 1 to 256 characters")
	case a.Epoch < 0 || a.FencingToken < 1:
		return errors.New("run epoch must not be negative, and its fencing token at least 1")
	case !nkeys.IsValidPublicUserKey(a.DriverID) || !nkeys.IsValidPublicUserKey(a.MediatorID):
		return errors.New("run driverId and mediatorId must be public user nkeys")
	case a.DriverID == a.MediatorID:
		return errors.New("run driverId and mediatorId must differ")
	}
	return nil
}

// Enrollment asks for a managed agent's credential.
type Enrollment struct {
	Name           string   `json:"name"`
	Role           string   `json:"role,omitempty"`
	Subscribe      []string `json:"subscribe,omitempty"`
	AllowSubscribe []string `json:"allowSubscribe,omitempty"`
	AllowPublish   []string `json:"allowPublish,omitempty"`
}

// Request is a remote manager's request (closed: an unknown field is bad-request).
type Request struct {
	V                   int         `json:"v"`
	Kind                string      `json:"kind"`
	Operation           string      `json:"operation"`
	Space               string      `json:"space"`
	Actor               string      `json:"actor"`
	InstanceID          string      `json:"instanceId"`
	ManagerLifecycleUID string      `json:"managerLifecycleUid"`
	RequestID           string      `json:"requestId"`
	Identities          Identities  `json:"identities"`
	RegistrationProof   string      `json:"registrationProof,omitempty"`
	ContractArtifacts   []string    `json:"contractArtifacts,omitempty"`
	ProcessEpoch        *int64      `json:"processEpoch,omitempty"`
	AccountPublicKey    string      `json:"accountPublicKey,omitempty"`
	Session             *SessionAsk `json:"session,omitempty"`
	Retirement          *Retirement `json:"retirement,omitempty"`
	TransferReader      *Identity   `json:"transferReader,omitempty"`
	Enrollment          *Enrollment `json:"enrollment,omitempty"`
	Caller              *Target     `json:"caller,omitempty"`
	Principals          []string    `json:"principals,omitempty"`
	Run                 *RunAttempt `json:"run,omitempty"`
}

// Envelope is the HTTP body: the person's IdP token and the request.
type Envelope struct {
	IDPToken string  `json:"idpToken"`
	Request  Request `json:"request"`
}

// The names a response's credentials are carried under, as the reference names them.
const (
	CredSupervisor          = "supervisor"
	CredExecutor            = "executor"
	CredServe               = "serve"
	CredGoalWriter          = "goalWriter"
	CredSessionLedger       = "sessionLedger"
	CredSessionServing      = "sessionServing"
	CredTransferReader      = "transferReader"
	CredRetirementRequester = "retirementRequester"
	CredRunDriver           = "runDriver"
	CredRunMediator         = "runMediator"
)

// Issued is one credential the host signed: the JWT for the key the request named.
type Issued struct {
	JWT string `json:"jwt"`
	Exp int64  `json:"exp"`
}

// Response answers a Request: its echo, the owner the host derived, and what was issued.
type Response struct {
	V                     int                          `json:"v"`
	Kind                  string                       `json:"kind"`
	Operation             string                       `json:"operation"`
	Space                 string                       `json:"space"`
	InstanceID            string                       `json:"instanceId"`
	ManagerLifecycleUID   string                       `json:"managerLifecycleUid"`
	RequestID             string                       `json:"requestId"`
	Owner                 string                       `json:"owner"`
	IssuedAt              int64                        `json:"issuedAt"`
	ExpiresAt             int64                        `json:"expiresAt,omitempty"`
	Actors                meshwire.RemoteManagerActors `json:"actors"`
	ProcessEpoch          *int64                       `json:"processEpoch,omitempty"`
	NextRegistrationProof string                       `json:"nextRegistrationProof,omitempty"`
	Credentials           map[string]Issued            `json:"credentials,omitempty"`
	// LifecycleUID, ActorToken and Agent are a managed agent's (KindEnrollment): its lifecycle,
	// the secret it exchanges for bearers, and what its row grants.
	LifecycleUID string      `json:"lifecycleUid,omitempty"`
	ActorToken   string      `json:"actorToken,omitempty"`
	Agent        *AgentGrant `json:"agent,omitempty"`
	// Authorized answers KindAdminAuthorization: whether the caller holds host launch authority
	// on the manager. CallerGrant is what the caller may hand an agent it spawns there, when the
	// caller is a person or managed agent of the manager's own owner whose row holds spawn.
	Authorized  *bool       `json:"authorized,omitempty"`
	CallerGrant *AgentGrant `json:"callerGrant,omitempty"`
	// SessionHolder also answers KindAdminAuthorization (cotal-go's addition): the lifecycle that
	// holds a session the caller attaches, as the host's ledger resolves it, when the caller is
	// the host operator's control instrument or the manager's own person (the two callers whose
	// half the ledger can hold for them); absent otherwise.
	SessionHolder *SessionHolder `json:"sessionHolder,omitempty"`
	// Grant answers a session request with a holder (cotal-go's addition): the session's grant,
	// signed by the host's sessions key, which the manager answers attach with.
	Grant json.RawMessage `json:"grant,omitempty"`
	// Evicted reports what evict-family-principal ended.
	Evicted *Eviction `json:"evicted,omitempty"`
}

// AgentGrant is what an enrolled agent's row grants.
type AgentGrant struct {
	Role           string   `json:"role,omitempty"`
	AllowSubscribe []string `json:"allowSubscribe"`
	AllowPublish   []string `json:"allowPublish"`
}

// Eviction reports an evict-family-principal.
type Eviction struct {
	Principals   []string `json:"principals"`
	Kicked       int      `json:"kicked"`
	VerifiedGone bool     `json:"verifiedGone"`
}

// Refusal is a refused request: Code is what the caller is told, Reason what the operator's log
// says.
type Refusal struct {
	Code   wire.ErrorCode
	Reason string
}

// Error names the code and the reason.
func (r *Refusal) Error() string { return string(r.Code) + ": " + r.Reason }

// refuse returns a *Refusal.
func refuse(code wire.ErrorCode, format string, args ...any) error {
	return &Refusal{Code: code, Reason: fmt.Sprintf(format, args...)}
}

// ParseEnvelope decodes and validates a request body: a single JSON object with exactly the known
// fields, and a request well formed for its kind and operation. Anything else is bad-request.
func ParseEnvelope(body []byte) (*Envelope, error) {
	var env Envelope
	if err := decodeClosed(body, &env); err != nil {
		return nil, err
	}
	if env.IDPToken == "" {
		return nil, refuse(wire.CodeBadRequest, "idpToken is required")
	}
	if err := env.Request.validate(); err != nil {
		return nil, refuse(wire.CodeBadRequest, "%v", err)
	}
	return &env, nil
}

// decodeClosed decodes body into v: one JSON object of at most maxBody bytes with only v's fields
// and nothing after it. Anything else is bad-request.
func decodeClosed(body []byte, v any) error {
	if len(body) > maxBody {
		return refuse(wire.CodeBadRequest, "the body is over %d bytes", maxBody)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return refuse(wire.CodeBadRequest, "decode: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return refuse(wire.CodeBadRequest, "trailing data after the request")
	}
	return nil
}

// validate checks the fields every request carries and those its operation needs.
func (r *Request) validate() error {
	if r.V != protocolVersion {
		return fmt.Errorf("v must be %d", protocolVersion)
	}
	if _, err := wire.ParseSpace(r.Space); err != nil {
		return err
	}
	if err := wire.ValidateActor(r.Actor); err != nil {
		return err
	}
	if _, err := wire.ParseLifecycleUID(r.InstanceID); err != nil {
		return fmt.Errorf("instanceId: %w", err)
	}
	if _, err := wire.ParseLifecycleUID(r.ManagerLifecycleUID); err != nil {
		return fmt.Errorf("managerLifecycleUid: %w", err)
	}
	if n := len(r.RequestID); n < minRequestID || n > maxRequestID || !isToken(r.RequestID) {
		return fmt.Errorf("requestId must be %d to %d characters of [A-Za-z0-9_-]", minRequestID, maxRequestID)
	}
	seen := map[string]bool{}
	for _, k := range r.Identities.keys() {
		if !nkeys.IsValidPublicUserKey(k) {
			return fmt.Errorf("identity %q is not a public user nkey", k)
		}
		if seen[k] {
			return fmt.Errorf("identity %s appears twice: each identity has its own key", k)
		}
		seen[k] = true
	}
	return r.validateOperation()
}

// validateOperation checks the request's kind and operation, and the fields the operation needs.
func (r *Request) validateOperation() error {
	ops := map[string][]string{
		KindAuthority:          {OpPrepare, OpActivate, OpRenew, OpSession, OpRetire, OpRenewStandingBundle, OpRenewRunDriver, OpTransferReader},
		KindMaintenance:        {OpEvictFamily},
		KindEnrollment:         {""},
		KindAdminAuthorization: {""},
	}
	allowed, ok := ops[r.Kind]
	if !ok {
		return fmt.Errorf("unknown kind %q", r.Kind)
	}
	if !slices.Contains(allowed, r.Operation) {
		return fmt.Errorf("kind %s has no operation %q", r.Kind, r.Operation)
	}
	if r.Operation != OpPrepare && r.RegistrationProof == "" {
		return errors.New("registrationProof is required")
	}
	switch {
	case r.Operation == OpActivate:
		if n := len(r.ContractArtifacts); n < 1 || n > maxArtifacts {
			return fmt.Errorf("contractArtifacts must list 1 to %d digests", maxArtifacts)
		}
		for _, d := range r.ContractArtifacts {
			if !wire.IsDigest(d) {
				return fmt.Errorf("contract artifact %q is not a sha256 digest", d)
			}
		}
	case r.Operation == OpSession:
		return r.Session.validate()
	case r.Operation == OpRetire:
		if r.Retirement == nil || !nkeys.IsValidPublicUserKey(r.Retirement.ID) {
			return errors.New("retire needs retirement {id: a user nkey, target, opId, serveEpoch}")
		}
		if err := r.Retirement.Target.validate(); err != nil {
			return fmt.Errorf("retirement target: %w", err)
		}
	case r.Operation == OpTransferReader:
		if r.TransferReader == nil || !nkeys.IsValidPublicUserKey(r.TransferReader.ID) || r.ProcessEpoch == nil {
			return errors.New("transferReader needs transferReader {id: a user nkey} and processEpoch")
		}
	case r.Operation == OpRenewStandingBundle || r.Operation == OpRenewRunDriver:
		if r.ProcessEpoch == nil || *r.ProcessEpoch < 0 || r.AccountPublicKey == "" {
			return fmt.Errorf("%s needs processEpoch and accountPublicKey", r.Operation)
		}
		if r.Operation == OpRenewRunDriver {
			if r.Run == nil {
				return errors.New("renewRunDriver needs run")
			}
			if err := r.Run.validate(); err != nil {
				return fmt.Errorf("run: %w", err)
			}
		}
	case r.Operation == OpEvictFamily:
		if n := len(r.Principals); n < 1 || n > maxEvictPrincipal {
			return fmt.Errorf("principals must list 1 to %d principals", maxEvictPrincipal)
		}
		for _, p := range r.Principals {
			if _, err := wire.ParsePrincipal(p); err != nil {
				return err
			}
		}
	case r.Kind == KindEnrollment:
		if r.Enrollment == nil || r.ProcessEpoch == nil {
			return errors.New("an enrollment needs enrollment and processEpoch")
		}
		if err := wire.ValidateActor(r.Enrollment.Name); err != nil {
			return fmt.Errorf("enrollment name: %w", err)
		}
	case r.Kind == KindAdminAuthorization:
		if r.Caller == nil {
			return errors.New("an admin authorization names the caller")
		}
		if err := r.Caller.validate(); err != nil {
			return fmt.Errorf("caller: %w", err)
		}
	}
	return nil
}

// validate checks a session request: the end of a session, or a session to sign.
func (s *SessionAsk) validate() error {
	if s != nil && s.End != "" {
		if s.Endpoint != wire.ManagerEndpoint.Token() || !s.End.Terminal() || s.ID != "" || s.Holder != nil || s.Target != nil {
			return errors.New("a session's end needs {endpoint: manager, sessionId, end: closed|expired|superseded|retired} and nothing to sign")
		}
		return meshwire.ValidateSessionID(s.SessionID)
	}
	if s == nil || !nkeys.IsValidPublicUserKey(s.ID) || s.Endpoint != wire.ManagerEndpoint.Token() || s.Epoch < 0 || s.Exp <= 0 {
		return errors.New("session needs {id: a user nkey, endpoint: manager, sessionId, epoch, exp}")
	}
	if err := meshwire.ValidateSessionID(s.SessionID); err != nil {
		return err
	}
	if (s.Holder == nil) != (s.Target == nil) {
		return errors.New("a session's holder and target come together")
	}
	if s.Holder != nil {
		if _, err := s.Holder.Lifecycle(); err != nil {
			return fmt.Errorf("session holder: %w", err)
		}
		if err := s.Target.validate(); err != nil {
			return fmt.Errorf("session target: %w", err)
		}
	}
	return nil
}

func (t Target) validate() error {
	_, err := wire.ParseLifecycle(t.Owner + "." + t.Actor + "." + t.LifecycleUID)
	return err
}

func (t Target) lifecycle() wire.Lifecycle {
	l, _ := wire.ParseLifecycle(t.Owner + "." + t.Actor + "." + t.LifecycleUID) // validated
	return l
}

func isToken(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
