package authstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/wire"
)

// Serve issuance (SPEC §13.1): a serving credential is minted through its instance's gate at the
// gate's process epoch, and its epcred row records that epoch in its source chain, so a renewal
// or a fence can tell which incarnation it serves.

// servedEpochSource starts the source-chain entry naming a serving credential's epoch.
const servedEpochSource = "epoch."

// ServedEpoch returns the serve epoch a serving credential row was issued at, from its source
// chain; false for a row that names none.
func (r CredentialRow) ServedEpoch() (int64, bool) {
	e, err := strconv.ParseInt(r.source(servedEpochSource), 10, 64)
	return e, err == nil
}

// Issue mints a serving credential through the gate observed at og, which must be open: the
// credential's serve rows must name this gate's endpoint and instance at its process epoch. It
// stages the epcred row create-only, commits by rewriting the gate at og's revision and only then
// releases the creds; a gate moved in between loses with ErrConflict, and its staged row is
// revoked (its creds were never released). credentialID is the idempotency key: a retry finds
// the row a previous attempt staged and returns the same creds.
func (g *ServeGate) Issue(ctx context.Context, keys *authority.SpaceKeys, og *ObservedEndpointGate, req authority.MintRequest, credentialID string) (*authority.Credential, error) {
	if err := checkCredentialID(credentialID); err != nil {
		return nil, err
	}
	user, err := keys.UserKey(credentialID)
	if err != nil {
		return nil, err
	}
	row, err := g.issue(ctx, keys, og, req, credentialID, authority.PublicKey(user))
	if err != nil {
		return nil, err
	}
	return release(row, user)
}

// IssueHeld is Issue for a user key its holder generated and keeps (a remote manager's serve
// identity): the row records pub, and the credential comes back as its JWT alone, without creds.
// A retry under the same credentialID must name the same key.
func (g *ServeGate) IssueHeld(ctx context.Context, keys *authority.SpaceKeys, og *ObservedEndpointGate, req authority.MintRequest, credentialID, pub string) (*authority.Credential, error) {
	if err := checkCredentialID(credentialID); err != nil {
		return nil, err
	}
	if !nkeys.IsValidPublicUserKey(pub) {
		return nil, &wire.ValidationError{Field: "userKey", Value: pub, Rule: "must be a public user nkey"}
	}
	row, err := g.issue(ctx, keys, og, req, credentialID, pub)
	if err != nil {
		return nil, err
	}
	if row.UserKey != pub {
		return nil, fmt.Errorf("serve issue %s: %w: a previous attempt staged it for another key", credentialID, ErrConflict)
	}
	return held(row)
}

