package authstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/wire"
)

// Repair is what a repair did with one corrupt row.
type Repair struct {
	Key string
	// Did says what replaced the row; empty when the row was left as it was.
	Did string
	// Err says why the row was left as it was; nil when it was replaced.
	Err error
}

// repairCredentials replaces each corrupt credential row with a well-formed revoked one, and
// returns what it did with each, and the user keys the broker must refuse. A credential row's
// user key derives from its credential id, so whatever credential the row stood for is revoked
// without reading it; its principal comes from the lifecycle's uid reservation, its profile
// from the corrupt row when that much of it reads. The replacement never expires, so its
// revocation is never pruned, and its JWT is one with no permissions that expired when it was
// signed. A row whose key names no lifecycle and credential, or whose lifecycle has no readable
// reservation, is left for the operator, with the reason.
func (s *Store) repairCredentials(ctx context.Context, keys *authority.SpaceKeys) ([]Repair, []string, error) {
	if keys.Space != s.space {
		return nil, nil, fmt.Errorf("repair: keys of space %s for the auth store of %s", keys.Space, s.space)
	}
	all, err := s.keys(ctx, keyCred+">")
	if err != nil {
		return nil, nil, fmt.Errorf("list credentials: %w", err)
	}
	slices.Sort(all)
	var repairs []Repair
	var revoked []string
	for _, key := range all {
		u, id, ok := strings.Cut(strings.TrimPrefix(key, keyCred), ".")
		if !ok {
			repairs = append(repairs, Repair{Key: key, Err: errors.New("the key names no lifecycle and credential")})
			continue
		}
		if _, _, err := s.credential(ctx, wire.LifecycleUID(u), id); !errors.Is(err, ErrCorrupt) {
			continue // sound, gone, or unreadable for another reason (reported by Check)
		}
		userKey, err := s.replaceCredential(ctx, keys, key, wire.LifecycleUID(u), id)
		if err != nil {
			repairs = append(repairs, Repair{Key: key, Err: err})
			continue
		}
		repairs = append(repairs, Repair{Key: key, Did: "replaced by a revoked row; the broker refuses " + userKey})
		revoked = append(revoked, userKey)
	}
	return repairs, revoked, nil
}

// replaceCredential writes the revoked replacement of the corrupt row at key.
func (s *Store) replaceCredential(ctx context.Context, keys *authority.SpaceKeys, key string, uid wire.LifecycleUID, id string) (string, error) {
	if err := checkCredentialID(id); err != nil {
		return "", err
	}
	if _, err := wire.ParseLifecycleUID(string(uid)); err != nil {
		return "", err
	}
	res, err := s.readNeverDeleted(ctx, keyUID+string(uid))
	if err != nil || res == nil {
		return "", fmt.Errorf("the lifecycle's reservation cannot be read (%v): its principal is unknown", err)
	}
	var rsv uidReservation
	if err := decodeStrict(res.Value, &rsv); err != nil {
		return "", fmt.Errorf("the lifecycle's reservation is corrupt too: %v", err)
	}
	cur, err := s.read(ctx, key)
	if err != nil || cur == nil {
		return "", fmt.Errorf("read %s: %v", key, err)
	}
	var loose struct {
		Profile authority.Profile `json:"profile"`
	}
	_ = json.Unmarshal(cur.Value, &loose) // best effort: a row too broken for it keeps no profile
	if _, err := authority.ParseProfile(string(loose.Profile)); err != nil {
		loose.Profile = ""
	}
	user, err := keys.UserKey(id)
	if err != nil {
		return "", err
	}
	pub := authority.PublicKey(user)
	now := time.Now()
	uc := jwt.NewUserClaims(pub)
	uc.Name = "revoked"
	uc.IssuerAccount = keys.AccountPublicKey()
	uc.IssuedAt, uc.Expires = now.Unix(), now.Unix()
	token, err := keys.SignClaims(uc)
	if err != nil {
		return "", err
	}
	row := CredentialRow{
		V: credentialRowVersion, CredentialID: id, LifecycleUID: uid, Principal: rsv.Principal, Profile: loose.Profile,
		UserKey: pub, State: CredRevoked, IssuedAt: wire.MillisOf(now), RevokedAt: wire.MillisOf(now),
		Reason: "the row was corrupt; replaced by cotal doctor auth --fix", JWT: token,
	}
	if err := row.validate(key); err != nil {
		return "", err
	}
	raw, _ := json.Marshal(row) // always encodes
	if _, err := s.write(ctx, key, raw, cur.Revision, 0); err != nil {
		return "", err
	}
	return pub, nil
}

