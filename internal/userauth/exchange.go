package userauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gocotal/cotal/wire"
)

// IdentityVerifier checks a human's IdP token (the IdP bridge). It returns the token's issuer and
// subject, which DeriveOwner turns into the owner, and its expiry, which caps the bearer's. An
// error wrapping ErrUnavailable means the IdP's keys could not be fetched (the exchange answers
// 503); any other error is a refusal.
type IdentityVerifier interface {
	VerifyIdentity(ctx context.Context, idToken string) (issuer, subject string, expires time.Time, err error)
}

// RootCredentials is the root-credential ledger of SPEC §13.1 (the cred.<uid>.<credentialId>
// rows and the lifecycle head in the auth KV). An error wrapping ErrUnavailable means the store
// could not answer; any other error is a refusal.
type RootCredentials interface {
	// EnsureRoot returns the incarnation's one active root credential id, creating and stamping
	// it first if needed (row, gate CAS, head CAS), before any bearer naming it is released. A
	// revoked or expired root refuses.
	EnsureRoot(ctx context.Context, owner, actor string, lifecycleUID wire.LifecycleUID) (credentialID string, err error)
	// CheckRoot proves credentialID against the live row at connect: present, active, unexpired,
	// held by owner.actor under lifecycleUID, and the head's current root.
	CheckRoot(ctx context.Context, owner, actor string, lifecycleUID wire.LifecycleUID, credentialID string) error
}

// ManagerSelector answers for the manager-caller view from read-only observations of manager
// gates and service registrations (SPEC §10). An error wrapping ErrUnavailable means the
// observation failed; any other error is a refusal.
type ManagerSelector interface {
	// SelectManager returns the one live manager instance owner's bearer may address. requested
	// is the caller's explicit choice, or "" to pick the only candidate; zero or several
	// candidates, or an unavailable owner-specific remote manager, refuse.
	SelectManager(ctx context.Context, owner string, requested wire.LifecycleUID) (wire.LifecycleUID, error)
	// CheckManager reports at connect whether instance is still a live candidate for owner.
	CheckManager(ctx context.Context, owner string, instance wire.LifecycleUID) error
}

// Exchange turns a proof into a bearer (POST /exchange) and checks a bearer at connect
// (Authorize). A human proves itself with an IdP token and gets a bearer for an interactive row;
// a managed agent proves itself with its actor token and gets a bearer for its managed row. Both
// read the ledger fresh and refuse with one undifferentiated 401, logging the real reason.
//
// Every field but Managers, Log and Now must be set before first use; after that an Exchange is
// safe for concurrent use.
type Exchange struct {
	// Space is the space whose bearers are minted; it must be the Issuer's.
	Space wire.Space
	// Issuer signs and verifies the bearers.
	Issuer *Issuer
	// People is the ledger every exchange and connect reads fresh.
	People *People
	// Identity verifies the human form's IdP token.
	Identity IdentityVerifier
	// OwnerSecret is the space's owner secret (LoadOrCreateOwnerSecret).
	OwnerSecret []byte
	// Roots ensures and checks the incarnation's root credential.
	Roots RootCredentials
	// Managers serves the manager-caller view. Without one that view is refused.
	Managers ManagerSelector
	// Lifetime, when set, caps every bearer minted below MaxBearerLifetime (a person's) and
	// MaxAgentBearerLifetime (a managed agent's): the operator's lever for a shorter revocation
	// bound and more frequent renewals.
	Lifetime time.Duration
	// Log receives one record per exchange. Default: discard.
	Log *slog.Logger
	// Now is the exchange's clock. Default: time.Now.
	Now func() time.Time
}

// Grant is what Authorize found: the verified bearer and the ledger row that still grants it.
type Grant struct {
	// Claims is the verified bearer.
	Claims *Claims
	// Row is the ledger row read for this connect, with its Kind.
	Row *Row
}

// exchangeRequest is both request forms. Pointers tell an absent field from an empty one.
type exchangeRequest struct {
	IdpToken          *string `json:"idpToken"`
	Owner             *string `json:"owner"`
	Actor             *string `json:"actor"`
	ActorToken        *string `json:"actorToken"`
	TTLSec            *int64  `json:"ttlSec"`
	View              *string `json:"view"`
	ManagerInstanceID *string `json:"managerInstanceId"`
}

// exchangeReply is a minted bearer.
type exchangeReply struct {
	Token string `json:"token"`
	Owner string `json:"owner"`
	Exp   int64  `json:"exp"`
}

