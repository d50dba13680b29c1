package authstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/wire"
)

// The lifecycle registry and the credential ledger in the auth store (SPEC §13.1). Keys:
//
//	uid.<lifecycleUid>                    reservation, create-only, never deleted
//	lifecycle.<owner>.<actor>             the alias head, moved only by revision CAS
//	gate.<lifecycleUid>                   the issuance gate, the mint fence
//	cred.<lifecycleUid>.<credentialId>    a credential, active → revoked only

// GateState is an issuance gate's state.
type GateState string

// The gate states. Only an open gate issues credentials; retired is terminal.
const (
	GateOpen    GateState = "open"
	GateFrozen  GateState = "frozen"
	GateRetired GateState = "retired"
)

// OpKind is the kind of operation that moved a gate.
type OpKind string

// The gate operations.
const (
	OpActivation   OpKind = "activation"
	OpTakeover     OpKind = "takeover"
	OpRegistration OpKind = "registration"
	OpRetirement   OpKind = "retirement"
)

// gateTransitions lists, per operation kind, the moves it may make ("" is an absent gate).
var gateTransitions = map[OpKind][][2]GateState{
	OpActivation:   {{"", GateOpen}},
	OpTakeover:     {{GateOpen, GateFrozen}, {GateFrozen, GateOpen}},
	OpRegistration: {{GateOpen, GateOpen}},
	OpRetirement:   {{GateOpen, GateRetired}, {GateFrozen, GateRetired}},
}

// CheckGateTransition returns ErrTransition unless kind may move a gate from one state to
// another ("" for an absent gate).
func CheckGateTransition(kind OpKind, from, to GateState) error {
	if slices.Contains(gateTransitions[kind], [2]GateState{from, to}) {
		return nil
	}
	return fmt.Errorf("%w: %s may not move a gate from %q to %q", ErrTransition, kind, from, to)
}

// GateOp names the operation that last moved a gate.
type GateOp struct {
	OpID string `json:"opId"`
	Kind OpKind `json:"kind"`
}

// GateRow is gate.<lifecycleUid>.
type GateRow struct {
	State        GateState `json:"state"`
	Generation   int64     `json:"generation"`
	ProcessEpoch int64     `json:"processEpoch"`
	Op           GateOp    `json:"op"`
}

// FirstEpoch is the process epoch of a principal's first lifecycle; each lifecycle that takes the
// alias after it counts one more.
const FirstEpoch int64 = 1

// HeadState is an alias head's state.
type HeadState string

// The head states.
const (
	HeadActive   HeadState = "active"
	HeadRetiring HeadState = "retiring"
	HeadRetired  HeadState = "retired"
)

// LifecycleHead is lifecycle.<owner>.<actor>: which incarnation the alias currently maps to.
type LifecycleHead struct {
	Owner        string            `json:"owner"`
	Actor        string            `json:"actor"`
	LifecycleUID wire.LifecycleUID `json:"lifecycleUid"`
	ProcessEpoch int64             `json:"processEpoch"`
	State        HeadState         `json:"state"`
}

// uidReservation is uid.<lifecycleUid>.
type uidReservation struct {
	LifecycleUID wire.LifecycleUID `json:"lifecycleUid"`
	Principal    string            `json:"principal"`
	ReservedAt   wire.EpochMillis  `json:"reservedAt"`
}

// CredentialState is a ledger row's state: active, then possibly revoked, never back.
type CredentialState string

// The credential states.
const (
	CredActive  CredentialState = "active"
	CredRevoked CredentialState = "revoked"
)

// CredentialRow is cred.<lifecycleUid>.<credentialId>. Its schema is closed: a row with a field
// it does not name is refused as corrupt.
type CredentialRow struct {
	V            int               `json:"v"`
	CredentialID string            `json:"credentialId"`
	LifecycleUID wire.LifecycleUID `json:"lifecycleUid"`
	Principal    string            `json:"principal"`
	Profile      authority.Profile `json:"profile"`
	UserKey      string            `json:"userKey"`
	State        CredentialState   `json:"state"`
	IssuedAt     wire.EpochMillis  `json:"issuedAt"`
	ExpiresAt    wire.EpochMillis  `json:"expiresAt,omitempty"`
	RevokedAt    wire.EpochMillis  `json:"revokedAt,omitempty"`
	Reason       string            `json:"reason,omitempty"`
	// SourceChain names what the credential derives from, such as "session.<sessionId>".
	SourceChain []string `json:"sourceChain,omitempty"`
	// JWT is the released user JWT, kept so a retried release returns the same bytes; the seed
	// is derived again, never stored.
	JWT string `json:"jwt"`
}

