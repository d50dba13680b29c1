package remotemgr

import (
	"context"

	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/gocotal/cotal/internal/authendpoint"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/sessiongrant"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/wire"
)

// ScopeSupervise is the scope a person's actor row needs for every remote-manager request. No
// other scope implies it.
const ScopeSupervise = "supervise"

// MaxInstancesPerOwner bounds the remote manager instances one person may have registered: each
// holds a day's credentials and a registry row.
const MaxInstancesPerOwner = 16

// Lifetimes of what the host issues.
const (
	// StandingLifetime is a remote manager's standing credentials' (S in SPEC §13.6), and the
	// longest a host may give them.
	StandingLifetime = 24 * time.Hour
	// MinStandingLifetime is the shortest: the manager renews at three quarters of it over HTTP
	// and swaps two connections, which the last quarter must leave time for.
	MinStandingLifetime = 10 * time.Second
	// ExecutorLifetime is the executor's: it only registers the gate.
	ExecutorLifetime = 5 * time.Minute
)

// Person is who sent a request, as the host's people ledger knows them.
type Person struct {
	Owner  string
	Scopes []string
}

// Authenticator turns a person's IdP token and the actor they speak as into their owner token and
// the scopes of that actor's ledger row, read fresh. Any failure refuses the request.
type Authenticator interface {
	Authenticate(ctx context.Context, idToken, actor string) (*Person, error)
}

// Host answers remote managers' requests for one space.
type Host struct {
	Space    wire.Space
	Keys     *authority.SpaceKeys
	Ledger   *ledger.Ledger
	People   Authenticator
	Registry *Registry
	// Managed is the people ledger the managed agents' rows are written to: each agent a remote
	// manager spawns is a managed row of its person, within that person's row, that connects on
	// bearers exchanged for its actor token. Without it enrollment is unimplemented.
	Managed *userauth.People
	// Life is the standing credentials' lifetime: StandingLifetime when zero, and never more. The
	// executor's is ExecutorLifetime, never more than Life.
	Life time.Duration
	Log  *slog.Logger
}

func (h *Host) life() time.Duration {
	if h.Life > 0 {
		return min(h.Life, StandingLifetime)
	}
	return StandingLifetime
}

func (h *Host) log() *slog.Logger {
	if h.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Log
}

// Handle answers one request body: the status and the reply to send. A refusal is logged with its
// reason and answered with its catalog code alone.
func (h *Host) Handle(ctx context.Context, body []byte) (int, any) {
	resp, err := h.handle(ctx, body)
	return h.answer("remote manager request refused", resp, err)
}

// answer is the status and reply of a request that answered resp or failed with err: 200, or the
// refusal's catalog code alone (400 for a malformed request, 404 for what the caller may not
// learn of, 503 when the host could not answer, 403 otherwise), its reason logged as msg.
func (h *Host) answer(msg string, resp any, err error) (int, any) {
	if err == nil {
		return 200, resp
	}
	var ref *Refusal
	if !errors.As(err, &ref) {
		ref = &Refusal{Code: wire.CodeInternal, Reason: err.Error()}
	}
	h.log().Warn(msg, "code", ref.Code, "reason", ref.Reason)
	status := 403
	switch ref.Code {
	case wire.CodeBadRequest:
		status = 400
	case wire.CodeNotFound:
		status = 404
	case wire.CodeInternal, wire.CodeUnavailable:
		status = 503
	}
	return status, map[string]string{"error": string(ref.Code)}
}

func (h *Host) handle(ctx context.Context, body []byte) (*Response, error) {
	env, err := ParseEnvelope(body)
	if err != nil {
		return nil, err
	}
	r := &env.Request
	if wire.Space(r.Space) != h.Space {
		return nil, refuse(wire.CodePermissionDenied, "the request is for space %s, this host serves %s", r.Space, h.Space)
	}
	who, err := h.supervisor(ctx, env.IDPToken, r.Actor)
	if err != nil {
		return nil, err
	}
	resp := &Response{
		V: protocolVersion, Kind: r.Kind, Operation: r.Operation, Space: r.Space, InstanceID: r.InstanceID,
		ManagerLifecycleUID: r.ManagerLifecycleUID, RequestID: r.RequestID, Owner: who.Owner, IssuedAt: time.Now().Unix(),
		Actors: meshwire.RemoteManagerActorsOf(wire.LifecycleUID(r.InstanceID)),
	}
	var reg *Registration
	if r.Operation != OpPrepare {
		if reg, err = h.registered(ctx, who.Owner, r); err != nil {
			return nil, err
		}
	}
	switch r.Operation {
	case OpPrepare:
		err = h.prepare(ctx, who, r, resp)
	case OpActivate:
		err = h.activate(ctx, who, r, resp)
	case OpRenew:
		err = h.renewSupervisor(ctx, who, r, resp)
	case OpRenewStandingBundle:
		err = h.renew(ctx, who, r, resp)
	case OpRenewRunDriver:
		err = h.renewRunDriver(ctx, who, r, resp)
	case OpSession:
		err = h.session(ctx, who, r, resp)
	case OpRetire:
		err = h.retire(ctx, who, r, reg, resp)
	case OpTransferReader:
		err = h.transferReader(ctx, who, r, resp)
	case OpEvictFamily:
		err = h.evictFamily(ctx, who, r, resp)
	default:
		switch r.Kind {
		case KindEnrollment:
			err = h.enroll(ctx, who, r, resp)
		case KindAdminAuthorization:
			err = h.authorizeAdmin(ctx, who, r, resp)
		}
	}
	if err != nil {
		return nil, err
	}
	// The person may have lost supervise while this request was under way, and the revocation's
	// eviction may have run before what was issued above: a JWT signed after an eviction is not
	// refused by it, nor is an agent enrolled after it retired the instance's agents. So the row
	// is read again, and what was just issued is taken back if it no longer grants supervise.
	if len(resp.Credentials) > 0 || resp.ActorToken != "" {
		if _, err := h.supervisor(ctx, env.IDPToken, r.Actor); err != nil {
			err = errors.Join(err, h.Ledger.EvictKeys(ctx, resp.issuedKeys()...))
			if resp.ActorToken != "" {
				agent := Target{Owner: who.Owner, Actor: r.Enrollment.Name, LifecycleUID: resp.LifecycleUID}
				err = errors.Join(err, h.retireAgent(ctx, r.InstanceID, agent))
			}
			return nil, err
		}
	}
	return resp, nil
}

