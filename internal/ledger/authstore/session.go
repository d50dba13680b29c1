package authstore

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// The session ledger (SPEC §13.6, §13.12). A session pairs a holder lifecycle with one serving
// endpoint instance over two epoch-pinned rails; its row session.<sessionId> is the durable
// revocation authority for both halves, whatever happens to either party.
//
//	session.<sessionId>                                 the row, issuing → active → terminal
//	cred.<lifecycleUid>.<sessionId>.c                   the caller's credential, under its holder
//	epcred.<endpoint>.<instanceId>.<sessionId>.s        the serving credential, under its instance
//	stage.session.<sessionId>.<c|s>                     the release pin of each half
//
// Both credential ids are named by the row from its first write, so a crash at any point leaves
// nothing the sweep cannot name and revoke.

const (
	keySession      = "session."
	keyStageSession = "stage.session."
)

// SessionState is a session row's state. States only move forward: issuing → active, and either
// of those → one of the terminal states.
type SessionState string

// The session states.
const (
	SessionIssuing    SessionState = "issuing"
	SessionActive     SessionState = "active"
	SessionClosed     SessionState = "closed"
	SessionExpired    SessionState = "expired"
	SessionSuperseded SessionState = "superseded"
	SessionRetired    SessionState = "retired"
)

// Terminal reports whether s is a terminal state.
func (s SessionState) Terminal() bool {
	return s == SessionClosed || s == SessionExpired || s == SessionSuperseded || s == SessionRetired
}

func checkSessionMove(from, to SessionState) error {
	switch {
	case from.Terminal():
		return fmt.Errorf("%w: %s is terminal", ErrSessionState, from)
	case to == SessionIssuing:
		return fmt.Errorf("%w: only the create writes issuing", ErrSessionState)
	case from == SessionActive && to == SessionActive:
		return fmt.Errorf("%w: the session is already active", ErrSessionState)
	case to != SessionActive && !to.Terminal():
		return fmt.Errorf("%w: %q is not a session state", ErrSessionState, to)
	}
	return nil
}

// SessionRow is session.<sessionId>. The schema is closed.
type SessionRow struct {
	SessionID   string           `json:"sessionId"`
	Endpoint    string           `json:"endpoint"`
	Serving     SessionServing   `json:"serving"`
	Holder      SessionHolder    `json:"holder"`
	CredCaller  string           `json:"credCaller"`
	CredServing string           `json:"credServing"`
	Revoked     SessionRevoked   `json:"revoked"`
	State       SessionState     `json:"state"`
	Exp         wire.EpochMillis `json:"exp"`
}

// SessionServing is the serving instance a session is pinned to, and its epoch.
type SessionServing struct {
	InstanceID wire.LifecycleUID `json:"instanceId"`
	Epoch      int64             `json:"epoch"`
}

// SessionHolder is the caller's lifecycle.
type SessionHolder struct {
	Principal    string            `json:"principal"`
	LifecycleUID wire.LifecycleUID `json:"lifecycleUid"`
}

// SessionRevoked records which halves' revocations completed, so a sweep retries exactly the
// ones that did not.
type SessionRevoked struct {
	Caller  bool `json:"caller"`
	Serving bool `json:"serving"`
}

func (r *SessionRow) validate(key string) error {
	switch {
	case key != keySession+r.SessionID:
		return fmt.Errorf("names session %q, not its key", r.SessionID)
	case r.CredCaller != sessionCredentialID(r.SessionID, partyCaller) || r.CredServing != sessionCredentialID(r.SessionID, partyServing):
		return errors.New("its credential ids are not the session's")
	case r.State != SessionIssuing && r.State != SessionActive && !r.State.Terminal():
		return fmt.Errorf("state %q is not a session state", r.State)
	}
	if _, err := wire.ParsePrincipal(r.Holder.Principal); err != nil {
		return err
	}
	return r.servingEndpoint().validate()
}

func (r *SessionRow) servingEndpoint() Endpoint {
	return Endpoint{Name: r.Endpoint, InstanceID: r.Serving.InstanceID}
}

// sessionParty is a half of a session: its letter names its credential and stage pin.
type sessionParty string