const credentialRowVersion = 1

// Key prefixes of the auth store.
const (
	keyUID  = "uid."
	keyHead = "lifecycle."
	keyGate = "gate."
	keyCred = "cred."
)

// decodeStrict decodes a row, refusing unknown fields and trailing data.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// validate checks a decoded credential row against its key.
func (r *CredentialRow) validate(key string) error {
	switch {
	case r.V != credentialRowVersion:
		return fmt.Errorf("version %d, want %d", r.V, credentialRowVersion)
	case key != keyCred+string(r.LifecycleUID)+"."+r.CredentialID:
		return fmt.Errorf("names lifecycle %q and credential %q, not its key", r.LifecycleUID, r.CredentialID)
	case r.State != CredActive && r.State != CredRevoked:
		return fmt.Errorf("state %q is not active or revoked", r.State)
	case r.JWT == "" || r.UserKey == "":
		return errors.New("no jwt or user key")
	}
	if _, err := wire.ParsePrincipal(r.Principal); err != nil {
		return err
	}
	return nil
}

// ObservedGate is a gate read at one revision.
type ObservedGate struct {
	Row      GateRow
	Revision uint64
	raw      []byte
}

// ObserveGate reads gate.<uid> (leader-served); nil when the lifecycle has no gate.
func (s *Store) ObserveGate(ctx context.Context, uid wire.LifecycleUID) (*ObservedGate, error) {
	key := keyGate + string(uid)
	r, err := s.readNeverDeleted(ctx, key)
	if err != nil || r == nil {
		return nil, err
	}
	var g GateRow
	if err := decodeStrict(r.Value, &g); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
	}
	return &ObservedGate{Row: g, Revision: r.Revision, raw: r.Value}, nil
}

// moveGate moves a gate observed at og (nil: absent) to next, by revision CAS.
func (s *Store) moveGate(ctx context.Context, uid wire.LifecycleUID, og *ObservedGate, next GateRow) (*ObservedGate, error) {
	var from GateState
	var rev uint64
	if og != nil {
		from, rev = og.Row.State, og.Revision
	}
	if err := CheckGateTransition(next.Op.Kind, from, next.State); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(next)
	if err != nil {
		return nil, err
	}
	nrev, err := s.write(ctx, keyGate+string(uid), raw, rev, 0)
	if err != nil {
		return nil, err
	}
	return &ObservedGate{Row: next, Revision: nrev, raw: raw}, nil
}

// touchGate rewrites the gate's bytes at its observed revision: a commit that loses if anything
// moved the gate since it was observed.
func (s *Store) touchGate(ctx context.Context, uid wire.LifecycleUID, og *ObservedGate) error {
	_, err := s.write(ctx, keyGate+string(uid), og.raw, og.Revision, 0)
	return err
}

// confirmGate commits a renewal through the gate at key, observed as raw before the renewal's
// row was rewritten: it reads the gate back and finds it as it was. A renewal moves no gate, and a
// barrier (a freeze, a takeover, a retirement) moves the gate before it sweeps the credential
// rows, so a gate still unchanged after the row's write means any barrier comes later and sweeps
// the renewed row; a gate that moved wins with ErrConflict. Unlike a touch, the read does not
// race the touches of sibling credentials of the same lifecycle (a daemon's on every node of a
// cluster), which renew and issue concurrently.
func (s *Store) confirmGate(ctx context.Context, key string, raw []byte) error {
	cur, err := s.readNeverDeleted(ctx, key)
	if err != nil {
		return err
	}
	if cur == nil || !bytes.Equal(cur.Value, raw) {
		return fmt.Errorf("%s moved while the renewal was written: %w", key, ErrConflict)
	}
	return nil
}