// supervisor authenticates the person speaking as actor and requires their row to hold
// supervise.
func (h *Host) supervisor(ctx context.Context, idToken, actor string) (*Person, error) {
	who, err := h.People.Authenticate(ctx, idToken, actor)
	if errors.Is(err, userauth.ErrUnavailable) {
		return nil, refuse(wire.CodeUnavailable, "authenticate %s: %v", actor, err)
	} else if err != nil {
		return nil, refuse(wire.CodePermissionDenied, "authenticate %s: %v", actor, err)
	}
	if !slices.Contains(who.Scopes, ScopeSupervise) {
		return nil, refuse(wire.CodePermissionDenied, "%s.%s does not hold the supervise scope", who.Owner, actor)
	}
	return who, nil
}

// issuedKeys returns the user keys of the credentials the response carries.
func (r *Response) issuedKeys() []string {
	var keys []string
	for _, c := range r.Credentials {
		if claims, err := jwt.DecodeUserClaims(c.JWT); err == nil {
			keys = append(keys, claims.Subject)
		}
	}
	return keys
}

// registered refuses a request for an instance the host never prepared for owner with these
// identities: another person's instance, or keys the host did not sign for.
func (h *Host) registered(ctx context.Context, owner string, r *Request) (*Registration, error) {
	reg, err := h.Registry.Get(ctx, r.InstanceID)
	switch {
	case err != nil:
		return nil, refuse(wire.CodeUnavailable, "read the registration of %s: %v", r.InstanceID, err)
	case reg == nil:
		return nil, refuse(wire.CodePermissionDenied, "instance %s was never prepared", r.InstanceID)
	case reg.Owner != owner:
		return nil, refuse(wire.CodePermissionDenied, "instance %s belongs to %s, not %s", r.InstanceID, reg.Owner, owner)
	case reg.Actor != r.Actor:
		return nil, refuse(wire.CodePermissionDenied, "instance %s was prepared by %s.%s, not %s", r.InstanceID, reg.Owner, reg.Actor, r.Actor)
	case reg.Identities != r.Identities || reg.LifecycleUID != r.ManagerLifecycleUID:
		return nil, refuse(wire.CodePermissionDenied, "instance %s was prepared with other identities or another lifecycle", r.InstanceID)
	}
	return reg, nil
}

// principal returns owner's principal of actor.
func principal(owner, actor string) wire.Principal {
	p, err := wire.NewPrincipal(owner, actor)
	if err != nil {
		panic("remotemgr: a validated owner and a derived actor: " + err.Error())
	}
	return p
}

// sign signs a credential of profile for actor and the key pub, living life.
func (h *Host) sign(owner, actor string, profile authority.Profile, g authority.Grant, life time.Duration, pub string) (Issued, error) {
	g.Principal = principal(owner, actor)
	cred, err := h.Keys.SignUser(authority.MintRequest{Profile: profile, Grant: g, Expires: life}, pub)
	if err != nil {
		return Issued{}, refuse(wire.CodeInternal, "sign %s for %s: %v", profile, g.Principal, err)
	}
	return Issued{JWT: cred.JWT, Exp: cred.Expires.Unix()}, nil
}

// standing signs the supervisor and executor identities' credentials into resp.
func (h *Host) standing(owner string, r *Request, resp *Response) error {
	instance := wire.LifecycleUID(r.InstanceID)
	g := authority.Grant{LifecycleUID: wire.LifecycleUID(r.ManagerLifecycleUID), Serve: &authority.ServeRows{Endpoint: wire.ManagerEndpoint, Instance: instance}}
	sup, err := h.sign(owner, resp.Actors.Supervisor, authority.ProfileRemoteManager, g, h.life(), r.Identities.Supervisor.ID)
	if err != nil {
		return err
	}
	exe, err := h.sign(owner, resp.Actors.Executor, authority.ProfileRemoteManager, g, min(ExecutorLifetime, h.life()), r.Identities.Executor.ID)
	if err != nil {
		return err
	}
	resp.credential(CredSupervisor, sup)
	resp.credential(CredExecutor, exe)
	return nil
}

// issued is a credential as the response carries it.
func issued(c *authority.Credential) Issued { return Issued{JWT: c.JWT, Exp: c.Expires.Unix()} }

// credential adds one issued credential to the response.
func (r *Response) credential(name string, c Issued) {
	if r.Credentials == nil {
		r.Credentials = map[string]Issued{}
	}
	r.Credentials[name] = c
	r.ExpiresAt = max(r.ExpiresAt, c.Exp)
}