const (
	partyCaller  sessionParty = "c"
	partyServing sessionParty = "s"
)

func sessionCredentialID(sessionID string, p sessionParty) string {
	return sessionID + "." + string(p)
}

// stagePin is stage.session.<sessionId>.<party>: the signing key a half was minted under, so a
// release under any other key fails instead of re-minting.
type stagePin struct {
	Kid        string       `json:"kid"`
	Thumbprint string       `json:"thumbprint"`
	Party      sessionParty `json:"party"`
}

// jwkThumbprint is the RFC 7638 thumbprint of an Ed25519 public nkey: the SHA-256 of its
// canonical OKP JWK, base64url without padding.
func jwkThumbprint(publicKey string) (string, error) {
	raw, err := nkeys.Decode(nkeys.PrefixByteAccount, []byte(publicKey))
	if err != nil {
		return "", fmt.Errorf("signing key %s: %w", publicKey, err)
	}
	if len(raw) != ed25519.PublicKeySize {
		return "", fmt.Errorf("signing key %s is not an Ed25519 key", publicKey)
	}
	jwk := `{"crv":"Ed25519","kty":"OKP","x":"` + base64.RawURLEncoding.EncodeToString(raw) + `"}`
	sum := sha256.Sum256([]byte(jwk))
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// SessionRequest is a verified session grant's coordinates: who holds it, which serving instance
// it is pinned to, the epochs both sides had when it was granted, and when it ends.
type SessionRequest struct {
	SessionID    string
	Holder       wire.Lifecycle
	HolderEpoch  int64
	Serving      Endpoint
	ServingEpoch int64
	Expires      time.Time
	// Target, when set, is the lifecycle the session carries (an attached agent's): both halves'
	// rows name it in their source chain, so what is attached to whom reads from the ledger.
	Target *wire.Lifecycle
}

// SessionMaxLifetime bounds a session: it is live authority, like a live handle.
const SessionMaxLifetime = 24 * time.Hour

func (r SessionRequest) validate(now time.Time) error {
	if err := meshwire.ValidateSessionID(r.SessionID); err != nil {
		return err
	}
	if _, err := wire.ParseLifecycleUID(string(r.Holder.UID)); err != nil {
		return fmt.Errorf("session holder: %w", err)
	}
	if r.Holder.Principal.IsZero() {
		return &wire.ValidationError{Field: "holder", Rule: "is required"}
	}
	if err := r.Serving.validate(); err != nil {
		return err
	}
	if !r.Expires.After(now) || r.Expires.Sub(now) > SessionMaxLifetime {
		return &wire.ValidationError{Field: "expires", Value: r.Expires.Format(time.RFC3339), Rule: "must be in the future and within 24h"}
	}
	return nil
}

// ObservedSession is a session row read at one revision.
type ObservedSession struct {
	Row      SessionRow
	Revision uint64
	// Written is when the row was last written: for a terminal row, when the session ended.
	Written time.Time
}

// Session reads session.<sessionId>; nil when there is none.
func (s *Store) Session(ctx context.Context, sessionID string) (*ObservedSession, error) {
	if err := meshwire.ValidateSessionID(sessionID); err != nil {
		return nil, err
	}
	return s.readSession(ctx, keySession+sessionID)
}

func (s *Store) readSession(ctx context.Context, key string) (*ObservedSession, error) {
	r, err := s.readNeverDeleted(ctx, key)
	if err != nil || r == nil {
		return nil, err
	}
	var row SessionRow
	if err := decodeStrict(r.Value, &row); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
	}
	if err := row.validate(key); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
	}
	return &ObservedSession{Row: row, Revision: r.Revision, Written: r.Written}, nil
}

// moveSession rewrites a session row at its observed revision, along the state grammar.
func (s *Store) moveSession(ctx context.Context, os *ObservedSession, next SessionRow) (*ObservedSession, error) {
	if next.State != os.Row.State {
		if err := checkSessionMove(os.Row.State, next.State); err != nil {
			return nil, err
		}
	}
	raw, _ := json.Marshal(next) // always encodes
	rev, err := s.write(ctx, keySession+next.SessionID, raw, os.Revision, 0)
	if err != nil {
		return nil, err
	}
	return &ObservedSession{Row: next, Revision: rev}, nil
}