// Head reads lifecycle.<owner>.<actor>; nil when the alias has none. A row that names another
// principal than its key is ErrCorrupt: it never authorizes anything (SPEC §13.1), least of all
// retiring the lifecycle it names.
func (s *Store) Head(ctx context.Context, p wire.Principal) (*LifecycleHead, uint64, error) {
	key := keyHead + p.String()
	r, err := s.readNeverDeleted(ctx, key)
	if err != nil || r == nil {
		return nil, 0, err
	}
	var h LifecycleHead
	if err := decodeStrict(r.Value, &h); err != nil {
		return nil, 0, fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
	}
	if h.Owner != p.Owner() || h.Actor != p.Actor() {
		return nil, 0, fmt.Errorf("%w: %s names %s.%s", ErrCorrupt, key, h.Owner, h.Actor)
	}
	return &h, r.Revision, nil
}

// CurrentEpoch returns the process epoch of the holder's lifecycle, read only from an active
// alias head that names the holder's own UID; anything else is ErrConflict.
func (s *Store) CurrentEpoch(ctx context.Context, holder wire.Lifecycle) (int64, error) {
	h, _, err := s.Head(ctx, holder.Principal)
	if err != nil {
		return 0, err
	}
	if h == nil || h.State != HeadActive || h.LifecycleUID != holder.UID {
		return 0, fmt.Errorf("%w: the alias head of %s does not name lifecycle %s as active", ErrConflict, holder.Principal, holder.UID)
	}
	return h.ProcessEpoch, nil
}

// Activate registers a new lifecycle: its UID reserved (create-only), its gate created open, and
// the alias head moved to it by revision CAS. An alias still held by another active lifecycle is
// ErrConflict: that one must be retired or taken over first. It returns the open gate as
// written, for a first issue against it (IssueObserved) without reading it back.
func (s *Store) Activate(ctx context.Context, l wire.Lifecycle, opID string) (*ObservedGate, error) {
	if err := s.reserve(ctx, l); err != nil {
		return nil, err
	}
	h, rev, err := s.Head(ctx, l.Principal)
	if err != nil {
		return nil, err
	}
	epoch := FirstEpoch
	if h != nil {
		if h.State == HeadActive {
			return nil, fmt.Errorf("activate %s: %w: %s is active as lifecycle %s", l, ErrConflict, l.Principal, h.LifecycleUID)
		}
		epoch = h.ProcessEpoch + 1
	}
	og, err := s.moveGate(ctx, l.UID, nil, GateRow{State: GateOpen, Generation: 1, ProcessEpoch: epoch, Op: GateOp{OpID: opID, Kind: OpActivation}})
	if err != nil {
		return nil, fmt.Errorf("open the gate of %s: %w", l, err)
	}
	head, _ := json.Marshal(LifecycleHead{Owner: l.Principal.Owner(), Actor: l.Principal.Actor(), LifecycleUID: l.UID, ProcessEpoch: epoch, State: HeadActive}) // always encodes
	if _, err := s.write(ctx, keyHead+l.Principal.String(), head, rev, 0); err != nil {
		err = fmt.Errorf("move the alias head of %s: %w", l.Principal, err)
		// The loser of the head's race terminalizes its own orphan gate (SPEC §13.1): no
		// credential is ever issued through a gate the alias never named.
		next := og.Row
		next.State, next.Generation, next.Op = GateRetired, og.Row.Generation+1, GateOp{OpID: opID + "-orphan", Kind: OpRetirement}
		if _, gerr := s.moveGate(ctx, l.UID, og, next); gerr != nil {
			err = errors.Join(err, fmt.Errorf("retire the orphan gate of %s: %w", l, gerr))
		}
		return nil, err
	}
	return og, nil
}