// errorReply is every refusal's body.
type errorReply struct {
	Error string `json:"error"`
}

// parsed is a validated exchange request.
type parsed struct {
	human      bool
	idpToken   string
	owner      string
	actor      string
	actorToken string
	ttl        time.Duration // 0: the form's cap
	view       View
	instance   wire.LifecycleUID // the requested manager instance, or ""
}

// badRequest is a request that does not parse; its message is safe to send back.
type badRequest struct{ msg string }

// Error returns the message.
func (e *badRequest) Error() string { return e.msg }

// parseExchangeRequest decodes body, refusing unknown fields, trailing data, both forms at once,
// or neither.
func parseExchangeRequest(body []byte) (*parsed, error) {
	var req exchangeRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, &badRequest{"malformed exchange request: " + err.Error()}
	}
	human := req.IdpToken != nil
	agent := req.Owner != nil || req.ActorToken != nil
	switch {
	case human && agent:
		return nil, &badRequest{"an exchange request is either {idpToken, actor} or {owner, actor, actorToken}, not both"}
	case !human && !agent:
		return nil, &badRequest{"an exchange request needs idpToken, or owner and actorToken"}
	case req.Actor == nil:
		return nil, &badRequest{"actor is required"}
	}
	p := &parsed{human: human, actor: *req.Actor}
	if err := wire.ValidateActor(p.actor); err != nil {
		return nil, &badRequest{err.Error()}
	}
	if human {
		if p.idpToken = *req.IdpToken; p.idpToken == "" {
			return nil, &badRequest{"idpToken is empty"}
		}
	} else {
		if req.Owner == nil || req.ActorToken == nil || *req.ActorToken == "" {
			return nil, &badRequest{"an agent exchange needs owner, actor and actorToken"}
		}
		p.owner, p.actorToken = *req.Owner, *req.ActorToken
		if !wire.IsDerivedOwner(p.owner) {
			return nil, &badRequest{fmt.Sprintf("owner %q is not a derived owner token", p.owner)}
		}
	}
	if req.TTLSec != nil {
		if *req.TTLSec < 1 {
			return nil, &badRequest{"ttlSec must be a positive number of seconds"}
		}
		p.ttl = time.Duration(min(*req.TTLSec, int64(MaxBearerLifetime/time.Second))) * time.Second
	}
	if req.View != nil {
		v, err := ParseView(*req.View)
		if err != nil {
			return nil, &badRequest{err.Error()}
		}
		if v == ViewManagerService {
			return nil, &badRequest{"view manager-service is not issued as a bearer: a remote manager asks for its authority at /manager-service-authority"}
		}
		p.view = v
	}
	if req.ManagerInstanceID != nil {
		if p.view != ViewManagerCaller {
			return nil, &badRequest{"managerInstanceId is valid only with view manager-caller"}
		}
		uid, err := wire.ParseLifecycleUID(*req.ManagerInstanceID)
		if err != nil {
			return nil, &badRequest{"managerInstanceId: " + err.Error()}
		}
		p.instance = uid
	}
	return p, nil
}

// Handler returns the POST /exchange handler for either face: 200 {token, owner, exp}, 400
// {error} for a request that does not parse, 401 {"error":"unauthorized"} for every refusal, and
// 503 when an authority store cannot answer.
func (e *Exchange) Handler() Handler {
	return func(ctx context.Context, in *Incoming) (int, any) {
		log := e.log().With("face", in.Face, "peer", in.Peer)
		if err := e.check(); err != nil {
			log.Error("exchange misconfigured", "err", err)
			return http.StatusInternalServerError, errorReply{"internal error"}
		}
		req, err := parseExchangeRequest(in.Body)
		if err != nil {
			log.Info("exchange refused", "status", http.StatusBadRequest, "reason", err)
			return http.StatusBadRequest, errorReply{err.Error()}
		}
		var reply *exchangeReply
		var row *Row
		if req.human {
			reply, row, err = e.exchangeHuman(ctx, in.Face, req)
		} else {
			reply, row, err = e.exchangeAgent(ctx, req)
		}
		form := "agent"
		if req.human {
			form = "human"
		}
		switch {
		case err == nil:
			log.Info("bearer issued", "form", form, "owner", row.Owner, "actor", row.Actor, "view", string(req.view), "exp", reply.Exp)
			return http.StatusOK, reply
		case errors.Is(err, ErrUnavailable):
			log.Warn("exchange unavailable", "form", form, "actor", req.actor, "err", err)
			return http.StatusServiceUnavailable, errorReply{"unavailable"}
		}
		log.Info("exchange refused", "form", form, "actor", req.actor, "reason", err)
		return http.StatusUnauthorized, errorReply{"unauthorized"}
	}
}