// prepare records the registration and issues the supervisor and executor credentials. An
// instance another person registered is refused.
func (h *Host) prepare(ctx context.Context, who *Person, r *Request, resp *Response) error {
	// The executor may write the instance's gate: an instance whose gate another principal holds
	// (a local manager's, whose id the registry shows) is never prepared, or its executor could
	// rewrite that gate and take the instance over.
	og, err := h.Ledger.RemoteManagers().ObserveGate(ctx, wire.LifecycleUID(r.InstanceID))
	if err != nil {
		return refuse(wire.CodeInternal, "observe the gate of %s: %v", r.InstanceID, err)
	}
	if serve := principal(who.Owner, resp.Actors.Serve); og != nil && og.Row.Principal != serve.String() {
		return refuse(wire.CodePermissionDenied, "instance %s is served by %s", r.InstanceID, og.Row.Principal)
	}
	// A new incarnation of the instance: the one before it may still hold its lease and answer
	// the liveness plane on its supervisor identity, which no gate fences. The broker refuses its
	// supervisor and executor before this one is recorded (so a failed eviction forgets nothing);
	// its serve identity is fenced through the gate at activation.
	prev, err := h.Registry.Get(ctx, r.InstanceID)
	if err != nil {
		return refuse(wire.CodeUnavailable, "read the registration of %s: %v", r.InstanceID, err)
	}
	if prev == nil {
		mine, err := h.Registry.Of(ctx, who.Owner, "")
		if err != nil {
			return refuse(wire.CodeUnavailable, "read the registrations of %s: %v", who.Owner, err)
		}
		if len(mine) >= MaxInstancesPerOwner {
			return refuse(wire.CodeResourceExhausted, "%s already registered %d remote manager instances", who.Owner, len(mine))
		}
	} else if prev.Owner == who.Owner && prev.Identities != r.Identities {
		if err := h.Ledger.EvictKeys(ctx, prev.Identities.Supervisor.ID, prev.Identities.Executor.ID); err != nil {
			return refuse(wire.CodeUnavailable, "evict the previous incarnation of %s: %v", r.InstanceID, err)
		}
	}
	_, err = h.Registry.Claim(ctx, Registration{Owner: who.Owner, Actor: r.Actor, InstanceID: r.InstanceID, LifecycleUID: r.ManagerLifecycleUID,
		Identities: r.Identities, PreparedAt: time.Now().Unix()})
	if errors.Is(err, ErrForeignInstance) {
		return refuse(wire.CodePermissionDenied, "%v", err)
	} else if err != nil {
		return refuse(wire.CodeInternal, "record the registration of %s: %v", r.InstanceID, err)
	}
	return h.standing(who.Owner, r, resp)
}

// managerArtifacts returns the digests of the manager contract's artifacts, sorted: the one set an
// activation may register.
func managerArtifacts() ([]string, error) {
	c, err := manager.Contract()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range c.Artifacts {
		out = append(out, a.Digest)
	}
	slices.Sort(out)
	return out, nil
}

// activate checks the registration proof over the canonical manager artifacts and issues the serve
// credential through the instance's gate, which must exist.
func (h *Host) activate(ctx context.Context, who *Person, r *Request, resp *Response) error {
	if !proofEqual(r.RegistrationProof, RegistrationProof(who.Owner, r)) {
		return refuse(wire.CodePermissionDenied, "the registration proof does not match this registration")
	}
	want, err := managerArtifacts()
	if err != nil {
		return refuse(wire.CodeInternal, "the manager contract: %v", err)
	}
	if !slices.Equal(want, slices.Sorted(slices.Values(r.ContractArtifacts))) {
		return refuse(wire.CodePermissionDenied, "the contract artifacts are not the manager contract's")
	}
	ids := ledger.RemoteServe{
		Serve:         ledger.HeldIdentity{Principal: principal(who.Owner, resp.Actors.Serve), Key: r.Identities.Serve.ID},
		GoalWriter:    ledger.HeldIdentity{Principal: principal(who.Owner, resp.Actors.GoalWriter), Key: r.Identities.GoalWriter.ID},
		SessionLedger: ledger.HeldIdentity{Principal: principal(who.Owner, resp.Actors.SessionLedger), Key: r.Identities.SessionLedger.ID},
	}
	act, err := h.Ledger.RemoteManagers().Activate(ctx, ids, wire.LifecycleUID(r.InstanceID), manager.Commands(), h.life())
	switch {
	case errors.Is(err, ledger.ErrNoGate):
		return refuse(wire.CodeFailedPrecondition, "%v", err)
	case errors.Is(err, ledger.ErrForeignGate):
		return refuse(wire.CodePermissionDenied, "%v", err)
	case errors.Is(err, authstore.ErrConflict):
		return refuse(wire.CodeConflict, "%v", err)
	case err != nil:
		return refuse(wire.CodeInternal, "activate %s: %v", r.InstanceID, err)
	}
	epoch := act.Epoch
	og, err := h.Ledger.RemoteManagers().ObserveGate(ctx, wire.LifecycleUID(r.InstanceID))
	if err != nil || og == nil {
		return refuse(wire.CodeInternal, "observe the gate of %s after activation: %v", r.InstanceID, err)
	}
	resp.credential(CredServe, issued(act.Serve))
	resp.credential(CredGoalWriter, issued(act.GoalWriter))
	resp.credential(CredSessionLedger, issued(act.SessionLedger))
	resp.ProcessEpoch = &epoch
	resp.NextRegistrationProof = currentProof(h.Keys, who.Owner, r, og.Row.RegistrationRevision, epoch)
	return nil
}

// current checks a hosted request's current-registration proof at its epoch, and that the
// instance's gate is open at that epoch and owned by its serve principal. It returns the gate.
func (h *Host) current(ctx context.Context, who *Person, r *Request) (*authstore.ObservedEndpointGate, error) {
	if r.ProcessEpoch == nil {
		return nil, refuse(wire.CodeBadRequest, "processEpoch is required")
	}
	og, err := h.Ledger.RemoteManagers().ObserveGate(ctx, wire.LifecycleUID(r.InstanceID))
	switch {
	case err != nil:
		return nil, refuse(wire.CodeInternal, "observe the gate of %s: %v", r.InstanceID, err)
	case og == nil:
		return nil, refuse(wire.CodeFailedPrecondition, "instance %s has no gate", r.InstanceID)
	}
	if !proofEqual(r.RegistrationProof, currentProof(h.Keys, who.Owner, r, og.Row.RegistrationRevision, *r.ProcessEpoch)) {
		return nil, refuse(wire.CodePermissionDenied, "the current-registration proof does not match this registration at epoch %d", *r.ProcessEpoch)
	}
	switch {
	case og.Row.State != authstore.GateOpen:
		return nil, refuse(wire.CodeConflict, "the gate of %s is %s", r.InstanceID, og.Row.State)
	case og.Row.ProcessEpoch != *r.ProcessEpoch:
		return nil, refuse(wire.CodeConflict, "epoch %d is stale: the gate of %s is at %d", *r.ProcessEpoch, r.InstanceID, og.Row.ProcessEpoch)
	case og.Row.Principal != principal(who.Owner, meshwire.RemoteManagerActorsOf(wire.LifecycleUID(r.InstanceID)).Serve).String():
		return nil, refuse(wire.CodeConflict, "the gate of %s names %s", r.InstanceID, og.Row.Principal)
	}
	return og, nil
}