// RedeemSession redeems a verified session grant for its holder (SPEC §13.6), in this order: the
// issuing row is created (the create is the one use: a second redemption is ErrConflict); both
// parties' gates are observed open; both credentials are staged and both gates touched at their
// observed revisions (a barrier that moved either gate makes the redemption lose); both epochs
// and the expiry are checked fresh; the row is finalized issuing → active by revision CAS; and
// only then is the holder's credential released. A refused redemption terminalizes its row and
// revokes whatever it staged, and releases nothing.
//
// The holder retrying after a lost response gets the same credential bytes back, as long as the
// session is active.
func (s *Store) RedeemSession(ctx context.Context, keys *authority.SpaceKeys, req SessionRequest) (*authority.Credential, error) {
	now := time.Now()
	if err := req.validate(now); err != nil {
		return nil, err
	}
	row := SessionRow{
		SessionID: req.SessionID, Endpoint: req.Serving.Name,
		Serving:     SessionServing{InstanceID: req.Serving.InstanceID, Epoch: req.ServingEpoch},
		Holder:      SessionHolder{Principal: req.Holder.Principal.String(), LifecycleUID: req.Holder.UID},
		CredCaller:  sessionCredentialID(req.SessionID, partyCaller),
		CredServing: sessionCredentialID(req.SessionID, partyServing),
		State:       SessionIssuing, Exp: wire.MillisOf(req.Expires),
	}
	raw, _ := json.Marshal(row) // always encodes
	rev, err := s.write(ctx, keySession+req.SessionID, raw, 0, 0)
	if errors.Is(err, ErrConflict) {
		have, rerr := s.Session(ctx, req.SessionID)
		if rerr != nil {
			return nil, rerr
		}
		// The holder's retry of a redemption whose answer it lost: the same grant, holder and
		// serving side alike. Anything else presenting the id finds its one use spent.
		if have != nil && have.Row.State == SessionActive && have.Row.Holder == row.Holder &&
			have.Row.Endpoint == row.Endpoint && have.Row.Serving == row.Serving {
			return s.releaseSession(ctx, keys, &have.Row, partyCaller)
		}
		return nil, fmt.Errorf("redeem session %s: %w: it was already redeemed", req.SessionID, ErrConflict)
	}
	if err != nil {
		return nil, err
	}
	os := &ObservedSession{Row: row, Revision: rev}
	refuse := func(to SessionState, cause error) (*authority.Credential, error) {
		_, cerr := s.terminate(ctx, os.Row.SessionID, to)
		return nil, errors.Join(fmt.Errorf("redeem session %s: %w", req.SessionID, cause), cerr)
	}

	holderGate, err := s.ObserveGate(ctx, req.Holder.UID)
	if err != nil {
		return refuse(SessionClosed, err)
	}
	serve, err := s.ServeGate(req.Serving)
	if err != nil {
		return refuse(SessionClosed, err)
	}
	servingGate, err := serve.Observe(ctx)
	if err != nil {
		return refuse(SessionClosed, err)
	}
	if holderGate == nil || holderGate.Row.State != GateOpen || servingGate == nil || servingGate.Row.State != GateOpen {
		return refuse(SessionClosed, fmt.Errorf("%w: a party's gate is not open", ErrConflict))
	}
	if err := s.stageSession(ctx, keys, req, serve, servingGate.Row.Principal); err != nil {
		return refuse(SessionClosed, err)
	}
	// A close or sweep that ended the row before the halves were staged found nothing to
	// revoke: the row has moved, so revoke what was just staged.
	if cur, err := s.Session(ctx, req.SessionID); err != nil || cur.Revision != os.Revision {
		return refuse(SessionClosed, errors.Join(fmt.Errorf("%w: the session ended during redemption", ErrConflict), err))
	}
	// The touches are the fence: a barrier that moved either gate since it was observed wins.
	if err := s.touchGate(ctx, req.Holder.UID, holderGate); err != nil {
		return refuse(SessionSuperseded, err)
	}
	if err := serve.Commit(ctx, servingGate); err != nil {
		return refuse(SessionSuperseded, err)
	}
	epoch, err := s.CurrentEpoch(ctx, req.Holder)
	switch {
	case err != nil:
		return refuse(SessionSuperseded, err)
	case epoch != req.HolderEpoch || servingGate.Row.ProcessEpoch != req.ServingEpoch:
		return refuse(SessionSuperseded, fmt.Errorf("%w: a party restarted since the grant", ErrConflict))
	case !time.Now().Before(req.Expires):
		return refuse(SessionExpired, errors.New("the grant expired during redemption"))
	}
	active := os.Row
	active.State = SessionActive
	if _, err := s.moveSession(ctx, os, active); err != nil {
		// A close, sweep or barrier moved the row first; revoking again is idempotent.
		return refuse(SessionClosed, fmt.Errorf("finalize: %w", err))
	}
	return s.releaseSession(ctx, keys, &active, partyCaller)
}