// VerifyHuman checks a human's IdP token and returns the interactive row of (its owner, actor)
// and the token's expiry. The exchange and the remote-manager route share it. A refusal matches
// ErrDenied.
func (e *Exchange) VerifyHuman(ctx context.Context, idpToken, actor string) (*Row, time.Time, error) {
	iss, sub, exp, err := e.Identity.VerifyIdentity(ctx, idpToken)
	if err != nil {
		return nil, time.Time{}, denyUnlessUnavailable("verify idp token", err)
	}
	owner, err := DeriveOwner(e.OwnerSecret, iss, sub)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: %w", ErrDenied, err)
	}
	row, err := e.People.GetKind(ctx, KindInteractive, owner, actor)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: %w", ErrDenied, err)
	}
	return row, exp, nil
}

func (e *Exchange) exchangeHuman(ctx context.Context, face string, req *parsed) (*exchangeReply, *Row, error) {
	row, idpExp, err := e.VerifyHuman(ctx, req.idpToken, req.actor)
	if err != nil {
		return nil, nil, err
	}
	if face != FaceLoopback && !req.view.Public() {
		return nil, nil, fmt.Errorf("%w: view %s is loopback-only", ErrDenied, req.view)
	}
	if !req.view.allowedFor(KindInteractive, row) {
		return nil, nil, fmt.Errorf("%w: view %s needs scope %q", ErrDenied, req.view, req.view.RequiredScope())
	}
	now := e.now()
	ttl := min(cmpOr(req.ttl, MaxBearerLifetime), MaxBearerLifetime, idpExp.Sub(now).Truncate(time.Second))
	if ttl < time.Second {
		return nil, nil, fmt.Errorf("%w: the idp token expires too soon", ErrDenied)
	}
	return e.mint(ctx, row, req, now, ttl)
}

// noRowHash is compared against when no managed row exists, so that an unknown actor costs the
// same as a wrong token.
var noRowHash = []byte("0000000000000000000000000000000000000000000000000000000000000000")

func (e *Exchange) exchangeAgent(ctx context.Context, req *parsed) (*exchangeReply, *Row, error) {
	row, rowErr := e.People.GetKind(ctx, KindManaged, req.owner, req.actor)
	want := noRowHash
	if rowErr == nil {
		want = []byte(row.TokenHash)
	}
	sum := sha256.Sum256([]byte(req.actorToken))
	got := []byte(hex.EncodeToString(sum[:]))
	match := subtle.ConstantTimeCompare(got, want) == 1
	switch {
	case rowErr != nil:
		return nil, nil, fmt.Errorf("%w: %w", ErrDenied, rowErr)
	case !match:
		return nil, nil, fmt.Errorf("%w: actor token does not match the row's hash", ErrDenied)
	}
	if err := e.People.CheckEnvelope(ctx, row); err != nil {
		return nil, nil, err
	}
	if !req.view.allowedFor(KindManaged, row) {
		return nil, nil, fmt.Errorf("%w: a managed agent may ask only for view manager-caller, not %s", ErrDenied, req.view)
	}
	ttl := min(cmpOr(req.ttl, MaxAgentBearerLifetime), MaxAgentBearerLifetime)
	return e.mint(ctx, row, req, e.now(), ttl)
}

// mint selects the manager instance for a manager-caller view, ensures the root credential and
// signs the bearer.
func (e *Exchange) mint(ctx context.Context, row *Row, req *parsed, now time.Time, ttl time.Duration) (*exchangeReply, *Row, error) {
	if e.Lifetime > 0 {
		ttl = min(ttl, e.Lifetime)
	}
	var instance wire.LifecycleUID
	if req.view == ViewManagerCaller {
		if e.Managers == nil {
			return nil, nil, fmt.Errorf("%w: no manager selector serves view manager-caller", ErrDenied)
		}
		var err error
		if instance, err = e.Managers.SelectManager(ctx, row.Owner, req.instance); err != nil {
			return nil, nil, denyUnlessUnavailable("select manager", err)
		}
	}
	credID, err := e.Roots.EnsureRoot(ctx, row.Owner, row.Actor, row.LifecycleUID)
	if err != nil {
		return nil, nil, denyUnlessUnavailable("ensure root credential", err)
	}
	c := Claims{
		Subject:   row.Owner,
		IssuedAt:  now.Unix(),
		NotBefore: now.Unix(),
		Expires:   now.Unix() + int64(ttl/time.Second),
		Act: Act{
			Owner:             row.Owner,
			Actor:             row.Actor,
			Scope:             row.Scope,
			Parent:            row.Parent,
			LifecycleUID:      row.LifecycleUID,
			CredentialID:      credID,
			View:              req.view,
			ManagerInstanceID: instance,
		},
	}
	token, err := e.Issuer.Sign(c)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrDenied, err)
	}
	return &exchangeReply{Token: token, Owner: row.Owner, Exp: c.Expires}, row, nil
}