// renewSupervisor is the older renewal: the supervisor and executor signed afresh, on the
// caller-computable registration proof, while the instance's gate is open and names its serve
// identity. A missing or closed gate is failed-precondition: the manager must activate again.
func (h *Host) renewSupervisor(ctx context.Context, who *Person, r *Request, resp *Response) error {
	if !proofEqual(r.RegistrationProof, RegistrationProof(who.Owner, r)) {
		return refuse(wire.CodePermissionDenied, "the registration proof does not match this registration")
	}
	og, err := h.Ledger.RemoteManagers().ObserveGate(ctx, wire.LifecycleUID(r.InstanceID))
	switch {
	case err != nil:
		return refuse(wire.CodeInternal, "observe the gate of %s: %v", r.InstanceID, err)
	case og == nil || og.Row.State != authstore.GateOpen:
		return refuse(wire.CodeFailedPrecondition, "renew found no open gate of %s", r.InstanceID)
	case og.Row.Principal != principal(who.Owner, resp.Actors.Serve).String():
		return refuse(wire.CodePermissionDenied, "the gate of %s names %s", r.InstanceID, og.Row.Principal)
	}
	return h.standing(who.Owner, r, resp)
}

// renew renews the standing bundle: the supervisor and executor signed afresh, the serve
// credential renewed in place through the gate.
func (h *Host) renew(ctx context.Context, who *Person, r *Request, resp *Response) error {
	if r.AccountPublicKey != h.Keys.AccountPublicKey() {
		return refuse(wire.CodePermissionDenied, "account %s is not this space's", r.AccountPublicKey)
	}
	if _, err := h.current(ctx, who, r); err != nil {
		return err
	}
	rows, err := h.Ledger.RemoteManagers().Credentials(ctx, wire.LifecycleUID(r.InstanceID))
	if err != nil {
		return refuse(wire.CodeInternal, "read the serving credentials of %s: %v", r.InstanceID, err)
	}
	if err := h.standing(who.Owner, r, resp); err != nil {
		return err
	}
	for _, held := range []struct{ name, key string }{
		{CredServe, r.Identities.Serve.ID}, {CredGoalWriter, r.Identities.GoalWriter.ID}, {CredSessionLedger, r.Identities.SessionLedger.ID},
	} {
		i := slices.IndexFunc(rows, func(c authstore.CredentialRow) bool {
			e, ok := c.ServedEpoch()
			return c.State == authstore.CredActive && c.UserKey == held.key && ok && e == *r.ProcessEpoch
		})
		if i < 0 {
			return refuse(wire.CodeConflict, "instance %s holds no active %s credential at epoch %d", r.InstanceID, held.name, *r.ProcessEpoch)
		}
		cred, err := h.Ledger.RemoteManagers().Renew(ctx, wire.LifecycleUID(r.InstanceID), rows[i].CredentialID, h.life())
		if errors.Is(err, authstore.ErrConflict) {
			return refuse(wire.CodeConflict, "%v", err)
		} else if err != nil {
			return refuse(wire.CodeInternal, "renew the %s credential of %s: %v", held.name, r.InstanceID, err)
		}
		resp.credential(held.name, issued(cred))
	}
	resp.ProcessEpoch = r.ProcessEpoch
	return nil
}

// renewRunDriver signs a workflow run attempt's driver and mediator afresh (SPEC §14.6), as the
// run's own caller of the person's owner, pinned to the run, its takeover and this instance at its
// epoch: on the current-registration proof, with the gate open at the caller's epoch, and while the
// run's status record says it is running under the very lease the request names. Anything else
// is conflict: the run moved on, and its new holder asks for itself.
func (h *Host) renewRunDriver(ctx context.Context, who *Person, r *Request, resp *Response) error {
	if r.AccountPublicKey != h.Keys.AccountPublicKey() {
		return refuse(wire.CodePermissionDenied, "account %s is not this space's", r.AccountPublicKey)
	}
	if _, err := h.current(ctx, who, r); err != nil {
		return err
	}
	run := r.Run
	st, err := h.Ledger.RunStatus(ctx, run.RunID)
	switch {
	case err != nil:
		return refuse(wire.CodeUnavailable, "read the status of run %s: %v", run.RunID, err)
	case st == nil:
		return refuse(wire.CodeConflict, "run %s has no status record", run.RunID)
	case st.State != meshwire.RunRunning:
		return refuse(wire.CodeConflict, "run %s is %s, not running", run.RunID, st.State)
	case st.Holder != r.InstanceID:
		// Run records are keyed by run id alone: only a run held here is this instance's to drive,
		// or any manager could copy another's lease off the record and take its run.
		return refuse(wire.CodeConflict, "run %s is held by %s, not by instance %s", run.RunID, st.Holder, r.InstanceID)
	case st.Holder != run.Holder || st.Epoch != run.Epoch || st.FencingToken != run.FencingToken:
		return refuse(wire.CodeConflict, "run %s is held by %s at epoch %d, fencing token %d; the request names %s, %d, %d",
			run.RunID, st.Holder, st.Epoch, st.FencingToken, run.Holder, run.Epoch, run.FencingToken)
	}
	caller, err := meshwire.RunCaller(who.Owner, run.RunID)
	if err != nil {
		return refuse(wire.CodeBadRequest, "%v", err)
	}
	for _, k := range []string{run.DriverID, run.MediatorID} {
		if err := h.Registry.AddKey(ctx, r.InstanceID, k, time.Now().Add(h.life())); err != nil {
			return refuse(wire.CodeInternal, "record the run keys of %s: %v", r.InstanceID, err)
		}
	}
	g := authority.Grant{LifecycleUID: caller.UID, Run: authority.RunReplay{RunID: run.RunID, TakeoverID: run.TakeoverID},
		Serve: &authority.ServeRows{Endpoint: wire.ManagerEndpoint, Instance: wire.LifecycleUID(r.InstanceID), Epoch: *r.ProcessEpoch}}
	for _, c := range []struct {
		name    string
		profile authority.Profile
		key     string
	}{{CredRunDriver, authority.ProfileRunDriver, run.DriverID}, {CredRunMediator, authority.ProfileRunMediator, run.MediatorID}} {
		issued, err := h.sign(who.Owner, caller.Principal.Actor(), c.profile, g, h.life(), c.key)
		if err != nil {
			return err
		}
		resp.credential(c.name, issued)
	}
	resp.ProcessEpoch = r.ProcessEpoch
	return nil
}

