package authstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/wire"
)

// checkCredentialID refuses a credential id that is not one key token. Session halves'
// <sessionId>.<c|s> ids are written by the session ledger only, so no other issue can take one.
func checkCredentialID(id string) error {
	if id == "" || !isKeyToken(id) {
		return &wire.ValidationError{Field: "credentialId", Value: id, Rule: "must be one token of [A-Za-z0-9_-]"}
	}
	return nil
}

// credTTL is how long a credential row is kept: until the credential expires (then it can act no
// more), or forever.
func credTTL(r *CredentialRow) time.Duration {
	if r.ExpiresAt == 0 {
		return 0
	}
	return max(time.Until(r.ExpiresAt.Time()), time.Second)
}

// Issue mints a credential for a lifecycle through its issuance gate (SPEC §13.1): it observes
// the gate (which must be open), stages the credential's ledger row, commits by rewriting the
// gate at the observed revision, and only then releases the creds. If the gate moved in between
// the mint loses with ErrConflict, removes its staged row and releases nothing. credentialID is
// the idempotency key: a retry after a crash anywhere returns byte-identical creds.
func (s *Store) Issue(ctx context.Context, keys *authority.SpaceKeys, req authority.MintRequest, credentialID string) (*authority.Credential, error) {
	og, err := s.ObserveGate(ctx, req.Grant.LifecycleUID)
	if err != nil {
		return nil, err
	}
	return s.IssueObserved(ctx, keys, og, req, credentialID)
}

// IssueObserved is Issue against a gate already observed: of several issues against one
// observation, exactly one commits; the others lose with ErrConflict and leave no row.
func (s *Store) IssueObserved(ctx context.Context, keys *authority.SpaceKeys, og *ObservedGate, req authority.MintRequest, credentialID string) (*authority.Credential, error) {
	row, user, err := s.commit(ctx, keys, og, req, credentialID)
	if err != nil {
		return nil, err
	}
	return release(row, user)
}

// commit stages a credential's row (with extra source-chain entries) and commits it through the
// gate observed at og, which must be open.
func (s *Store) commit(ctx context.Context, keys *authority.SpaceKeys, og *ObservedGate, req authority.MintRequest, credentialID string, extra ...string) (*CredentialRow, nkeys.KeyPair, error) {
	uid := req.Grant.LifecycleUID
	if og == nil || og.Row.State != GateOpen {
		return nil, nil, fmt.Errorf("issue for lifecycle %s: %w: its gate is not open", uid, ErrConflict)
	}
	row, rowRev, staged, user, err := s.stage(ctx, keys, req, credentialID, extra...)
	if err != nil {
		return nil, nil, err
	}
	if err := s.touchGate(ctx, uid, og); err != nil {
		if staged && errors.Is(err, ErrConflict) {
			if rerr := s.remove(ctx, keyCred+string(uid)+"."+credentialID, rowRev); rerr != nil {
				return nil, nil, errors.Join(err, rerr)
			}
		}
		return nil, nil, fmt.Errorf("commit credential %s: %w", credentialID, err)
	}
	return row, user, nil
}

// stage writes the credential's ledger row, or finds the one a previous attempt wrote. staged
// reports that this call wrote it.
func (s *Store) stage(ctx context.Context, keys *authority.SpaceKeys, req authority.MintRequest, credentialID string, extra ...string) (row *CredentialRow, rev uint64, staged bool, user nkeys.KeyPair, err error) {
	if keys.Space != s.space {
		return nil, 0, false, nil, fmt.Errorf("issue: keys of space %s for the auth store of %s", keys.Space, s.space)
	}
	if err := checkCredentialID(credentialID); err != nil {
		return nil, 0, false, nil, err
	}
	uid := req.Grant.LifecycleUID
	if _, err := wire.ParseLifecycleUID(string(uid)); err != nil {
		return nil, 0, false, nil, fmt.Errorf("issue: %w", err)
	}
	if user, err = keys.UserKey(credentialID); err != nil {
		return nil, 0, false, nil, err
	}
	cred, err := keys.SignFor(req, authority.PublicKey(user))
	if err != nil {
		return nil, 0, false, nil, err
	}
	row = &CredentialRow{
		V: credentialRowVersion, CredentialID: credentialID, LifecycleUID: uid, Principal: cred.Principal.String(),
		Profile: cred.Profile, UserKey: cred.PublicKey, State: CredActive, IssuedAt: wire.MillisOf(time.Now()), JWT: cred.JWT,
	}
	if !cred.Expires.IsZero() {
		row.ExpiresAt = wire.MillisOf(cred.Expires)
	}
	if cred.Instrument != "" {
		row.SourceChain = append(row.SourceChain, instrumentSource+string(cred.Instrument))
	}
	if cred.Generation != "" {
		row.SourceChain = append(row.SourceChain, generationSource+cred.Generation)
	}
	row.SourceChain = append(row.SourceChain, extra...)
	// Write first, create-only: a fresh id (the common case) costs no read. A row already there is
	// a previous attempt's, which this one resumes.
	raw, _ := json.Marshal(row) // always encodes
	rev, err = s.write(ctx, keyCred+string(uid)+"."+credentialID, raw, 0, credTTL(row))
	if errors.Is(err, ErrConflict) {
		var have *CredentialRow
		if have, rev, err = s.credential(ctx, uid, credentialID); err != nil || have != nil {
			if have != nil && have.State != CredActive {
				err = fmt.Errorf("issue %s: the credential is %s", credentialID, have.State)
			}
			return have, rev, false, user, err
		}
		err = fmt.Errorf("stage credential %s: %w: the row was deleted", credentialID, ErrConflict)
	}
	if err != nil {
		return nil, 0, false, nil, fmt.Errorf("stage credential %s: %w", credentialID, err)
	}
	return row, rev, true, user, nil
}