// Authorize is the connect boundary's check of a bearer, for the callout: the bearer verifies,
// its row still exists (interactive or managed), act.scope is within the row's current scope,
// act.lifecycleUid is the row's current incarnation, a managed row's bearer lives at most
// MaxAgentBearerLifetime and the row is still within its spawners' envelope, the view is still
// allowed, a manager-caller's instance is still live, and the root credential checks out. It
// returns the bearer and the row, or an error matching ErrDenied (a *BearerError for the token
// itself) or ErrUnavailable.
func (e *Exchange) Authorize(ctx context.Context, bearer string) (*Grant, error) {
	if err := e.check(); err != nil {
		return nil, fmt.Errorf("authorize: %w", err)
	}
	c, err := e.Issuer.Verify(bearer, e.now())
	if err != nil {
		return nil, err
	}
	a := &c.Act
	row, err := e.People.Get(ctx, a.Owner, a.Actor)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDenied, err)
	}
	switch {
	case !Within(a.Scope, row.Scope):
		return nil, fmt.Errorf("%w: bearer scope %v is beyond the row's %v", ErrDenied, a.Scope, row.Scope)
	case a.LifecycleUID != row.LifecycleUID:
		return nil, fmt.Errorf("%w: bearer lifecycle %s is not the row's current %s", ErrDenied, a.LifecycleUID, row.LifecycleUID)
	case row.Kind == KindManaged && c.Lifetime() > MaxAgentBearerLifetime:
		return nil, fmt.Errorf("%w: a managed agent's bearer lives %s, over %s", ErrDenied, c.Lifetime(), MaxAgentBearerLifetime)
	case !a.View.allowedFor(row.Kind, row):
		return nil, fmt.Errorf("%w: view %s is no longer allowed for the row", ErrDenied, a.View)
	}
	if row.Kind == KindManaged {
		if err := e.People.CheckEnvelope(ctx, row); err != nil {
			return nil, err
		}
	}
	if a.View == ViewManagerCaller {
		if e.Managers == nil {
			return nil, fmt.Errorf("%w: no manager selector serves view manager-caller", ErrDenied)
		}
		if err := e.Managers.CheckManager(ctx, a.Owner, a.ManagerInstanceID); err != nil {
			return nil, denyUnlessUnavailable("check manager", err)
		}
	}
	if err := e.Roots.CheckRoot(ctx, a.Owner, a.Actor, a.LifecycleUID, a.CredentialID); err != nil {
		return nil, denyUnlessUnavailable("check root credential", err)
	}
	return &Grant{Claims: c, Row: row}, nil
}

// denyUnlessUnavailable wraps err as a refusal, unless it says the store could not answer.
func denyUnlessUnavailable(op string, err error) error {
	if errors.Is(err, ErrUnavailable) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrDenied, op, err)
}

// check reports a missing dependency.
func (e *Exchange) check() error {
	switch {
	case e.Issuer == nil:
		return errors.New("exchange has no Issuer")
	case e.Issuer.Space() != e.Space:
		return fmt.Errorf("exchange space %q differs from its issuer's %q", e.Space, e.Issuer.Space())
	case e.People == nil:
		return errors.New("exchange has no People")
	case e.Identity == nil:
		return errors.New("exchange has no Identity")
	case len(e.OwnerSecret) != OwnerSecretSize:
		return errors.New("exchange has no owner secret")
	case e.Roots == nil:
		return errors.New("exchange has no Roots")
	}
	return nil
}

func (e *Exchange) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func (e *Exchange) log() *slog.Logger {
	if e.Log != nil {
		return e.Log
	}
	return slog.New(slog.DiscardHandler)
}