// session signs a session's serving half for the serve identity, living until the session
// expires but no more than a day. A session id the host's own ledger holds is refused. With a
// holder it first redeems the session in the ledger for that holder, which must be the lifecycle
// the ledger itself resolves, at its current epoch: the holder's half waits there for it, and
// closing the session there revokes it at the broker.
func (h *Host) session(ctx context.Context, who *Person, r *Request, resp *Response) (err error) {
	if _, err := h.current(ctx, who, r); err != nil {
		return err
	}
	s := r.Session
	if s.End != "" {
		return h.endSession(ctx, r)
	}
	now := time.Now()
	exp := time.Unix(s.Exp, 0)
	if limit := now.Add(authstore.SessionMaxLifetime); exp.After(limit) {
		exp = limit
	}
	if !exp.After(now) {
		return refuse(wire.CodeFailedPrecondition, "session %s has expired", s.SessionID)
	}
	// A session in the ledger already (its own manager's, or one redeemed for a remote manager)
	// has its serving half: its rails are not for a remote manager to serve again, whoever
	// learned its id.
	if own, err := h.Ledger.Session(ctx, s.SessionID); err != nil {
		return refuse(wire.CodeUnavailable, "read session %s: %v", s.SessionID, err)
	} else if own != nil {
		return refuse(wire.CodeConflict, "session %s is in this host's ledger already", s.SessionID)
	}
	if s.Holder != nil {
		g, err := h.redeemFor(ctx, who, r, *s.Holder, exp)
		if err != nil {
			return err
		}
		resp.Grant = g.Raw
		defer func() {
			if err != nil { // redeemed, but the manager gets no serving half: nobody serves it
				cerr := h.Ledger.CloseSession(context.WithoutCancel(ctx), s.SessionID, authstore.SessionCloser{Operator: true}, authstore.SessionClosed)
				if cerr != nil {
					h.log().Warn("close a session left unserved", "session", s.SessionID, "err", cerr)
				}
			}
		}()
	}
	g := authority.Grant{Session: authority.SessionRails{Endpoint: s.Endpoint, SessionID: s.SessionID, Epoch: s.Epoch}}
	if err := h.Registry.AddKey(ctx, r.InstanceID, s.ID, exp); err != nil {
		// A key the host cannot record would outlive its manager's eviction: not signed.
		return refuse(wire.CodeInternal, "record the session key of %s: %v", r.InstanceID, err)
	}
	c, err := h.sign(who.Owner, resp.Actors.Serve, authority.ProfileSessionServing, g, exp.Sub(now), s.ID)
	if err != nil {
		return err
	}
	resp.credential(CredSessionServing, c)
	return nil
}

// redeemFor redeems the session r asks for in the host's ledger for holder, served by the
// manager instance r is from at the session's epoch. The holder must be the operator's control
// principal or the manager's own person at their current incarnation (personHolder), the two
// whose half the ledger can hold for them: a manager naming anyone else would have the host write
// rows for principals that never attached.
func (h *Host) redeemFor(ctx context.Context, who *Person, r *Request, named SessionHolder, exp time.Time) (*sessiongrant.Grant, error) {
	s := r.Session
	lc, _ := named.Lifecycle() // validated with the request
	if lc.Principal != operatorPrincipal {
		switch holds, err := h.personHolder(ctx, who, lc); {
		case err != nil:
			return nil, err
		case !holds:
			return nil, refuse(wire.CodeFailedPrecondition, "%s cannot hold a session of a remote manager: only the host's operator and the manager's own person can", lc)
		}
	}
	holder, epoch, err := h.Ledger.SessionHolder(ctx, lc)
	switch {
	case err != nil:
		return nil, refuse(wire.CodeFailedPrecondition, "%s cannot hold a session: %v", lc, err)
	case holder != lc || epoch != named.ProcessEpoch:
		return nil, refuse(wire.CodeConflict, "the session's holder is %s at epoch %d, not %s at %d", holder, epoch, lc, named.ProcessEpoch)
	}
	target := s.Target.lifecycle()
	g, err := h.Ledger.RedeemSession(ctx, authstore.SessionRequest{
		SessionID: s.SessionID, Holder: holder, HolderEpoch: epoch, ServingEpoch: s.Epoch, Expires: exp, Target: &target,
		Serving: authstore.Endpoint{Name: wire.ManagerEndpoint.Token(), InstanceID: wire.LifecycleUID(r.InstanceID)},
	})
	switch {
	case errors.Is(err, authstore.ErrConflict):
		return nil, refuse(wire.CodeConflict, "redeem session %s: %v", s.SessionID, err)
	case err != nil:
		return nil, refuse(wire.CodeUnavailable, "redeem session %s: %v", s.SessionID, err)
	}
	return g, nil
}

// endSession ends a session of the instance r is from in the host's ledger, as its serving
// party at the epoch the host checked: both halves are revoked at the broker. A session of
// another instance or epoch is refused; one already ended is no error.
func (h *Host) endSession(ctx context.Context, r *Request) error {
	s := r.Session
	serving := authstore.Endpoint{Name: wire.ManagerEndpoint.Token(), InstanceID: wire.LifecycleUID(r.InstanceID)}
	row, err := h.Ledger.Session(ctx, s.SessionID)
	switch {
	case err != nil:
		return refuse(wire.CodeUnavailable, "read session %s: %v", s.SessionID, err)
	case row == nil:
		return refuse(wire.CodeNotFound, "no session %s", s.SessionID)
	case row.Row.Serving.InstanceID != serving.InstanceID || row.Row.Serving.Epoch != *r.ProcessEpoch:
		return refuse(wire.CodePermissionDenied, "session %s is not served by instance %s at epoch %d", s.SessionID, r.InstanceID, *r.ProcessEpoch)
	}
	closer := authstore.SessionCloser{Serving: &serving, Epoch: *r.ProcessEpoch}
	if err := h.Ledger.CloseSession(ctx, s.SessionID, closer, s.End); err != nil {
		return refuse(wire.CodeUnavailable, "end session %s: %v", s.SessionID, err)
	}
	return nil
}