// Renew renews an active credential in place: its row gets a fresh JWT for the same user key,
// with the same permissions, issued now and living life, so a holder renews without changing
// its key, its inbox or its connection's subscriptions. Like an issue it goes through the
// lifecycle's gate, which must be open, and commits by reading the gate back unchanged; a
// revocation or a retirement that lands first wins (ErrConflict, or the row is no longer
// active). The JWT it replaces is not revoked: it carries the same key, and expires on its own.
func (s *Store) Renew(ctx context.Context, keys *authority.SpaceKeys, uid wire.LifecycleUID, credentialID string, life time.Duration) (*authority.Credential, error) {
	if keys.Space != s.space {
		return nil, fmt.Errorf("renew: keys of space %s for the auth store of %s", keys.Space, s.space)
	}
	if life <= 0 {
		return nil, fmt.Errorf("renew %s: the lifetime must be positive, not %s", credentialID, life)
	}
	og, err := s.ObserveGate(ctx, uid)
	if err != nil {
		return nil, err
	}
	if og == nil || og.Row.State != GateOpen {
		return nil, fmt.Errorf("renew %s of lifecycle %s: %w: its gate is not open", credentialID, uid, ErrConflict)
	}
	row, rev, err := s.credential(ctx, uid, credentialID)
	if err != nil {
		return nil, err
	}
	if row == nil || row.State != CredActive {
		return nil, fmt.Errorf("renew %s of lifecycle %s: %w: it is not an active credential", credentialID, uid, ErrConflict)
	}
	user, err := keys.UserKey(credentialID)
	if err != nil {
		return nil, err
	}
	raw, err := resign(keys, row, "credential "+credentialID, life)
	if err != nil {
		return nil, err
	}
	if _, err := s.write(ctx, keyCred+string(uid)+"."+credentialID, raw, rev, credTTL(row)); err != nil {
		return nil, fmt.Errorf("renew %s: %w", credentialID, err)
	}
	if err := s.confirmGate(ctx, keyGate+string(uid), og.raw); err != nil {
		return nil, fmt.Errorf("commit the renewal of %s: %w", credentialID, err)
	}
	return release(row, user)
}

// resign re-signs row's JWT for life from now, in place, and returns the row's new encoding. A JWT
// that does not decode is ErrCorrupt, named by what.
func resign(keys *authority.SpaceKeys, row *CredentialRow, what string, life time.Duration) ([]byte, error) {
	claims, err := jwt.DecodeUserClaims(row.JWT)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, what, err)
	}
	now := time.Now()
	claims.IssuedAt, claims.Expires = now.Unix(), now.Add(life).Unix()
	if row.JWT, err = keys.SignClaims(claims); err != nil {
		return nil, fmt.Errorf("renew %s: sign: %w", what, err)
	}
	row.IssuedAt, row.ExpiresAt = wire.MillisOf(now), wire.MillisOf(time.Unix(claims.Expires, 0))
	raw, _ := json.Marshal(row) // always encodes
	return raw, nil
}

// The source-chain entries naming what a credential's rows pin beyond its lifecycle, so a
// retried issue releases the same credential: a control instrument's instrument lifecycle, an
// agent's issued generation.
const (
	instrumentSource = "instrument."
	generationSource = "generation."
)

// source returns the value of the row's source-chain entry starting with prefix, or "".
func (r CredentialRow) source(prefix string) string {
	for _, src := range r.SourceChain {
		if v, ok := strings.CutPrefix(src, prefix); ok {
			return v
		}
	}
	return ""
}

// Instrument returns the instrument lifecycle a control instrument's row names; empty for every
// other row.
func (r CredentialRow) Instrument() wire.LifecycleUID {
	return wire.LifecycleUID(r.source(instrumentSource))
}

// Generation returns the issued generation an agent's row names; empty for every other row.
func (r CredentialRow) Generation() string { return r.source(generationSource) }

// release builds the creds of a committed row: its JWT and the derived seed.
func release(row *CredentialRow, user nkeys.KeyPair) (*authority.Credential, error) {
	if authority.PublicKey(user) != row.UserKey {
		return nil, fmt.Errorf("%w: credential %s names user %s, not the key its id derives (was the signing key rotated?)", ErrCorrupt, row.CredentialID, row.UserKey)
	}
	seed, err := user.Seed()
	if err != nil {
		return nil, err
	}
	c, err := held(row)
	if err != nil {
		return nil, err
	}
	if c.Creds, err = jwt.FormatUserConfig(row.JWT, seed); err != nil {
		return nil, err
	}
	return c, nil
}

// held returns the credential a row records without its creds: a credential whose seed only its
// holder has (SpaceKeys.SignUser) is handed over as its JWT alone.
func held(row *CredentialRow) (*authority.Credential, error) {
	p, err := wire.ParsePrincipal(row.Principal)
	if err != nil {
		return nil, err
	}
	c := &authority.Credential{Profile: row.Profile, Principal: p, LifecycleUID: row.LifecycleUID, Instrument: row.Instrument(),
		Generation: row.Generation(), CredentialID: row.CredentialID, PublicKey: row.UserKey, JWT: row.JWT}
	if row.ExpiresAt != 0 {
		c.Expires = row.ExpiresAt.Time()
	}
	return c, nil
}

func isKeyToken(s string) bool {
	if len(s) > 128 {
		return false
	}
	for _, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
