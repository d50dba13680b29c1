package authstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// Endpoint gates and serving credentials (SPEC §13.1): a family disjoint from the agent
// lifecycle's, by explicit prefix. An instance id is unique only within its endpoint, so every
// key is endpoint-qualified.
//
//	epgate.<endpoint>.<instanceId>                   the serve issuance gate
//	epcred.<endpoint>.<instanceId>.<credentialId>    a serving credential, active → revoked

// keyEpCred starts a serving credential's key; the gate's prefix is meshwire.EndpointGatePrefix,
// since a remote manager's grant names its own gate.
const keyEpCred = "epcred."

// EndpointGateRow is epgate.<endpoint>.<instanceId>. Principal is the serving instance's
// connection principal, the eviction target when the endpoint is taken over or a serving
// credential is revoked. The schema is closed.
type EndpointGateRow struct {
	State                 GateState       `json:"state"`
	Generation            int64           `json:"generation"`
	ProcessEpoch          int64           `json:"processEpoch"`
	RegistrationRevision  int64           `json:"registrationRevision"`
	NameAuthorityRevision int64           `json:"nameAuthorityRevision"`
	Principal             string          `json:"principal"`
	Op                    *EndpointGateOp `json:"op,omitempty"`
}

// EndpointGateOp names the operation that last moved an endpoint gate.
type EndpointGateOp struct {
	OpID      string `json:"opId"`
	Kind      OpKind `json:"kind"`
	Successor string `json:"successor,omitempty"`
}

// Endpoint names one endpoint instance: the endpoint token and its instance id.
type Endpoint struct {
	Name       string
	InstanceID wire.LifecycleUID
}

func (e Endpoint) validate() error {
	if e.Name == "" || !isKeyToken(e.Name) {
		return &wire.ValidationError{Field: "endpoint", Value: e.Name, Rule: "must be one token of [A-Za-z0-9_-]"}
	}
	_, err := wire.ParseLifecycleUID(string(e.InstanceID))
	return err
}

// gateKey returns the auth-store key of the endpoint instance's serve gate,
// "epgate.<endpoint>.<instanceId>".
func (e Endpoint) gateKey() string { return meshwire.EndpointGateKey(e.Name, e.InstanceID) }

func (e Endpoint) credKey(credentialID string) string {
	return keyEpCred + e.Name + "." + string(e.InstanceID) + "." + credentialID
}

// ServeGate is the serve issuance gate of one endpoint instance: observe, stage, commit and
// revoke over its gate and serving rows. It holds its store for its lifetime rather than
// reopening the bucket per call.
type ServeGate struct {
	store    *Store
	endpoint Endpoint
}

// ServeGate returns the serve issuance gate of an endpoint instance.
func (s *Store) ServeGate(e Endpoint) (*ServeGate, error) {
	if err := e.validate(); err != nil {
		return nil, err
	}
	return &ServeGate{store: s, endpoint: e}, nil
}

// ObservedEndpointGate is an endpoint gate read at one revision.
type ObservedEndpointGate struct {
	Row      EndpointGateRow
	Revision uint64
	raw      []byte
}

// Observe reads the gate (leader-served); nil when the instance has none. A delete marker is
// corruption: gates are never deleted.
func (g *ServeGate) Observe(ctx context.Context) (*ObservedEndpointGate, error) {
	key := g.endpoint.gateKey()
	r, err := g.store.readNeverDeleted(ctx, key)
	if err != nil || r == nil {
		return nil, err
	}
	var row EndpointGateRow
	if err := decodeStrict(r.Value, &row); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
	}
	return &ObservedEndpointGate{Row: row, Revision: r.Revision, raw: r.Value}, nil
}

// Move moves the gate from its observation (nil: absent) to next, along next.Op's transitions,
// by revision CAS.
func (g *ServeGate) Move(ctx context.Context, og *ObservedEndpointGate, next EndpointGateRow) (*ObservedEndpointGate, error) {
	if next.Op == nil {
		return nil, errors.New("an endpoint gate move names its operation")
	}
	if _, err := wire.ParsePrincipal(next.Principal); err != nil {
		return nil, fmt.Errorf("endpoint gate principal: %w", err)
	}
	var from GateState
	var rev uint64
	if og != nil {
		from, rev = og.Row.State, og.Revision
	}
	if err := CheckGateTransition(next.Op.Kind, from, next.State); err != nil {
		return nil, err
	}
	raw, _ := json.Marshal(next) // always encodes
	nrev, err := g.store.write(ctx, g.endpoint.gateKey(), raw, rev, 0)
	if err != nil {
		return nil, err
	}
	return &ObservedEndpointGate{Row: next, Revision: nrev, raw: raw}, nil
}