// operatorPrincipal is the host operator's control principal, local.cotal_control.
var operatorPrincipal = func() wire.Principal {
	p, err := wire.NewPrincipal(wire.DevOwner, ledger.ControlActor)
	if err != nil {
		panic(err) // two constant, valid tokens
	}
	return p
}()

// transferReader signs a transfer reader for the key the request names: the instance's own
// transfer store, read by its serve identity for a few minutes, while the manager still serves at
// the epoch it names.
func (h *Host) transferReader(ctx context.Context, who *Person, r *Request, resp *Response) error {
	if _, err := h.current(ctx, who, r); err != nil {
		return err
	}
	if err := h.Registry.AddKey(ctx, r.InstanceID, r.TransferReader.ID, time.Now().Add(authority.ProfileTransferReader.DefaultLifetime())); err != nil {
		return refuse(wire.CodeInternal, "record the transfer reader of %s: %v", r.InstanceID, err)
	}
	g := authority.Grant{Serve: &authority.ServeRows{Endpoint: wire.ManagerEndpoint, Instance: wire.LifecycleUID(r.InstanceID)}}
	c, err := h.sign(who.Owner, resp.Actors.Serve, authority.ProfileTransferReader, g, authority.ProfileTransferReader.DefaultLifetime(), r.TransferReader.ID)
	if err != nil {
		return err
	}
	resp.credential(CredTransferReader, c)
	return nil
}

// retire signs a retirement requester for one managed agent the manager spawned: it must be the
// caller's own, and the manager must still serve at the epoch it names. The requester then asks
// the auth endpoint to retire it (RetireLifecycle).
func (h *Host) retire(ctx context.Context, who *Person, r *Request, reg *Registration, resp *Response) error {
	t := r.Retirement.Target
	if t.Owner != who.Owner {
		return refuse(wire.CodePermissionDenied, "%s may not retire an agent of %s", who.Owner, t.Owner)
	}
	if r.Retirement.OpID != RetirementOpID(wire.LifecycleUID(t.LifecycleUID)) {
		return refuse(wire.CodeBadRequest, "the retirement's opId is not its lifecycle's")
	}
	if !slices.Contains(reg.Agents, t) {
		return refuse(wire.CodePermissionDenied, "%s is not an agent instance %s spawned", t.lifecycle(), r.InstanceID)
	}
	epoch := r.Retirement.ServeEpoch
	r.ProcessEpoch = &epoch
	if _, err := h.current(ctx, who, r); err != nil {
		return err
	}
	if err := h.Registry.AddKey(ctx, r.InstanceID, r.Retirement.ID, time.Now().Add(authority.OneShotLifetime)); err != nil {
		return refuse(wire.CodeInternal, "record the retirement requester of %s: %v", r.InstanceID, err)
	}
	g := authority.Grant{LifecycleUID: wire.LifecycleUID(r.ManagerLifecycleUID), Target: t.lifecycle()}
	c, err := h.sign(who.Owner, resp.Actors.Serve, authority.ProfileRetirementRequester, g, authority.OneShotLifetime, r.Retirement.ID)
	if err != nil {
		return err
	}
	resp.credential(CredRetirementRequester, c)
	return nil
}

// RetireLifecycle serves the auth endpoint's retire-lifecycle (authendpoint.Retire) for remote
// managers: caller is a retirement requester, the serve identity of the manager instance the args
// name, at its registered incarnation. That instance's gate, read fresh, must be present and not
// retired, name the caller, and be at the epoch the args declare (a superseded predecessor is
// refused); the opId must be the target's; and the target an agent the instance spawned. A
// target retired already is answered as retired: a retry after success.
func (h *Host) RetireLifecycle(ctx context.Context, caller, target wire.Lifecycle, a authendpoint.RetireArgs) (*authendpoint.Retired, error) {
	no := func(code wire.ErrorCode, format string, args ...any) error {
		h.log().Warn("retire-lifecycle refused", "caller", caller, "target", target, "code", code, "reason", fmt.Sprintf(format, args...))
		return wire.NewEndpointError(code, wire.OutcomeNotExecuted, format, args...)
	}
	if a.ServeEndpoint != wire.ManagerEndpoint.Token() {
		return nil, no(wire.CodeBadRequest, "serveEndpoint %q: only a manager retires its agents here", a.ServeEndpoint)
	}
	if _, err := wire.ParseLifecycleUID(string(a.ServeInstanceID)); err != nil {
		return nil, no(wire.CodeBadRequest, "serveInstanceId: %v", err)
	}
	og, err := h.Ledger.RemoteManagers().ObserveGate(ctx, a.ServeInstanceID)
	switch {
	case err != nil:
		return nil, no(wire.CodeUnavailable, "read the gate of %s: %v", a.ServeInstanceID, err)
	case og == nil || og.Row.State != authstore.GateOpen:
		return nil, no(wire.CodeFailedPrecondition, "instance %s has no open serve gate", a.ServeInstanceID)
	case og.Row.Principal != caller.Principal.String():
		return nil, no(wire.CodePermissionDenied, "the gate of %s names %s, not the caller", a.ServeInstanceID, og.Row.Principal)
	case og.Row.ProcessEpoch != a.ServeEpoch:
		return nil, no(wire.CodeConflict, "epoch %d is stale: instance %s serves at %d", a.ServeEpoch, a.ServeInstanceID, og.Row.ProcessEpoch)
	}
	reg, err := h.Registry.Get(ctx, string(a.ServeInstanceID))
	switch {
	case err != nil:
		return nil, no(wire.CodeUnavailable, "read the registration of %s: %v", a.ServeInstanceID, err)
	case reg == nil || reg.Owner != caller.Principal.Owner() || reg.LifecycleUID != string(caller.UID):
		return nil, no(wire.CodePermissionDenied, "the caller is not the registered incarnation of %s", a.ServeInstanceID)
	case a.OpID != RetirementOpID(target.UID):
		return nil, no(wire.CodeConflict, "opId %s is not the retirement of %s", a.OpID, target)
	case target.Principal.Owner() != caller.Principal.Owner():
		return nil, no(wire.CodePermissionDenied, "%s may not retire an agent of %s", caller.Principal.Owner(), target.Principal.Owner())
	}
	done := &authendpoint.Retired{Retired: true, LifecycleUID: target.UID, OpID: a.OpID, EvictedPrincipals: []string{target.Principal.String()}}
	t := Target{Owner: target.Principal.Owner(), Actor: target.Principal.Actor(), LifecycleUID: string(target.UID)}
	if !slices.Contains(reg.Agents, t) {
		if slices.Contains(reg.Retired, t) {
			return done, nil
		}
		if retired, err := h.Ledger.Retired(ctx, target.UID); err != nil {
			return nil, no(wire.CodeUnavailable, "read the gate of %s: %v", target, err)
		} else if retired {
			return done, nil
		}
		return nil, no(wire.CodePermissionDenied, "%s is not an agent instance %s spawned", target, a.ServeInstanceID)
	}
	if err := h.retireAgent(ctx, string(a.ServeInstanceID), t); err != nil {
		return nil, wire.NewEndpointError(wire.CodeInternal, wire.OutcomeUnknown, "retire %s: %v", target, err)
	}
	return done, nil
}

