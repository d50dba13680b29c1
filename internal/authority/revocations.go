package authority

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// Revocations are kept beside a space's keys and written into its account JWT, which is how the
// broker refuses a revoked credential: at connect, and by closing its live connections when the
// updated account reaches it.

func (k *Keyring) revocationsPath(space wire.Space) string {
	return filepath.Join(k.dir, "space."+string(space)+".revocations.json")
}

// Revocations returns the space's revoked user keys with the time each was revoked.
func (k *Keyring) Revocations(space wire.Space) (map[string]int64, error) {
	raw, err := os.ReadFile(k.revocationsPath(space))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]int64{}, nil
	}
	if err != nil {
		return nil, &KeyFileError{Path: k.revocationsPath(space), Err: err}
	}
	out := map[string]int64{}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, &KeyFileError{Path: k.revocationsPath(space), Err: fmt.Errorf("not a revocation list: %w", err)}
	}
	return out, nil
}

// lockRevocations takes the space's revocation lock: an exclusive lock on a file beside the list,
// held by one process and one caller at a time, so that read-modify-writes of the list and the
// pushes of the account JWT rendered from it happen one after another and the last push carries
// every revocation. unlock releases it.
func (k *Keyring) lockRevocations(ctx context.Context, space wire.Space) (unlock func(), err error) {
	path := filepath.Join(k.dir, "space."+string(space)+".revocations.lock")
	unlock, err = atomicfile.Lock(ctx, path) // a revocation waits its turn, within ctx
	if err != nil {
		return nil, &KeyFileError{Path: path, Err: err}
	}
	return unlock, nil
}

// RevokeAndPush records that the user keys may no longer connect to the space (as of now) and
// calls push with the account JWT rendered from the whole list, under the space's revocation
// lock: revocations made at once, by this process or another on the same keyring, are never
// lost to a push that did not carry them.
func (k *Keyring) RevokeAndPush(ctx context.Context, space wire.Space, userKeys []string, push func(accountJWT string) error) error {
	unlock, err := k.lockRevocations(ctx, space)
	if err != nil {
		return err
	}
	defer unlock()
	if err := k.revoke(space, userKeys); err != nil {
		return err
	}
	sk, err := k.Space(space)
	if err != nil {
		return err
	}
	token, err := k.AccountJWT(sk)
	if err != nil {
		return err
	}
	return push(token)
}

// Revoke records that the user keys may no longer connect to the space (as of now). The account
// JWT carries the list from then on; pushing it to a running broker is the caller's step
// (RevokeAndPush does both).
func (k *Keyring) Revoke(ctx context.Context, space wire.Space, userKeys ...string) error {
	unlock, err := k.lockRevocations(ctx, space)
	if err != nil {
		return err
	}
	defer unlock()
	return k.revoke(space, userKeys)
}

// revoke is Revoke under the lock.
func (k *Keyring) revoke(space wire.Space, userKeys []string) error {
	if _, err := wire.ParseSpace(string(space)); err != nil {
		return err
	}
	list, err := k.Revocations(space)
	if err != nil {
		return err
	}
	now := time.Now().Unix()
	for _, u := range userKeys {
		if !nkeys.IsValidPublicUserKey(u) {
			return &wire.ValidationError{Field: "user key", Value: u, Rule: "must be a user public nkey"}
		}
		// The latest time: the broker refuses every JWT of the key issued at or before it, so a
		// later time refuses more (a JWT renewed in between included), never less.
		list[u] = max(list[u], now)
	}
	return k.writeRevocations(space, list)
}

// writeRevocations replaces the space's list, under the lock.
func (k *Keyring) writeRevocations(space wire.Space, list map[string]int64) error {
	raw, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(k.revocationsPath(space), append(raw, '\n'), 0o600)
}

// liveRevocations returns the revocations of token, the space's account JWT as a server of the
// cluster holds it: refused unless it is the space's account, signed by this keyring's operator.
func (k *Keyring) liveRevocations(space wire.Space, token string) (jwt.RevocationList, error) {
	sk, err := k.Space(space)
	if err != nil {
		return nil, err
	}
	ac, err := jwt.DecodeAccountClaims(token)
	if err != nil {
		return nil, fmt.Errorf("the account JWT of space %s a server holds: %w", space, err)
	}
	if ac.Subject != sk.AccountPublicKey() || ac.Issuer != k.OperatorPublicKey() {
		return nil, fmt.Errorf("the account JWT of space %s a server holds is of account %s, signed by %s: not this keyring's", space, ac.Subject, ac.Issuer)
	}
	return ac.Revocations, nil
}