// stageSession writes both halves' stage pins and credential rows, create-only.
func (s *Store) stageSession(ctx context.Context, keys *authority.SpaceKeys, req SessionRequest, serve *ServeGate, servingPrincipal string) error {
	kid := keys.SigningPublicKey()
	thumb, err := jwkThumbprint(kid)
	if err != nil {
		return err
	}
	servingP, err := wire.ParsePrincipal(servingPrincipal)
	if err != nil {
		return fmt.Errorf("%w: the serving gate's principal: %v", ErrCorrupt, err)
	}
	rails := authority.SessionRails{Endpoint: req.Serving.Name, SessionID: req.SessionID, Epoch: req.ServingEpoch}
	source := []string{keySession + req.SessionID}
	if req.Target != nil {
		source = append(source, targetSource+req.Target.String())
	}
	for _, half := range []struct {
		party     sessionParty
		profile   authority.Profile
		principal wire.Principal
		uid       wire.LifecycleUID
	}{
		{partyCaller, authority.ProfileSessionCaller, req.Holder.Principal, req.Holder.UID},
		{partyServing, authority.ProfileSessionServing, servingP, req.Serving.InstanceID},
	} {
		pin, _ := json.Marshal(stagePin{Kid: kid, Thumbprint: thumb, Party: half.party}) // always encodes
		if _, err := s.write(ctx, keyStageSession+req.SessionID+"."+string(half.party), pin, 0, 0); err != nil {
			return fmt.Errorf("pin the %s half: %w", half.profile, err)
		}
		id := sessionCredentialID(req.SessionID, half.party)
		user, err := keys.UserKey(id)
		if err != nil {
			return err
		}
		mint := authority.MintRequest{Profile: half.profile, Expires: time.Until(req.Expires),
			Grant: authority.Grant{Principal: half.principal, LifecycleUID: half.uid, Session: rails}}
		cred, err := keys.SignFor(mint, authority.PublicKey(user))
		if err != nil {
			return err
		}
		row := &CredentialRow{
			V: credentialRowVersion, CredentialID: id, LifecycleUID: half.uid, Principal: half.principal.String(),
			Profile: half.profile, UserKey: cred.PublicKey, State: CredActive, IssuedAt: wire.MillisOf(time.Now()),
			ExpiresAt: wire.MillisOf(cred.Expires), SourceChain: source, JWT: cred.JWT,
		}
		if half.party == partyServing {
			_, err = serve.stage(ctx, row)
		} else {
			raw, _ := json.Marshal(row) // always encodes
			_, err = s.write(ctx, keyCred+string(half.uid)+"."+id, raw, 0, credTTL(row))
		}
		if err != nil {
			return fmt.Errorf("stage the %s credential: %w", half.profile, err)
		}
	}
	return nil
}

// sessionCredential reads one half's credential row; nil when it was never staged.
func (s *Store) sessionCredential(ctx context.Context, row *SessionRow, p sessionParty) (*CredentialRow, error) {
	if p == partyCaller {
		c, _, err := s.credential(ctx, row.Holder.LifecycleUID, row.CredCaller)
		return c, err
	}
	serve, err := s.ServeGate(row.servingEndpoint())
	if err != nil {
		return nil, err
	}
	c, _, err := serve.Credential(ctx, row.CredServing)
	return c, err
}