// Stage writes a serving credential row (create-only); an identical retry finds its own row.
func (g *ServeGate) Stage(ctx context.Context, row *CredentialRow) (uint64, error) {
	if err := checkCredentialID(row.CredentialID); err != nil {
		return 0, err
	}
	if _, err := wire.ParsePrincipal(row.Principal); err != nil {
		return 0, fmt.Errorf("serving credential principal: %w", err)
	}
	return g.stage(ctx, row)
}

// stage writes a serving credential row whose id is already checked, create-only.
func (g *ServeGate) stage(ctx context.Context, row *CredentialRow) (uint64, error) {
	row.V, row.LifecycleUID = credentialRowVersion, g.endpoint.InstanceID
	raw, _ := json.Marshal(row) // always encodes
	return g.store.write(ctx, g.endpoint.credKey(row.CredentialID), raw, 0, credTTL(row))
}

// Commit rewrites the gate's bytes at its observed revision: if a barrier moved the gate since
// it was observed, the commit loses with ErrConflict.
func (g *ServeGate) Commit(ctx context.Context, og *ObservedEndpointGate) error {
	if og == nil || og.Row.State != GateOpen {
		return fmt.Errorf("%w: the gate of %s is not open", ErrConflict, g.endpoint.Name)
	}
	_, err := g.store.write(ctx, g.endpoint.gateKey(), og.raw, og.Revision, 0)
	return err
}

// Credential reads a serving credential row; nil when absent.
func (g *ServeGate) Credential(ctx context.Context, credentialID string) (*CredentialRow, uint64, error) {
	key := g.endpoint.credKey(credentialID)
	r, err := g.store.read(ctx, key)
	if err != nil || r == nil || r.Deleted {
		return nil, 0, err
	}
	var row CredentialRow
	if err := decodeStrict(r.Value, &row); err != nil {
		return nil, 0, fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
	}
	return &row, r.Revision, nil
}

// Revoke moves a serving credential to revoked, idempotently.
func (g *ServeGate) Revoke(ctx context.Context, credentialID, reason string) (*CredentialRow, error) {
	row, rev, err := g.Credential(ctx, credentialID)
	if err != nil {
		return nil, err
	}
	if row == nil {
		return nil, fmt.Errorf("no serving credential %s of %s", credentialID, g.endpoint.Name)
	}
	if row.State == CredRevoked {
		return row, nil
	}
	row.State, row.RevokedAt, row.Reason = CredRevoked, wire.MillisOf(time.Now()), reason
	raw, _ := json.Marshal(row) // always encodes
	if _, err := g.store.write(ctx, g.endpoint.credKey(credentialID), raw, rev, credTTL(row)); err != nil {
		return nil, fmt.Errorf("revoke serving credential %s: %w", credentialID, err)
	}
	return row, nil
}

// checkEndpointRow checks an epgate or epcred row for Check.
func (s *Store) checkEndpointRow(ctx context.Context, key string) error {
	fields := strings.Split(key, ".")
	bad := func() error {
		return fmt.Errorf("%w: %s is not epgate.<endpoint>.<instanceId> or epcred.<endpoint>.<instanceId>.<credentialId>", ErrCorrupt, key)
	}
	if len(fields) < 3 {
		return bad()
	}
	g, err := s.ServeGate(Endpoint{Name: fields[1], InstanceID: wire.LifecycleUID(fields[2])})
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
	}
	switch {
	case strings.HasPrefix(key, meshwire.EndpointGatePrefix) && len(fields) == 3:
		_, err = g.Observe(ctx)
	case strings.HasPrefix(key, keyEpCred) && len(fields) >= 4:
		_, _, err = g.Credential(ctx, strings.Join(fields[3:], "."))
	default:
		err = bad()
	}
	return err
}