// RepairAll repairs every corrupt row it knows how to, failing safe, and returns what it did with
// each and the user keys the broker must refuse:
//   - a credential row, as repairCredentials;
//   - a gate: replaced by a retired gate, and its lifecycle retired (its credentials revoked, the
//     alias head released if it names it): a gate that cannot be read can open nothing;
//   - an alias head: every lifecycle of the principal with an open gate is retired, and the head
//     is rewritten retired, naming the principal's last reserved lifecycle, so the next issue
//     activates a fresh one;
//   - a session row: both halves' keys (derived from their credential ids) refused, and the row
//     and its stage pins removed;
//   - a stage pin: removed.
//
// A row it cannot repair is reported with the reason.
func (s *Store) RepairAll(ctx context.Context, keys *authority.SpaceKeys) ([]Repair, []string, error) {
	repairs, revoked, err := s.repairCredentials(ctx, keys)
	if err != nil {
		return repairs, revoked, err
	}
	all, err := s.keys(ctx, ">")
	if err != nil {
		return repairs, revoked, fmt.Errorf("list the auth store: %w", err)
	}
	slices.Sort(all)
	removed := map[string]bool{} // the stage pins of the sessions this pass removed
	for _, key := range all {
		if strings.HasPrefix(key, keyCred) || removed[key] || !errors.Is(s.checkRow(ctx, key), ErrCorrupt) {
			continue
		}
		var did string
		var refused []string
		switch {
		case strings.HasPrefix(key, keyGate):
			did, refused, err = s.repairGate(ctx, key)
		case strings.HasPrefix(key, keyHead):
			did, refused, err = s.repairHead(ctx, key)
		case strings.HasPrefix(key, keySession):
			sid := strings.TrimPrefix(key, keySession)
			removed[keyStageSession+sid+"."+string(partyCaller)] = true
			removed[keyStageSession+sid+"."+string(partyServing)] = true
			did, refused, err = s.repairSession(ctx, keys, key)
		case strings.HasPrefix(key, keyStageSession):
			did, err = "removed", s.pruneRow(ctx, key)
		default:
			err = errors.New("no repair is known for this kind of row")
		}
		revoked = append(revoked, refused...)
		repairs = append(repairs, Repair{Key: key, Did: did, Err: err})
	}
	return repairs, dedupe(revoked), nil
}

// pruneRow removes key at its current revision.
func (s *Store) pruneRow(ctx context.Context, key string) error {
	r, err := s.read(ctx, key)
	if err != nil || r == nil {
		return err
	}
	return s.prune(ctx, key, r.Revision)
}

// Reserved reports whether uid is a lifecycle of the store: one ever activated holds a uid
// reservation, which is never deleted. A control instrument's caller uid is none.
func (s *Store) Reserved(ctx context.Context, uid wire.LifecycleUID) (bool, error) {
	r, err := s.read(ctx, keyUID+string(uid))
	return r != nil, err
}

// reservation reads the uid reservation of a lifecycle.
func (s *Store) reservation(ctx context.Context, uid wire.LifecycleUID) (*uidReservation, error) {
	r, err := s.readNeverDeleted(ctx, keyUID+string(uid))
	if err != nil || r == nil {
		return nil, fmt.Errorf("the reservation of lifecycle %s cannot be read (%v)", uid, err)
	}
	var rsv uidReservation
	if err := decodeStrict(r.Value, &rsv); err != nil {
		return nil, fmt.Errorf("the reservation of lifecycle %s is corrupt: %v", uid, err)
	}
	return &rsv, nil
}