// releaseSession releases one half of an active session: the same bytes every time, under the
// signing key pinned at stage. A pin that names a key the keyring no longer signs with fails.
func (s *Store) releaseSession(ctx context.Context, keys *authority.SpaceKeys, row *SessionRow, p sessionParty) (*authority.Credential, error) {
	if row.State != SessionActive {
		return nil, fmt.Errorf("release session %s: %w: it is %s", row.SessionID, ErrConflict, row.State)
	}
	r, err := s.readNeverDeleted(ctx, keyStageSession+row.SessionID+"."+string(p))
	if err != nil {
		return nil, err
	}
	var pin stagePin
	if r == nil || decodeStrict(r.Value, &pin) != nil || pin.Party != p {
		return nil, fmt.Errorf("%w: session %s has no stage pin for its %s half", ErrCorrupt, row.SessionID, p)
	}
	thumb, err := jwkThumbprint(keys.SigningPublicKey())
	if err != nil {
		return nil, err
	}
	if pin.Kid != keys.SigningPublicKey() || pin.Thumbprint != thumb {
		return nil, fmt.Errorf("release session %s: it was signed by %s, which this keyring no longer signs with", row.SessionID, pin.Kid)
	}
	cred, err := s.sessionCredential(ctx, row, p)
	if err != nil {
		return nil, err
	}
	if cred == nil || cred.State != CredActive {
		return nil, fmt.Errorf("release session %s: %w: its %s credential is not active", row.SessionID, ErrConflict, p)
	}
	user, err := keys.UserKey(cred.CredentialID)
	if err != nil {
		return nil, err
	}
	return release(cred, user)
}

// ServingCredential releases the serving half of an active session to its serving instance,
// which must name the session's endpoint, instance and epoch exactly.
func (s *Store) ServingCredential(ctx context.Context, keys *authority.SpaceKeys, sessionID string, serving Endpoint, epoch int64) (*authority.Credential, error) {
	os, err := s.Session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if os == nil {
		return nil, fmt.Errorf("no session %s", sessionID)
	}
	if os.Row.servingEndpoint() != serving || os.Row.Serving.Epoch != epoch {
		return nil, fmt.Errorf("session %s is not served by %s/%s at epoch %d", sessionID, serving.Name, serving.InstanceID, epoch)
	}
	return s.releaseSession(ctx, keys, &os.Row, partyServing)
}

// CallerCredential releases the caller half of an active session to its holder, which must be
// the lifecycle the row names: the trusted path a holder redeems a grant through once the session
// was established for it. It never creates a session.
func (s *Store) CallerCredential(ctx context.Context, keys *authority.SpaceKeys, sessionID string, holder wire.Lifecycle) (*authority.Credential, error) {
	os, err := s.Session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if os == nil {
		return nil, fmt.Errorf("no session %s", sessionID)
	}
	if os.Row.Holder.Principal != holder.Principal.String() || os.Row.Holder.LifecycleUID != holder.UID {
		return nil, fmt.Errorf("session %s: %w: it is held by %s.%s", sessionID, ErrConflict, os.Row.Holder.Principal, os.Row.Holder.LifecycleUID)
	}
	return s.releaseSession(ctx, keys, &os.Row, partyCaller)
}

// SessionCloser is who presents a close: the holder, the serving instance, or the operator.
// Exactly one of Holder, Serving or Operator is set; the auth path that authenticated the
// presenter fills it in, never the request.
type SessionCloser struct {
	Holder   *wire.Lifecycle
	Serving  *Endpoint
	Epoch    int64
	Operator bool
}

func (c SessionCloser) isPartyOf(row *SessionRow) bool {
	switch {
	case c.Operator:
		return c.Holder == nil && c.Serving == nil
	case c.Holder != nil:
		return c.Serving == nil && c.Holder.Principal.String() == row.Holder.Principal && c.Holder.UID == row.Holder.LifecycleUID
	case c.Serving != nil:
		return *c.Serving == row.servingEndpoint() && c.Epoch == row.Serving.Epoch
	}
	return false
}