// reserve writes uid.<uid> create-only. A reservation already there for the same principal (a
// retried activation) is fine; one for another principal is ErrConflict.
func (s *Store) reserve(ctx context.Context, l wire.Lifecycle) error {
	key := keyUID + string(l.UID)
	res, _ := json.Marshal(uidReservation{LifecycleUID: l.UID, Principal: l.Principal.String(), ReservedAt: wire.MillisOf(time.Now())}) // always encodes
	_, err := s.write(ctx, key, res, 0, 0)
	if !errors.Is(err, ErrConflict) {
		return err
	}
	r, rerr := s.readNeverDeleted(ctx, key)
	if rerr != nil {
		return rerr
	}
	var have uidReservation
	if r == nil || decodeStrict(r.Value, &have) != nil {
		return fmt.Errorf("%w: %s is not a reservation", ErrCorrupt, key)
	}
	if have.Principal != l.Principal.String() {
		return fmt.Errorf("reserve lifecycle %s: %w: reserved by %s", l.UID, ErrConflict, have.Principal)
	}
	return nil
}

// Retire ends a lifecycle: its gate retired (no credential is ever issued again), every active
// credential revoked in the ledger, and the alias head, if it names this lifecycle, retired. It
// returns the user keys of all its revoked credentials and their sessions, for the broker to refuse.
func (s *Store) Retire(ctx context.Context, l wire.Lifecycle, opID string) ([]string, error) {
	revoked, err := s.retireGate(ctx, l, opID)
	if err != nil {
		return revoked, err
	}
	h, rev, err := s.Head(ctx, l.Principal)
	if err != nil || h == nil || h.LifecycleUID != l.UID || h.State == HeadRetired {
		return revoked, err
	}
	h.State = HeadRetired
	raw, _ := json.Marshal(h) // always encodes
	if _, err := s.write(ctx, keyHead+l.Principal.String(), raw, rev, 0); err != nil {
		return revoked, fmt.Errorf("retire the alias head of %s: %w", l.Principal, err)
	}
	return revoked, nil
}

// retireGate is Retire but for the alias head: the gate retired and every credential revoked.
func (s *Store) retireGate(ctx context.Context, l wire.Lifecycle, opID string) ([]string, error) {
	og, err := s.ObserveGate(ctx, l.UID)
	if err != nil {
		return nil, err
	}
	if og != nil && og.Row.State != GateRetired {
		next := og.Row
		next.State, next.Generation, next.Op = GateRetired, og.Row.Generation+1, GateOp{OpID: opID, Kind: OpRetirement}
		if _, err := s.moveGate(ctx, l.UID, og, next); err != nil {
			return nil, fmt.Errorf("retire the gate of %s: %w", l, err)
		}
	}
	return s.revokeAll(ctx, l.UID, "lifecycle retired")
}

// revokeAll revokes every active credential of a lifecycle and takes down the sessions of every
// revoked one. It returns the user keys of all the lifecycle's revoked credentials and of their
// sessions' halves, not only the ones this call revoked: a barrier resumed after a failed
// eviction must evict again what an earlier run revoked. On an error it returns the keys revoked
// so far, for the broker to refuse all the same.
//
// A row that cannot be read does not shield the others: the well-formed rows are revoked, and the
// corrupt one is reported in the error.
func (s *Store) revokeAll(ctx context.Context, uid wire.LifecycleUID, reason string) ([]string, error) {
	rows, listErr := s.Credentials(ctx, uid)
	if listErr != nil && !errors.Is(listErr, ErrCorrupt) {
		return nil, listErr
	}
	var keys []string
	for _, r := range rows {
		more, err := s.revokeWithSessions(ctx, &r, reason)
		keys = append(keys, more...)
		if err != nil {
			return dedupe(keys), errors.Join(err, listErr)
		}
	}
	return dedupe(keys), listErr
}

// revokeWithSessions revokes a credential row (if it is active) and supersedes its sessions, and
// returns the user keys involved.
func (s *Store) revokeWithSessions(ctx context.Context, r *CredentialRow, reason string) ([]string, error) {
	if r.State == CredActive {
		if _, err := s.revokeRow(ctx, r.LifecycleUID, r.CredentialID, reason); err != nil {
			return nil, err
		}
	}
	more, err := s.SupersedeSessions(ctx, *r)
	return append([]string{r.UserKey}, more...), err
}