const repairOp = "doctor-fix"

// repairGate replaces a corrupt gate with a retired one and retires its lifecycle.
func (s *Store) repairGate(ctx context.Context, key string) (string, []string, error) {
	uid := wire.LifecycleUID(strings.TrimPrefix(key, keyGate))
	rsv, err := s.reservation(ctx, uid)
	if err != nil {
		return "", nil, err
	}
	p, err := wire.ParsePrincipal(rsv.Principal)
	if err != nil {
		return "", nil, err
	}
	cur, err := s.read(ctx, key)
	if err != nil || cur == nil {
		return "", nil, fmt.Errorf("read %s: %v", key, err)
	}
	raw, _ := json.Marshal(GateRow{State: GateRetired, Generation: 1, ProcessEpoch: 1, Op: GateOp{OpID: repairOp, Kind: OpRetirement}}) // always encodes
	if _, err := s.write(ctx, key, raw, cur.Revision, 0); err != nil {
		return "", nil, err
	}
	revoked, err := s.Retire(ctx, wire.Lifecycle{Principal: p, UID: uid}, repairOp+"-"+string(uid))
	return "replaced by a retired gate; lifecycle " + string(uid) + " of " + p.String() + " retired", revoked, err
}

// repairHead retires every open lifecycle of the head's principal and rewrites the head retired.
func (s *Store) repairHead(ctx context.Context, key string) (string, []string, error) {
	p, err := wire.ParsePrincipal(strings.TrimPrefix(key, keyHead))
	if err != nil {
		return "", nil, err
	}
	uids, err := s.keys(ctx, keyUID+"*")
	if err != nil {
		return "", nil, err
	}
	var last *uidReservation
	var revoked []string
	for _, k := range uids {
		rsv, err := s.reservation(ctx, wire.LifecycleUID(strings.TrimPrefix(k, keyUID)))
		if err != nil || rsv.Principal != p.String() {
			continue // a corrupt reservation is the doctor's to name
		}
		if last == nil || rsv.ReservedAt > last.ReservedAt {
			last = rsv
		}
		og, err := s.ObserveGate(ctx, rsv.LifecycleUID)
		if err != nil || og == nil || og.Row.State == GateRetired {
			continue
		}
		// The head is the corrupt row, so the lifecycle is retired without it.
		keys, err := s.retireGate(ctx, wire.Lifecycle{Principal: p, UID: rsv.LifecycleUID}, repairOp+"-"+string(rsv.LifecycleUID))
		revoked = append(revoked, keys...)
		if err != nil {
			return "", revoked, err
		}
	}
	if last == nil {
		return "", revoked, fmt.Errorf("no lifecycle of %s is reserved: nothing to name", p)
	}
	cur, err := s.read(ctx, key)
	if err != nil || cur == nil {
		return "", revoked, fmt.Errorf("read %s: %v", key, err)
	}
	raw, _ := json.Marshal(LifecycleHead{Owner: p.Owner(), Actor: p.Actor(), LifecycleUID: last.LifecycleUID, ProcessEpoch: 1, State: HeadRetired}) // always encodes
	if _, err := s.write(ctx, key, raw, cur.Revision, 0); err != nil {
		return "", revoked, err
	}
	return "rewritten retired; every open lifecycle of " + p.String() + " retired", revoked, nil
}

// repairSession refuses both halves of a corrupt session and removes it with its stage pins.
func (s *Store) repairSession(ctx context.Context, keys *authority.SpaceKeys, key string) (string, []string, error) {
	sid := strings.TrimPrefix(key, keySession)
	var revoked []string
	for _, party := range []sessionParty{partyCaller, partyServing} {
		user, err := keys.UserKey(sessionCredentialID(sid, party))
		if err != nil {
			return "", nil, err
		}
		revoked = append(revoked, authority.PublicKey(user))
	}
	if err := s.removeStagePins(ctx, sid); err != nil {
		return "", revoked, err
	}
	return "removed; the broker refuses both halves", revoked, s.pruneRow(ctx, key)
}