// MergeRevocations adds to the space's list what token, the space's account JWT as a server of
// the cluster holds it, revokes and the list lacks (the later time where both name a key): the
// revocations another authority node of the cluster pushed. A revocation made before since is
// left out: it is one the nodes prune, and merging it back would undo the prune. It reports
// whether the list grew.
func (k *Keyring) MergeRevocations(ctx context.Context, space wire.Space, token string, since time.Time) (bool, error) {
	live, err := k.liveRevocations(space, token)
	if err != nil {
		return false, err
	}
	unlock, err := k.lockRevocations(ctx, space)
	if err != nil {
		return false, err
	}
	defer unlock()
	list, err := k.Revocations(space)
	if err != nil {
		return false, err
	}
	grew := false
	for u, at := range live {
		if nkeys.IsValidPublicUserKey(u) && at > list[u] && at >= since.Unix() {
			list[u], grew = at, true
		}
	}
	if !grew {
		return false, nil
	}
	return true, k.writeRevocations(space, list)
}

// Carries reports whether token, the space's account JWT as a server of the cluster holds it,
// revokes every key of the space's list, each as of its time or later: whether it needs a push.
func (k *Keyring) Carries(space wire.Space, token string) (bool, error) {
	live, err := k.liveRevocations(space, token)
	if err != nil {
		return false, err
	}
	list, err := k.Revocations(space)
	if err != nil {
		return false, err
	}
	for u, at := range list {
		if live[u] < at {
			return false, nil
		}
	}
	return true, nil
}

// PruneRevocations drops the revocations drop names, given each user key and when it was
// revoked, and returns how many it dropped. The account JWT rendered from then on carries the
// shorter list; pushing it to a running broker is the caller's step.
func (k *Keyring) PruneRevocations(ctx context.Context, space wire.Space, drop func(userKey string, revokedAt time.Time) bool) (int, error) {
	unlock, err := k.lockRevocations(ctx, space)
	if err != nil {
		return 0, err
	}
	defer unlock()
	list, err := k.Revocations(space)
	if err != nil {
		return 0, err
	}
	n := 0
	for u, at := range list {
		if drop(u, time.Unix(at, 0)) {
			delete(list, u)
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	return n, k.writeRevocations(space, list)
}

// MintSystemUser mints a user of the system account, for the $SYS requests only the authority
// makes (pushing account updates, listing connections) and the account events it hears: it may
// publish pubAllow and subscribe its inbox and subAllow. It is signed by the system account key,
// short-lived, and never handed to an agent.
func (k *Keyring) MintSystemUser(name string, pubAllow, subAllow []string, life time.Duration) (*Credential, error) {
	user, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	pub := PublicKey(user)
	uc := jwt.NewUserClaims(pub)
	uc.Name = name
	uc.Permissions.Pub.Allow = jwt.StringList(pubAllow)
	uc.Permissions.Sub.Allow = append(jwt.StringList{meshwire.InboxGrant(wire.ConnID(pub))}, subAllow...)
	seed, err := user.Seed()
	if err != nil {
		return nil, err
	}
	return signUser(uc, seed, life, k.system)
}

// RenewSystemUser re-signs a system user minted by MintSystemUser for life from now: the same key
// and permissions, a fresh JWT.
func (k *Keyring) RenewSystemUser(c *Credential, life time.Duration) (*Credential, error) {
	uc, err := jwt.DecodeUserClaims(c.JWT)
	if err != nil {
		return nil, fmt.Errorf("renew system user %s: %w", c.Profile, err)
	}
	if uc.Issuer != k.SystemAccountPublicKey() {
		return nil, fmt.Errorf("renew system user %s: it was not signed by this system account", c.Profile)
	}
	kp, err := jwt.ParseDecoratedUserNKey(c.Creds)
	if err != nil {
		return nil, fmt.Errorf("renew system user %s: %w", c.Profile, err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, err
	}
	return signUser(uc, seed, life, k.system)
}

// MintStoreUser mints a user of space's store account, signed by its key, with no permission
// bound: it reads and writes every stream and bucket of the space directly, and a reply subject
// it sets can reach a stream there, as none from the space's account can. The mesh never mints
// one; whoever holds the space's keys may, to repair a store by hand or, in tests, to plant what
// a capture would have stored.
func (k *Keyring) MintStoreUser(space wire.Space, name string, life time.Duration) (*Credential, error) {
	sk, err := k.Space(space)
	if err != nil {
		return nil, err
	}
	user, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	uc := jwt.NewUserClaims(PublicKey(user))
	uc.Name = name
	seed, err := user.Seed()
	if err != nil {
		return nil, err
	}
	return signUser(uc, seed, life, sk.store)
}

// signUser signs uc, issued now and living life, with an account's key, and returns it as a
// credential with seed.
func signUser(uc *jwt.UserClaims, seed []byte, life time.Duration, account nkeys.KeyPair) (*Credential, error) {
	now := time.Now()
	uc.IssuedAt, uc.Expires = now.Unix(), now.Add(life).Unix()
	token, err := uc.Encode(account)
	if err != nil {
		return nil, fmt.Errorf("sign user %s: %w", uc.Name, err)
	}
	creds, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		return nil, err
	}
	return &Credential{Profile: Profile(uc.Name), PublicKey: uc.Subject, JWT: token, Creds: creds, Expires: time.Unix(uc.Expires, 0)}, nil
}