// SessionTeardown is what ending a session did: whether this call moved the row, the user keys
// of both halves (revoked now or earlier: a resumed barrier must still have the broker refuse
// them) and the serving half's principal (for its eviction to be verified).
type SessionTeardown struct {
	Transitioned     bool
	RevokedKeys      []string
	ServingPrincipal string
}

// CloseSession is the authoritative close (SPEC §13.6): the closer must be a party of the stored
// row or the operator; the row goes terminal (to, closed by default) and both credentials are
// revoked and marked. Closing a terminal session again retries any unmarked revocation.
func (s *Store) CloseSession(ctx context.Context, sessionID string, closer SessionCloser, to SessionState) (*SessionTeardown, error) {
	if to == "" {
		to = SessionClosed
	}
	if !to.Terminal() {
		return nil, fmt.Errorf("%w: close to %q, which is not terminal", ErrSessionState, to)
	}
	os, err := s.Session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if os == nil {
		return nil, fmt.Errorf("no session %s", sessionID)
	}
	if !closer.isPartyOf(&os.Row) {
		return nil, fmt.Errorf("close session %s: the closer is not a party of it", sessionID)
	}
	return s.terminate(ctx, sessionID, to)
}

// ReconcileSessionForTakeover tears down a session one of whose credentials a lifecycle barrier
// is revoking: the row goes superseded and both halves are revoked, so the serving half cannot
// outlive the barrier. The session was named by a credential row's source chain and session rows
// are never deleted, so a missing row is corruption.
func (s *Store) ReconcileSessionForTakeover(ctx context.Context, sessionID string) (*SessionTeardown, error) {
	os, err := s.Session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if os == nil {
		return nil, fmt.Errorf("%w: session %s is named by a credential but has no row", ErrCorrupt, sessionID)
	}
	return s.terminate(ctx, sessionID, SessionSuperseded)
}

// terminate moves a session to a terminal state (if it is not one already) and revokes and marks
// both halves, rereading the row when a concurrent writer moved it.
func (s *Store) terminate(ctx context.Context, sessionID string, to SessionState) (*SessionTeardown, error) {
	t := &SessionTeardown{}
	for range 5 {
		t = &SessionTeardown{}
		os, err := s.Session(ctx, sessionID)
		if err != nil {
			return t, err
		}
		if os == nil {
			return t, fmt.Errorf("no session %s", sessionID)
		}
		next := os.Row
		moved := !next.State.Terminal()
		if moved {
			next.State = to
		}
		var errs []error
		for _, p := range []sessionParty{partyCaller, partyServing} {
			done := &next.Revoked.Caller
			if p == partyServing {
				done = &next.Revoked.Serving
			}
			// Each half is checked at its row, marked or not: a redemption racing this one can
			// stage a half after an earlier pass found nothing to revoke.
			key, principal, err := s.revokeSessionHalf(ctx, &next, p)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			*done = true
			if key != "" {
				t.RevokedKeys = append(t.RevokedKeys, key)
			}
			if p == partyServing {
				t.ServingPrincipal = principal
			}
		}
		if next == os.Row {
			return t, errors.Join(errs...)
		}
		if _, err := s.moveSession(ctx, os, next); errors.Is(err, ErrConflict) {
			continue // moved under us: reread and retry; the revocations are idempotent
		} else if err != nil {
			return t, errors.Join(append(errs, err)...)
		}
		t.Transitioned = moved
		return t, errors.Join(errs...)
	}
	return t, fmt.Errorf("terminate session %s: %w: the row kept moving", sessionID, ErrConflict)
}

// revokeSessionHalf revokes one half's credential row, idempotently, and returns its user key and
// principal. A half that was never staged has nothing to revoke.
func (s *Store) revokeSessionHalf(ctx context.Context, row *SessionRow, p sessionParty) (userKey, principal string, err error) {
	cred, err := s.sessionCredential(ctx, row, p)
	if err != nil || cred == nil {
		return "", "", err
	}
	reason := "session " + string(row.State)
	if p == partyCaller {
		cred, err = s.revokeRow(ctx, row.Holder.LifecycleUID, row.CredCaller, reason)
	} else {
		var serve *ServeGate
		if serve, err = s.ServeGate(row.servingEndpoint()); err == nil {
			cred, err = serve.Revoke(ctx, row.CredServing, reason)
		}
	}
	if err != nil {
		return "", "", err
	}
	return cred.UserKey, cred.Principal, nil
}