// evictFamily has the broker refuse principals of the caller's own instance that hold one of its
// serving credentials: a stale incarnation the manager wants gone. Anything else is refused.
func (h *Host) evictFamily(ctx context.Context, who *Person, r *Request, resp *Response) error {
	if _, err := h.current(ctx, who, r); err != nil {
		return err
	}
	instance := wire.LifecycleUID(r.InstanceID)
	rows, err := h.Ledger.RemoteManagers().Credentials(ctx, instance)
	if err != nil {
		return refuse(wire.CodeInternal, "read the serving credentials of %s: %v", instance, err)
	}
	ev := &Eviction{Principals: r.Principals}
	for _, p := range r.Principals {
		if !slices.ContainsFunc(rows, func(c authstore.CredentialRow) bool { return c.Principal == p }) {
			return refuse(wire.CodePermissionDenied, "%s holds no serving credential of instance %s", p, instance)
		}
	}
	for _, c := range rows {
		if slices.Contains(r.Principals, c.Principal) && c.State == authstore.CredActive {
			if _, err := h.Ledger.RevokeUserKey(ctx, c.UserKey, "evicted by its manager"); err != nil {
				return refuse(wire.CodeInternal, "evict %s: %v", c.Principal, err)
			}
			ev.Kicked++
		}
	}
	ev.VerifiedGone = true // RevokeUserKey returns only once the broker's connection list shows none of them
	resp.Evicted = ev
	return nil
}

// enroll makes a managed agent for the manager to launch: a managed row of the person, its
// parent, within that row's envelope (scopes, channels, role), with a fresh lifecycle whose
// durables are provisioned, and an actor token the agent exchanges for bearers. The host keeps
// only the token's hash.
func (h *Host) enroll(ctx context.Context, who *Person, r *Request, resp *Response) error {
	if h.Managed == nil {
		return refuse(wire.CodeUnimplemented, "this host enrolls no managed agents")
	}
	if _, err := h.current(ctx, who, r); err != nil {
		return err
	}
	e := r.Enrollment
	if meshwire.IsRemoteManagerActor(e.Name) || e.Name == r.Actor {
		return refuse(wire.CodePermissionDenied, "an agent may not take the name %s", e.Name)
	}
	row, token, err := h.enrollManaged(ctx, principal(who.Owner, r.Actor), e, nil, "spawned by remote manager "+r.InstanceID,
		func(t Target) error { return h.Registry.AddAgent(ctx, r.InstanceID, t) },
		func(ctx context.Context, t Target) error { return h.retireAgent(ctx, r.InstanceID, t) })
	if err != nil {
		return err
	}
	resp.LifecycleUID, resp.ActorToken = string(row.LifecycleUID), token
	resp.Agent = &AgentGrant{Role: row.Role, AllowSubscribe: row.AllowSubscribe, AllowPublish: row.AllowPublish}
	return nil
}