// SupersedeSessions tears down every session a credential row's source chain names (a barrier
// revoking the row must take its sessions with it, SPEC §13.6): each row goes superseded and both
// halves are revoked. It returns the user keys the broker must refuse.
func (s *Store) SupersedeSessions(ctx context.Context, r CredentialRow) ([]string, error) {
	var keys []string
	for _, id := range sessionsOf(r) {
		t, err := s.ReconcileSessionForTakeover(ctx, id)
		if t != nil {
			keys = append(keys, t.RevokedKeys...)
		}
		if err != nil {
			return keys, err
		}
	}
	return keys, nil
}

// dedupe returns keys sorted, each once.
func dedupe(keys []string) []string {
	slices.Sort(keys)
	return slices.Compact(keys)
}

// credential reads cred.<uid>.<id>; nil when absent.
func (s *Store) credential(ctx context.Context, uid wire.LifecycleUID, id string) (*CredentialRow, uint64, error) {
	key := keyCred + string(uid) + "." + id
	r, err := s.read(ctx, key)
	if err != nil || r == nil || r.Deleted {
		return nil, 0, err
	}
	var row CredentialRow
	if err := decodeStrict(r.Value, &row); err != nil {
		return nil, 0, fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
	}
	if err := row.validate(key); err != nil {
		return nil, 0, fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
	}
	return &row, r.Revision, nil
}

// Credentials lists a lifecycle's credential rows ("" for every lifecycle). A malformed row is
// an ErrCorrupt error listing it, after the others.
func (s *Store) Credentials(ctx context.Context, uid wire.LifecycleUID) ([]CredentialRow, error) {
	filter := keyCred + ">"
	if uid != "" {
		filter = keyCred + string(uid) + ".>"
	}
	keys, err := s.keys(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("list credentials: %w", err)
	}
	return readRows(keys, func(key string) (*CredentialRow, error) {
		u, id, ok := strings.Cut(strings.TrimPrefix(key, keyCred), ".")
		if !ok {
			return nil, fmt.Errorf("%w: %s is not cred.<lifecycleUid>.<credentialId>", ErrCorrupt, key)
		}
		row, _, err := s.credential(ctx, wire.LifecycleUID(u), id)
		return row, err
	})
}

// readRows reads the credential rows of keys in key order with read (nil: no row there): the
// rows it could read, and the errors of the others joined after them, so a malformed row never
// hides the rest.
func readRows(keys []string, read func(key string) (*CredentialRow, error)) ([]CredentialRow, error) {
	slices.Sort(keys)
	var rows []CredentialRow
	var bad []error
	for _, key := range keys {
		row, err := read(key)
		switch {
		case err != nil:
			bad = append(bad, err)
		case row != nil:
			rows = append(rows, *row)
		}
	}
	return rows, errors.Join(bad...)
}

// Revoke revokes a credential: its row moves to revoked (idempotently) and, when it is a
// session's caller half, the session is taken down with its serving half. It returns the row and
// the user keys the broker must now refuse; it does not by itself stop anything at the broker.
func (s *Store) Revoke(ctx context.Context, uid wire.LifecycleUID, credentialID, reason string) (*CredentialRow, []string, error) {
	row, _, err := s.credential(ctx, uid, credentialID)
	if err != nil {
		return nil, nil, err
	}
	if row == nil {
		return nil, nil, fmt.Errorf("no credential %s in lifecycle %s", credentialID, uid)
	}
	keys, err := s.revokeWithSessions(ctx, row, reason)
	if err != nil {
		return nil, dedupe(keys), err
	}
	row, _, err = s.credential(ctx, uid, credentialID)
	return row, dedupe(keys), err
}

// revokeAttempts bounds how often a revocation reads its row again after losing a
// compare-and-set: on a cluster a replica's read may trail the write it raced.
const revokeAttempts = 5