// SweepResult is what one sweep pass did.
type SweepResult struct {
	// Acted counts the sessions the pass expired or finished revoking.
	Acted int
	// RevokedKeys are the user keys of the credentials it revoked, for the broker to refuse.
	RevokedKeys []string
	// Failed lists each session it could not read or settle; the others were still swept.
	Failed []error
}

// SweepSessions expires every session past its exp and retries the unmarked revocations of
// terminal ones. A malformed row is reported in Failed and never stops the pass.
func (s *Store) SweepSessions(ctx context.Context, now time.Time) (*SweepResult, error) {
	keys, err := s.keys(ctx, keySession+"*")
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	slices.Sort(keys)
	res := &SweepResult{}
	for _, key := range keys {
		os, err := s.readSession(ctx, key)
		if err != nil || os == nil {
			if err != nil {
				res.Failed = append(res.Failed, err)
			}
			continue
		}
		row := os.Row
		expired := !row.State.Terminal() && !now.Before(row.Exp.Time())
		unmarked := row.State.Terminal() && !(row.Revoked.Caller && row.Revoked.Serving)
		if !expired && !unmarked {
			continue
		}
		t, err := s.terminate(ctx, row.SessionID, SessionExpired)
		res.RevokedKeys = append(res.RevokedKeys, t.RevokedKeys...)
		if err != nil {
			res.Failed = append(res.Failed, fmt.Errorf("%s: %w", key, err))
			continue
		}
		res.Acted++
	}
	return res, nil
}

// PruneSessions removes the rows of sessions that ended at least retention ago and whose halves'
// revocations both completed, with their stage pins: what SPEC §13.8 keeps for the idempotency
// horizon (retention) and no longer. It returns how many sessions it removed; a row it cannot
// read or remove is reported in the joined error and left for the next pass.
func (s *Store) PruneSessions(ctx context.Context, now time.Time, retention time.Duration) (int, error) {
	keys, err := s.keys(ctx, keySession+"*")
	if err != nil {
		return 0, fmt.Errorf("list sessions: %w", err)
	}
	var errs []error
	pruned := 0
	for _, key := range keys {
		os, err := s.readSession(ctx, key)
		if err != nil || os == nil {
			if err != nil {
				errs = append(errs, err)
			}
			continue
		}
		row := os.Row
		if !row.State.Terminal() || !row.Revoked.Caller || !row.Revoked.Serving || now.Sub(os.Written) < retention {
			continue
		}
		if err := s.removeStagePins(ctx, row.SessionID); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := s.prune(ctx, key, os.Revision); err != nil {
			errs = append(errs, err)
			continue
		}
		pruned++
	}
	return pruned, errors.Join(errs...)
}

// removeStagePins removes the stage pins of a session's two halves; a pin already gone is not an
// error.
func (s *Store) removeStagePins(ctx context.Context, sessionID string) error {
	for _, p := range []sessionParty{partyCaller, partyServing} {
		key := keyStageSession + sessionID + "." + string(p)
		r, err := s.readNeverDeleted(ctx, key)
		if err != nil {
			return err
		}
		if r == nil {
			continue
		}
		if err := s.prune(ctx, key, r.Revision); err != nil {
			return err
		}
	}
	return nil
}

// targetSource starts the source-chain entry naming the lifecycle a session carries.
const targetSource = "target."

// SessionTarget returns the lifecycle a session credential's row names as the session's target;
// false for a row that names none.
func (r CredentialRow) SessionTarget() (wire.Lifecycle, bool) {
	v := r.source(targetSource)
	if v == "" {
		return wire.Lifecycle{}, false
	}
	l, err := wire.ParseLifecycle(v)
	return l, err == nil
}

// sessionsOf returns the session ids a credential row's source chain names.
func sessionsOf(row CredentialRow) []string {
	var ids []string
	for _, src := range row.SourceChain {
		if id, ok := strings.CutPrefix(src, keySession); ok {
			ids = append(ids, id)
		}
	}
	return ids
}