// issue stages and commits the row of a serving credential for the user key pub.
func (g *ServeGate) issue(ctx context.Context, keys *authority.SpaceKeys, og *ObservedEndpointGate, req authority.MintRequest, credentialID, pub string) (*CredentialRow, error) {
	if keys.Space != g.store.space {
		return nil, fmt.Errorf("serve issue: keys of space %s for the auth store of %s", keys.Space, g.store.space)
	}
	if og == nil || og.Row.State != GateOpen {
		return nil, fmt.Errorf("serve issue for %s: %w: its gate is not open", g.endpoint.Name, ErrConflict)
	}
	// Every credential issued through the gate serves its instance at the gate's epoch; a
	// session ledger's rows name no instance, and it is issued here as the serve credential's
	// sibling, fenced with it.
	if sv := req.Grant.Serve; (sv == nil && req.Profile != authority.ProfileSessionLedger) ||
		(sv != nil && (sv.Endpoint.Token() != g.endpoint.Name || sv.Instance != g.endpoint.InstanceID || sv.Epoch != og.Row.ProcessEpoch)) {
		return nil, fmt.Errorf("serve issue for %s %s: the credential must serve this instance at the gate's epoch %d", g.endpoint.Name, g.endpoint.InstanceID, og.Row.ProcessEpoch)
	}
	cred, err := keys.SignFor(req, pub)
	if err != nil {
		return nil, err
	}
	row := &CredentialRow{
		CredentialID: credentialID, Principal: cred.Principal.String(), Profile: cred.Profile, UserKey: cred.PublicKey,
		State: CredActive, IssuedAt: wire.MillisOf(time.Now()), JWT: cred.JWT,
		SourceChain: []string{g.endpoint.gateKey(), servedEpochSource + strconv.FormatInt(og.Row.ProcessEpoch, 10)},
	}
	if !cred.Expires.IsZero() {
		row.ExpiresAt = wire.MillisOf(cred.Expires)
	}
	staged := true
	if _, err := g.stage(ctx, row); errors.Is(err, ErrConflict) {
		// A previous attempt's row: resume it, if it is still the active credential it staged.
		have, _, rerr := g.Credential(ctx, credentialID)
		if rerr != nil {
			return nil, rerr
		}
		if have == nil || have.State != CredActive {
			return nil, fmt.Errorf("serve issue %s: %w: the row is gone or revoked", credentialID, ErrConflict)
		}
		row, staged = have, false
	} else if err != nil {
		return nil, fmt.Errorf("stage serving credential %s: %w", credentialID, err)
	}
	if err := g.Commit(ctx, og); err != nil {
		if staged && errors.Is(err, ErrConflict) {
			if _, rerr := g.Revoke(ctx, credentialID, "its issue lost the gate race"); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
		return nil, fmt.Errorf("commit serving credential %s: %w", credentialID, err)
	}
	return row, nil
}

// Renew renews an active serving credential in place, as Store.Renew does an agent's: the
// same user key and permissions with a fresh JWT living life, so its holder keeps its connection
// and subscriptions. It commits through the gate, which must be open at the epoch the credential
// serves: once a newer incarnation has moved the gate, a renewal is ErrConflict, and a fenced
// credential stays fenced.
func (g *ServeGate) Renew(ctx context.Context, keys *authority.SpaceKeys, credentialID string, life time.Duration) (*authority.Credential, error) {
	user, err := keys.UserKey(credentialID)
	if err != nil {
		return nil, err
	}
	row, err := g.renew(ctx, keys, credentialID, life)
	if err != nil {
		return nil, err
	}
	return release(row, user)
}

// RenewHeld is Renew for a credential issued with IssueHeld: the fresh JWT comes back alone.
func (g *ServeGate) RenewHeld(ctx context.Context, keys *authority.SpaceKeys, credentialID string, life time.Duration) (*authority.Credential, error) {
	row, err := g.renew(ctx, keys, credentialID, life)
	if err != nil {
		return nil, err
	}
	return held(row)
}

// renew re-signs an active serving credential's row for life and commits it through the gate.
func (g *ServeGate) renew(ctx context.Context, keys *authority.SpaceKeys, credentialID string, life time.Duration) (*CredentialRow, error) {
	if keys.Space != g.store.space {
		return nil, fmt.Errorf("serve renew: keys of space %s for the auth store of %s", keys.Space, g.store.space)
	}
	if life <= 0 {
		return nil, fmt.Errorf("renew %s: the lifetime must be positive, not %s", credentialID, life)
	}
	og, err := g.Observe(ctx)
	if err != nil {
		return nil, err
	}
	if og == nil || og.Row.State != GateOpen {
		return nil, fmt.Errorf("renew %s of %s: %w: its gate is not open", credentialID, g.endpoint.Name, ErrConflict)
	}
	key := g.endpoint.credKey(credentialID)
	row, rev, err := g.Credential(ctx, credentialID)
	if err != nil {
		return nil, err
	}
	if row == nil || row.State != CredActive {
		return nil, fmt.Errorf("renew %s: %w: it is not an active serving credential", key, ErrConflict)
	}
	if e, ok := row.ServedEpoch(); !ok || e != og.Row.ProcessEpoch {
		return nil, fmt.Errorf("renew %s: %w: it serves epoch %d, the gate is at %d", key, ErrConflict, e, og.Row.ProcessEpoch)
	}
	raw, err := resign(keys, row, key, life)
	if err != nil {
		return nil, err
	}
	if _, err := g.store.write(ctx, key, raw, rev, credTTL(row)); err != nil {
		return nil, fmt.Errorf("renew %s: %w", key, err)
	}
	if err := g.store.confirmGate(ctx, g.endpoint.gateKey(), og.raw); err != nil {
		return nil, fmt.Errorf("commit the renewal of %s: %w", key, err)
	}
	return row, nil
}

// Credentials lists the instance's serving credential rows, by credential id. A malformed row is
// an ErrCorrupt error naming it, after the others.
func (g *ServeGate) Credentials(ctx context.Context) ([]CredentialRow, error) {
	prefix := g.endpoint.credKey("")
	keys, err := g.store.keys(ctx, prefix+">")
	if err != nil {
		return nil, fmt.Errorf("list the serving credentials of %s: %w", g.endpoint.Name, err)
	}
	return readRows(keys, func(key string) (*CredentialRow, error) {
		row, _, err := g.Credential(ctx, strings.TrimPrefix(key, prefix))
		return row, err
	})
}

// ServingInstances lists the instances of endpoint (its token) that hold or held a serving
// credential, each once, sorted. A key that names no instance is skipped: the rows are checked
// where they are read.
func (s *Store) ServingInstances(ctx context.Context, endpoint string) ([]wire.LifecycleUID, error) {
	prefix := keyEpCred + endpoint + "."
	keys, err := s.keys(ctx, prefix+">")
	if err != nil {
		return nil, fmt.Errorf("list the serving credentials of %s: %w", endpoint, err)
	}
	var out []wire.LifecycleUID
	for _, key := range keys {
		id, _, ok := strings.Cut(strings.TrimPrefix(key, prefix), ".")
		if uid, err := wire.ParseLifecycleUID(id); ok && err == nil && !slices.Contains(out, uid) {
			out = append(out, uid)
		}
	}
	slices.Sort(out)
	return out, nil
}

// ServingCredentials lists every serving credential row of the store, of every endpoint
// instance; a malformed row is an ErrCorrupt error naming it, after the others.
func (s *Store) ServingCredentials(ctx context.Context) ([]CredentialRow, error) {
	keys, err := s.keys(ctx, keyEpCred+">")
	if err != nil {
		return nil, fmt.Errorf("list serving credentials: %w", err)
	}
	return readRows(keys, func(key string) (*CredentialRow, error) {
		fields := strings.SplitN(key, ".", 4)
		if len(fields) != 4 {
			return nil, fmt.Errorf("%w: %s is not epcred.<endpoint>.<instanceId>.<credentialId>", ErrCorrupt, key)
		}
		g, err := s.ServeGate(Endpoint{Name: fields[1], InstanceID: wire.LifecycleUID(fields[2])})
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
		}
		row, _, err := g.Credential(ctx, fields[3])
		return row, err
	})
}
