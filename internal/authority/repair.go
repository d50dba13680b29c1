package authority

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/gocotal/cotal/wire"
)

// Repair is what RepairCredentials did with one corrupt credential row.
type Repair struct {
	Key string
	// UserKey is the key the row's credential id derives, refused by the broker from now on;
	// empty when the row was left as it was.
	UserKey string
	// Err says why the row was left as it was; nil when it was replaced.
	Err error
}

// RepairCredentials replaces each corrupt credential row with a well-formed revoked one, and
// returns what it did with each, and the user keys the broker must refuse. A credential row's
// user key derives from its credential id, so whatever credential the row stood for is revoked
// without reading it; its principal comes from the lifecycle's uid reservation, its profile
// from the corrupt row when that much of it reads. The replacement never expires, so its
// revocation is never pruned, and its JWT is one with no permissions that expired when it was
// signed. A row whose key names no lifecycle and credential, or whose lifecycle has no readable
// reservation, is left for the operator, with the reason.
func (s *AuthStore) RepairCredentials(ctx context.Context, keys *SpaceKeys) ([]Repair, []string, error) {
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
		repairs = append(repairs, Repair{Key: key, UserKey: userKey})
		revoked = append(revoked, userKey)
	}
	return repairs, revoked, nil
}

// replaceCredential writes the revoked replacement of the corrupt row at key.
func (s *AuthStore) replaceCredential(ctx context.Context, keys *SpaceKeys, key string, uid wire.LifecycleUID, id string) (string, error) {
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
		Profile Profile `json:"profile"`
	}
	_ = json.Unmarshal(cur.Value, &loose) // best effort: a row too broken for it keeps no profile
	if _, err := ParseProfile(string(loose.Profile)); err != nil {
		loose.Profile = ""
	}
	user, err := keys.userKeyFor(id)
	if err != nil {
		return "", err
	}
	pub := mustPublic(user)
	now := time.Now()
	uc := jwt.NewUserClaims(pub)
	uc.Name = "revoked"
	uc.IssuerAccount = keys.AccountPublicKey()
	uc.IssuedAt, uc.Expires = now.Unix(), now.Unix()
	token, err := uc.Encode(keys.signing)
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