// enrollManaged writes a managed row of parent's owner for e, its parent parent, holding scope,
// within the parent's envelope (scopes, channels, role), with a fresh lifecycle whose durables
// are provisioned and a fresh actor token, whose hash alone is kept. record, when set, is told of
// the agent before its durables are provisioned; undo ends the agent when provisioning fails. It
// returns the row and the token; a failure is a Refusal.
func (h *Host) enrollManaged(ctx context.Context, parent wire.Principal, e *Enrollment, scope []string, label string,
	record func(Target) error, undo func(context.Context, Target) error) (*userauth.Row, string, error) {
	owner := parent.Owner()
	if _, err := h.Managed.GetKind(ctx, userauth.KindManaged, owner, e.Name); err == nil {
		return nil, "", refuse(wire.CodeAlreadyExists, "%s.%s is a managed agent already: retire it first", owner, e.Name)
	} else if !errors.Is(err, userauth.ErrNoRow) {
		return nil, "", refuse(wire.CodeInternal, "read the row of %s.%s: %v", owner, e.Name, err)
	}
	req := ledger.Request{Owner: owner, Name: e.Name, Role: e.Role, Subscribe: e.Subscribe, AllowSubscribe: e.AllowSubscribe, AllowPublish: e.AllowPublish}.WithDefaultPublish()
	if err := req.Validate(); err != nil {
		return nil, "", refuse(wire.CodeBadRequest, "%v", err)
	}
	read := req.AllowSubscribe
	if len(read) == 0 {
		read = req.Subscribe
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw) // never fails since Go 1.24
	token := base64.RawURLEncoding.EncodeToString(raw)
	sum := sha256.Sum256([]byte(token))
	row, err := h.Managed.GrantManaged(ctx, &userauth.Row{
		Owner: owner, Actor: e.Name, Scope: scope, AllowSubscribe: read, AllowPublish: req.AllowPublish, Role: e.Role,
		Parent: parent.String(), TokenHash: hex.EncodeToString(sum[:]), LifecycleUID: wire.NewLifecycleUID(), Label: label,
	})
	if errors.Is(err, userauth.ErrDenied) {
		return nil, "", refuse(wire.CodePermissionDenied, "enroll %s: %v", e.Name, err)
	} else if err != nil {
		return nil, "", refuse(wire.CodeInternal, "enroll %s: %v", e.Name, err)
	}
	agent := Target{Owner: owner, Actor: e.Name, LifecycleUID: string(row.LifecycleUID)}
	if record != nil {
		if err := record(agent); err != nil {
			// An agent the host cannot record could outlive its manager's eviction: not enrolled.
			return nil, "", errors.Join(refuse(wire.CodeInternal, "record agent %s: %v", e.Name, err), h.Managed.RevokeManaged(ctx, owner, e.Name))
		}
	}
	cred := &authority.Credential{Principal: principal(owner, e.Name), LifecycleUID: row.LifecycleUID}
	if err := h.Ledger.ProvisionAgent(ctx, cred, req); err != nil {
		return nil, "", errors.Join(refuse(wire.CodeInternal, "provision agent %s: %v", e.Name, err), undo(ctx, agent))
	}
	return row, token, nil
}

// retireAgent ends a managed agent: its row deleted (its next exchange and connect are refused),
// its lifecycle retired with its credentials and durables, and the registry told.
func (h *Host) retireAgent(ctx context.Context, instance string, t Target) error {
	return retireAgent(ctx, h.Ledger, h.Registry, h.Managed, instance, t)
}

// retireAgent is Host.retireAgent for whoever holds the ledger, the registry and the people; a
// nil registry has no record of the agent to remove (one the host's own manager ran).
func retireAgent(ctx context.Context, l *ledger.Ledger, reg *Registry, people *userauth.People, instance string, t Target) error {
	var err error
	if people != nil {
		// Only this agent's row: a later agent of the same name has a row of its own.
		row, rerr := people.GetKind(ctx, userauth.KindManaged, t.Owner, t.Actor)
		switch {
		case rerr == nil && string(row.LifecycleUID) == t.LifecycleUID:
			err = people.RevokeManaged(ctx, t.Owner, t.Actor)
		case rerr != nil && !errors.Is(rerr, userauth.ErrNoRow):
			err = rerr
		}
	}
	if rerr := l.Retire(ctx, t.lifecycle()); rerr != nil {
		return errors.Join(err, fmt.Errorf("retire %s: %w", t.lifecycle(), rerr))
	}
	if reg == nil {
		return err
	}
	return errors.Join(err, reg.RemoveAgent(ctx, instance, t))
}

// authorizeAdmin answers whether caller holds host launch authority on the manager: a control
// instrument (a lifecycle no ledger row holds) of the host's own operator or of the manager's
// owner, or the person who supervises the manager's machine. For a caller whose current row of
// the manager's owner holds spawn it also answers that row's grant (CallerGrant), the most an
// agent it spawns there may get.
func (h *Host) authorizeAdmin(ctx context.Context, who *Person, r *Request, resp *Response) error {
	if _, err := h.current(ctx, who, r); err != nil {
		return err
	}
	caller := r.Caller.lifecycle()
	instrument := false
	if caller.Principal.Owner() == wire.DevOwner || caller.Principal.Owner() == who.Owner {
		var err error
		if instrument, err = h.Ledger.Instrument(ctx, caller); err != nil {
			return refuse(wire.CodeUnavailable, "decide whether %s is an instrument: %v", caller, err)
		}
	}
	ok := instrument
	row, err := h.ownRow(ctx, who, caller)
	if err != nil {
		return err
	}
	if row != nil {
		// The person who supervises the machine the manager runs on may launch what they like
		// there; a row that may spawn hands its own channels and role on, never more.
		ok = ok || row.Kind == userauth.KindInteractive && row.Has(userauth.ScopeSupervise)
		if row.Has(userauth.ScopeSpawn) {
			resp.CallerGrant = &AgentGrant{Role: row.Role, AllowSubscribe: row.AllowSubscribe, AllowPublish: row.AllowPublish}
		}
	}
	resp.Authorized = &ok
	holds, err := h.personHolder(ctx, who, caller)
	if err != nil {
		return err
	}
	if (instrument && caller.Principal == operatorPrincipal) || holds {
		// The host's operator may hold a session of the manager, and so may the person who
		// supervises it: the half waits in the host's ledger, which the operator reads and the
		// person takes theirs from on HolderPath.
		if holder, epoch, err := h.Ledger.SessionHolder(ctx, caller); err == nil {
			resp.SessionHolder = &SessionHolder{ID: holder.Principal.String(), LifecycleUID: string(holder.UID), ProcessEpoch: epoch}
		}
	}
	return nil
}

// ownRow returns the ledger row of caller when it is a current incarnation of the manager's own
// owner (a person's interactive row, or a managed agent's within their envelope); nil otherwise,
// and an unavailable refusal when the people ledger did not answer.
func (h *Host) ownRow(ctx context.Context, who *Person, caller wire.Lifecycle) (*userauth.Row, error) {
	if h.Managed == nil || caller.Principal.Owner() != who.Owner {
		return nil, nil
	}
	return h.currentRow(ctx, caller)
}

// String names a response in logs, without its credentials.
func (r *Response) String() string {
	return fmt.Sprintf("%s/%s %s epoch %v", r.Kind, r.Operation, r.InstanceID, r.ProcessEpoch)
}