// revokeRow moves a credential row to revoked, idempotently, and returns it. A write that loses
// its compare-and-set reads the row again and retries, since revoking is idempotent.
func (s *Store) revokeRow(ctx context.Context, uid wire.LifecycleUID, credentialID, reason string) (*CredentialRow, error) {
	for attempt := 1; ; attempt++ {
		row, rev, err := s.credential(ctx, uid, credentialID)
		if err != nil {
			return nil, err
		}
		if row == nil {
			return nil, fmt.Errorf("no credential %s in lifecycle %s", credentialID, uid)
		}
		if row.State == CredRevoked {
			return row, nil
		}
		row.State, row.RevokedAt, row.Reason = CredRevoked, wire.MillisOf(time.Now()), reason
		raw, _ := json.Marshal(row) // always encodes
		_, err = s.write(ctx, keyCred+string(uid)+"."+credentialID, raw, rev, credTTL(row))
		switch {
		case err == nil:
			return row, nil
		case !errors.Is(err, ErrConflict) || attempt == revokeAttempts:
			return nil, fmt.Errorf("revoke %s: %w", credentialID, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
		}
	}
}

// EvictKeys makes the broker refuse the given user keys and returns only once none of their
// connections is left, or fails.
type EvictKeys func(ctx context.Context, userKeys []string) error

// Takeover runs the takeover barrier on a lifecycle whose process is being replaced (SPEC
// §13.1), in this order: freeze the gate (no credential commits from here on); revoke every
// active credential, taking their sessions down with them, and evict them, verified; move the
// alias head to the next process epoch by CAS; reopen the gate at that epoch. It returns the new
// epoch. A barrier that stopped part way resumes when run again with the same opID; a gate
// frozen by another operation is ErrConflict.
func (s *Store) Takeover(ctx context.Context, l wire.Lifecycle, opID string, evict EvictKeys) (int64, error) {
	og, err := s.ObserveGate(ctx, l.UID)
	if err != nil {
		return 0, err
	}
	switch {
	case og == nil:
		return 0, fmt.Errorf("take over %s: %w: it has no gate", l, ErrConflict)
	case og.Row.State == GateOpen && og.Row.Op.Kind == OpTakeover && og.Row.Op.OpID == opID:
		return og.Row.ProcessEpoch, nil // this barrier already completed
	case og.Row.State == GateOpen:
		frozen := og.Row
		frozen.State, frozen.Generation, frozen.Op = GateFrozen, og.Row.Generation+1, GateOp{OpID: opID, Kind: OpTakeover}
		if og, err = s.moveGate(ctx, l.UID, og, frozen); err != nil {
			return 0, fmt.Errorf("freeze the gate of %s: %w", l, err)
		}
	case og.Row.State != GateFrozen || og.Row.Op.OpID != opID:
		return 0, fmt.Errorf("take over %s: %w: its gate is %s by %s", l, ErrConflict, og.Row.State, og.Row.Op.OpID)
	}
	revoked, err := s.revokeAll(ctx, l.UID, "process taken over")
	if len(revoked) > 0 {
		if eerr := evict(ctx, revoked); eerr != nil {
			err = errors.Join(err, fmt.Errorf("take over %s: evict: %w", l, eerr))
		}
	}
	if err != nil {
		return 0, err
	}
	h, rev, err := s.Head(ctx, l.Principal)
	if err != nil {
		return 0, err
	}
	if h == nil || h.State != HeadActive || h.LifecycleUID != l.UID {
		return 0, fmt.Errorf("take over %s: %w: the alias head does not name it as active", l, ErrConflict)
	}
	switch h.ProcessEpoch {
	case og.Row.ProcessEpoch: // not moved yet by an earlier run of this barrier
		h.ProcessEpoch++
		raw, _ := json.Marshal(h) // always encodes
		if _, err := s.write(ctx, keyHead+l.Principal.String(), raw, rev, 0); err != nil {
			return 0, fmt.Errorf("move the process epoch of %s: %w", l, err)
		}
	case og.Row.ProcessEpoch + 1: // moved by an earlier run
	default:
		return 0, fmt.Errorf("take over %s: %w: its head is at epoch %d, its gate at %d", l, ErrConflict, h.ProcessEpoch, og.Row.ProcessEpoch)
	}
	open := og.Row
	open.State, open.Generation, open.ProcessEpoch = GateOpen, og.Row.Generation+1, h.ProcessEpoch
	if _, err := s.moveGate(ctx, l.UID, og, open); err != nil {
		return 0, fmt.Errorf("reopen the gate of %s: %w", l, err)
	}
	return h.ProcessEpoch, nil
}
